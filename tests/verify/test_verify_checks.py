"""`verify all` fails when it has not checked what it claims (CONVENTIONS #19): a finished run that
cannot enter the tables, a ledger without its schema version, a --tables folder that is not there."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest

from rlvr_sweep import store
from rlvr_sweep.run import run
from rlvr_sweep.store.manifest import manifest_bytes
from rlvr_sweep.verify.cli import main as verify_main
from tests.helpers import compose_cfg


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("verify_checks") / "runs"
    for seed in (1, 2):
        run(compose_cfg(["+arm=ra_flat", "profile=smoke", "train.steps=2", "eval.limit=3", f"seed={seed}",
                         f"run.out_root={root}"]))
    return root


def copy_of(two_runs, tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(two_runs, root)
    return root, sorted(root.glob("smoke/ra_flat/h512_s1_*"))[0]


def rewrite(path, metadata: dict | None) -> None:
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata(metadata), path)


def test_a_finished_run_of_an_older_schema_fails_verify(two_runs, tmp_path, capsys):
    """Seen: a finished run whose tables carry an older result schema was left out of every table, yet
    `verify all` exited 0 ("1 finished run(s) left out as damaged"). Want: non-zero, naming it."""
    root, old = copy_of(two_runs, tmp_path)
    for name in ("steps", "rollouts", "pairs", "grades"):
        rewrite(old / f"{name}.parquet", {b"rlvr_sweep.schema_version": b"2"})
    (old / store.MANIFEST).write_bytes(manifest_bytes(old))  # written whole by an older version: intact
    assert verify_main(["all", str(root)]) == 1
    out = capsys.readouterr().out
    assert "PASS 1 FAILED" in out and "written with result schema 2, this code reads 3" in out
    assert "PASS 3 FAILED" in out and f"{old}: a finished run that cannot enter the tables" in out
    assert out.splitlines()[-1].startswith("== verify all: 2/4 passes ok")


def test_a_ledger_without_its_schema_version_fails_verify(two_runs, tmp_path, capsys):
    """Seen: a ledger rewritten without its schema metadata dropped out of PASS 3/4 silently, PASS 1
    called it intact and verify exited 0 having checked 0 pairs. Want: named, non-zero."""
    root, run_dir = copy_of(two_runs, tmp_path)
    rewrite(run_dir / "pairs.parquet", None)
    (run_dir / store.MANIFEST).write_bytes(manifest_bytes(run_dir))
    assert verify_main(["all", str(root)]) == 1
    out = capsys.readouterr().out
    assert "pairs.parquet: written with result schema none (no schema metadata)" in out
    assert "PASS 3 FAILED" in out


def test_tables_that_are_not_there_are_bad_input(two_runs, tmp_path, capsys):
    """Seen: `verify all ROOT --tables /nonexistent` exited 0 ("0 saved tables rebuilt")."""
    assert verify_main(["all", str(two_runs), "--tables", str(tmp_path / "nonexistent")]) == 2
    assert "--tables" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert verify_main(["all", str(two_runs), "--tables", str(tmp_path / "empty")]) == 1
    assert "holds no saved table to compare" in capsys.readouterr().out


def test_an_intact_sweep_passes_with_its_tables_chosen_by_where(two_runs, tmp_path, capsys):
    from rlvr_sweep.analysis.cli import main as analysis_main

    assert analysis_main(["tables", str(two_runs), "--out", str(tmp_path / "t"), "--where", "seed=1",
                          "--resamples", "50"]) == 0
    assert json.loads((tmp_path / "t" / "selection.json").read_text())["where"] == ["seed=1"]
    capsys.readouterr()
    assert verify_main(["all", str(two_runs), "--tables", str(tmp_path / "t")]) == 0, capsys.readouterr().out


def test_a_finished_run_whose_rewards_cannot_all_be_regraded_fails_pass1(two_runs, tmp_path):
    """A finished run's rollout rows without their gold cannot be regraded: PASS 1 names them as not checked and
    fails, never passes on the rows it could check (#19)."""
    import pyarrow as pa

    from rlvr_sweep.verify.passes import pass1

    root, run_dir = copy_of(two_runs, tmp_path)
    assert pass1(root, jobs=1).ok
    rollouts = pq.read_table(run_dir / "rollouts.parquet")
    gold = rollouts.column("gold").to_pylist()
    gold[:2] = [None, None]
    at = rollouts.schema.get_field_index("gold")
    pq.write_table(rollouts.set_column(at, rollouts.schema.field(at), pa.array(gold, rollouts.schema.field(at).type)),
                   run_dir / "rollouts.parquet")  # its schema metadata kept
    (run_dir / store.MANIFEST).write_bytes(manifest_bytes(run_dir))  # intact: only two golds are gone
    result = pass1(root, jobs=1)
    assert not result.ok and result.summary.endswith("2/2 run folders intact")
    assert [p.split(": ", 1)[1] for p in result.problems] == ["rollouts: 2 row(s) without a gold not checked"]


def test_training_runs_whose_pair_ledgers_are_empty_fail_pass3(two_runs, tmp_path):
    """Two training runs whose pairs.parquet hold no row (their manifests rewritten, so PASS 1 calls them intact):
    "0 pairs obey the conservation laws" checked nothing, and PASS 3 says so and fails (#19)."""
    from rlvr_sweep.verify.passes import pass3

    root, _ = copy_of(two_runs, tmp_path)
    for run_dir in sorted(p.parent for p in root.glob("smoke/ra_flat/*/run.json")):
        pairs = pq.read_table(run_dir / "pairs.parquet")
        pq.write_table(pairs.slice(0, 0), run_dir / "pairs.parquet")  # its schema and metadata kept
        (run_dir / store.MANIFEST).write_bytes(manifest_bytes(run_dir))
    result = pass3(root, jobs=1)
    assert result.summary.startswith("0 pairs obey the conservation laws; 4 steps and 2 run totals")
    assert result.problems == ["2 training run(s), yet 0 pairs and 4 steps were checked: their ledgers could not be "
                               "read (see PASS 1)"]

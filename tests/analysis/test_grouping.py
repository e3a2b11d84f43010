"""Analysis groups real runs by identity: an arm row is the runs that differ only in their seed.

A small real sweep (ra_flat seeds 42 and 101, 2 steps), then ad-hoc runs beside it that differ in a
setting (seed 42 with 3 steps; seed 42 with another benchmark) and a run of another profile: none of
them is pooled with the sweep's seeds or replaces one, each is a row of its own labelled by what
differs, base rows are one per base model and read-out setting, and `--where` chooses runs."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from rlvr_sweep.analysis import build_tables, load_sweep
from rlvr_sweep.analysis.cli import main as analysis_main
from rlvr_sweep.run import run
from tests.conftest import need_data
from tests.helpers import compose_cfg

SMOKE = ["+arm=ra_flat", "profile=smoke", "eval.limit=8"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    base = tmp_path_factory.mktemp("grouping")
    out = base / "runs"
    data = base / "data"
    data.mkdir()
    lines = (need_data("math500.jsonl") / "math500.jsonl").read_text().splitlines()[:5]
    (data / "math500.jsonl").write_text("\n".join(lines) + "\n")
    for seed in (42, 101):
        run(compose_cfg([*SMOKE, "train.steps=2", f"seed={seed}", f"run.out_root={out}"]))
    run(compose_cfg([*SMOKE, "train.steps=3", "seed=42", f"run.out_root={out}"]))  # ad hoc: 3 steps
    run(compose_cfg([*SMOKE, "train.steps=2", "seed=42", "eval.benchmarks=[math500]", "eval.limit=5",
                     f"data.root={data}", f"run.out_root={out}"]))  # ad hoc: another benchmark
    return out


def test_runs_that_differ_in_more_than_the_seed_are_rows_of_their_own(root):
    """Seen: analysis kept the newest run per (profile, arm, horizon, seed) and pooled a 10-step run
    with 100-step runs as seeds. Want: rows of runs that share everything but the seed."""
    sweep = load_sweep(root)
    rows = {sweep.label(u): sorted(sweep.runs_of(u)["seed"]) for u in sweep.units()}
    # each row named by what it changes from Arm 4's preset (no row shares all its changes with the others)
    assert rows == {"4. ra_flat [eval.limit=8, train.steps=2]": [42, 101], "4. ra_flat [eval.limit=8, train.steps=3]": [42],
                    "4. ra_flat [eval.benchmarks=[math500], eval.limit=5, train.steps=2]": [42]}
    assert any("'4. ra_flat' is 3 rows" in n for n in sweep.notes)
    t1 = build_tables(sweep, only=["table1"])["table1"].frame.set_index("label")
    assert list(t1.loc["4. ra_flat [eval.limit=8, train.steps=2]", "toy_heldout.seeds"]) == [42, 101]
    assert t1.loc["4. ra_flat [eval.limit=8, train.steps=3]", "n_seeds"] == 1


def test_the_base_row_is_one_per_base_model_and_read_out_setting(root, tmp_path):
    """Seen: one base row averaged the smoke tiny model (12.0) and a paper-profile checkpoint (10.0).
    Want: one base row per base model and read-out setting."""
    mixed = tmp_path / "runs"
    shutil.copytree(root, mixed)
    other = tmp_path / "tiny_copy"
    shutil.copytree("src/rlvr_sweep/policy/assets/tiny_qwen3", other)
    (other / "generation_config.json").write_text('{"do_sample": false}')  # another model: other files
    run(compose_cfg([*SMOKE, "train.steps=2", f"model.path={other}", f"run.out_root={mixed}"]))
    sweep = load_sweep(mixed)
    t1 = build_tables(sweep, only=["table1"])["table1"].frame
    base = t1[t1["is_base"]]
    assert len(base) == 3  # the tiny model at 8 items, the tiny model on math500, the other model
    assert sorted(base["label"])[0] == "base model (0 updates)"
    assert any("model.path=" in label and "tiny_copy" in label for label in base["label"])
    assert base.set_index("label")["n_seeds"].max() == 3  # the 3 runs of the shipped model on toy_heldout


def test_where_chooses_runs_by_setting_and_the_runs_table_names_every_folder(root, tmp_path, capsys):
    code = analysis_main(["tables", str(root), "--out", str(tmp_path), "--where", "train.steps=2",
                          "--where", "eval.limit=8", "--only", "runs,table1"])
    assert code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"sweep {root}: 2 of 4 run folders used (2 training runs in 1 arm rows")
    assert "selected 2 of 4 runs with --where train.steps=2 eval.limit=8" in out
    runs = pd.read_parquet(tmp_path / "runs.parquet")
    assert sorted(runs.loc[runs["used"], "seed"]) == [42, 101]
    assert set(runs.loc[~runs["used"], "why"]) == {"not selected by --where"}
    assert all(not d.startswith("/") and d.startswith("smoke/ra_flat/") for d in runs["run_dir"])  # relative
    with pytest.raises(ValueError, match=r"no run's config has 'train.stpes' \(did you mean train.steps"):
        load_sweep(root, where=["train.stpes=2"])


def test_figures_print_the_same_notes_as_tables(root, tmp_path, capsys):
    """Seen: `analysis figures` printed nothing about split rows while its figures plotted a stray run."""
    assert analysis_main(["figures", str(root), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"sweep {root}: 4 of 4 run folders used")
    head = out.splitlines()[1:3]  # the data line, then the split rows
    assert head[0].startswith("data: 1 read data files that differ from them (smoke/ra_flat/h512_s42_")
    assert "arm '4. ra_flat' is 3 rows" in head[1]
    assert (tmp_path / "curves_smoke_ra_flat_h512.png").is_file() is False  # three rows of one arm: one file each
    assert len(list(tmp_path.glob("curves_smoke_ra_flat_h512_*.png"))) == 3

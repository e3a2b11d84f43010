"""The analysis commands on a real smoke sweep (see conftest.py), as the README runs them (the notebooks:
test_notebooks_run.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from tests.conftest import REPO
from tests.sweeps import TREE

pytestmark = pytest.mark.slow  # real sweeps and the command line in subprocesses


def analysis(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "rlvr_sweep.analysis", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_tables_command(smoke_sweep, tmp_path):
    contrasts = tmp_path / "contrasts.yaml"
    contrasts.write_text('- {row: 1, title: "tree vs flat", a: "12", b: "baseline@h1024", benchmark: toy_heldout}\n'
                         '- {row: 2, title: "absent", a: "13", b: "12", benchmark: toy_heldout}\n')
    out = tmp_path / "tables"
    proc = analysis("tables", str(smoke_sweep), "--out", str(out), "--contrasts", str(contrasts), "--resamples", "500")
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    for title in ("## Table 1", "## Table 2A", "## Table 2B", "## Table 3", "## Table 4", "## Token-512 prefix audit"):
        assert title in text
    assert f"| {TREE} |" in text and "| baseline h1024 |" in text
    assert "absent: row 2" in text and "Not built: no ablation runs" in text
    t1 = pd.read_parquet(out / "table1.parquet")
    assert list(t1["label"]) == ["base model (0 updates)", TREE, "baseline h1024"]
    assert all(len(v) == 2 for v in t1["toy_heldout.per_seed"].iloc[1:])
    t2b = pd.read_parquet(out / "table2b.parquet")
    assert list(t2b["row"]) == [1] and list(t2b["seeds"].iloc[0]) == [42, 101] and t2b["n_items"].iloc[0] == 16
    census = pd.read_parquet(out / "table2a.parquet").set_index("label")
    assert census.loc[TREE, "cap"] == 128 and pd.notna(census.loc[TREE, "divergent"])
    assert {p.name for p in out.iterdir()} >= {"table1.parquet", "table2a.parquet", "table4.parquet", "audit.parquet",
                                              "tables.md"}
    assert not (out / "table3.parquet").exists()


def test_figures_command(smoke_sweep, tmp_path):
    proc = analysis("figures", str(smoke_sweep), "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = {p.name for p in tmp_path.iterdir()}
    for stem in ("figure1", "figure2", "curves_smoke_baseline_h1024", "curves_smoke_stopped_tree_h1024"):
        assert {f"{stem}.png", f"{stem}.pdf"} <= names
        assert (tmp_path / f"{stem}.png").stat().st_size > 10_000


def test_union_command_on_the_smoke_sweep(smoke_sweep, tmp_path):
    """The oracle union of two real checkpoints, against their grades.parquet files read directly."""
    from tests.sweeps import run_of
    grades = [pd.read_parquet(run_of(smoke_sweep, arm, seed) / "grades.parquet") for arm, seed in
              (("baseline", 42), ("stopped_tree", 101))]
    solved = [set(g[(g["phase"] == "trained") & g["correct"]]["item_id"]) for g in grades]
    out = tmp_path / "union.parquet"
    proc = analysis("union", str(smoke_sweep), "--checkpoints", "baseline:42,12:101", "--benchmark", "toy_heldout",
                    "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    union = len(solved[0] | solved[1])
    assert f"oracle union of 2 checkpoints on toy_heldout: {union}/16" in proc.stdout
    saved = pd.read_parquet(out)
    assert list(saved.columns) == ["item_id", "baseline h1024 seed 42", f"{TREE} seed 101", "union"]
    assert int(saved["union"].sum()) == union and set(saved.loc[saved.iloc[:, 1] == 1, "item_id"]) == solved[0]
    bad = analysis("union", str(smoke_sweep), "--checkpoints", "baseline:9", "--benchmark", "toy_heldout")
    assert bad.returncode == 2 and "seed 9 has no toy_heldout read-out" in bad.stderr


def test_a_folder_without_runs_is_bad_input(tmp_path):
    proc = analysis("tables", str(tmp_path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "found no run" in proc.stderr

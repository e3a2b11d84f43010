"""`python -m rlvr_sweep.verify all` on a real smoke sweep: passes when intact, fails when damaged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow  # real sweeps and the command line in subprocesses


def cli(module: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=env, timeout=600)


def test_verify_all_passes_on_an_intact_sweep_with_its_saved_tables(smoke_sweep, tmp_path):
    tables = tmp_path / "tables"
    assert cli("rlvr_sweep.analysis", "tables", str(smoke_sweep), "--out", str(tables), "--resamples", "300").returncode == 0
    proc = cli("rlvr_sweep.verify", "all", str(smoke_sweep), "--tables", str(tables))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:4]] == ["PASS 1 ok", "PASS 2 ok", "PASS 3 ok", "PASS 4 ok"]
    assert "4 finished runs" in lines[0] and "4/4 run folders intact" in lines[0]
    assert "(0.50, 0.50) vs root restart (0.50, 0.25)" in lines[1] and "-1.5" in lines[1]
    assert "saved tables" in lines[2] and lines[-1].startswith("== verify all: 4/4 passes ok")
    assert "nothing to check" in lines[3]  # greedy read-outs only: no sampled / fork read-out, no probe


def test_verify_all_fails_on_a_damaged_run(smoke_sweep, tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(smoke_sweep, root)
    run_dir = sorted(root.glob("smoke/stopped_tree/h*"))[0]
    grades = pd.read_parquet(run_dir / "grades.parquet")
    grades.loc[0, "correct"] = not grades.loc[0, "correct"]  # a stored grade that the verifier disagrees with
    grades.to_parquet(run_dir / "grades.parquet", index=False)
    proc = cli("rlvr_sweep.verify", "all", str(root))
    assert proc.returncode == 1
    out = proc.stdout
    assert "PASS 1 FAILED" in out and "DISAGREE" in out and "grades.parquet" in out and "the manifest" in out
    assert "PASS 2 ok" in out and "a finished run that cannot enter the tables (damaged" in out
    assert "failed: PASS 1, PASS 3" in out.splitlines()[-1]

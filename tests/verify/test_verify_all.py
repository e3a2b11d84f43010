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
    # greedy read-outs only (no sampled / fork read-out, no probe): the credit of every step is what PASS 4 checks
    assert lines[3].startswith("PASS 4 ok: 16 groups' credit re-derived from their stored rewards") and "(4 run(s))" in lines[3]


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


def test_a_late_pass2_lets_pass3_run_meanwhile_and_the_lines_keep_their_order(smoke_sweep, tmp_path, monkeypatch):
    from rlvr_sweep.verify import beside, passes

    monkeypatch.setattr(passes, "default_jobs", lambda: 1)  # one core: PASS 3 in this process, after PASS 1

    go = tmp_path / "go"  # PASS 2 waits for PASS 3 to start, as torch's imports may on a busy machine
    (tmp_path / "late_pass2.py").write_text(f"import os, runpy, time\nwhile not os.path.exists({str(go)!r}):\n"
                                            "    time.sleep(0.05)\n"
                                            "runpy.run_module('rlvr_sweep.verify.analytic', run_name='__main__')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setattr(beside, "PASS2_MODULE", "late_pass2")
    children, pass3, seen = [], passes.pass3, []

    class Recorded(passes.Pass2Beside):
        def __init__(self):
            super().__init__()
            children.append(self)

    def recorded_pass3(*args, **kwargs):
        seen.append(children[0].done())  # PASS 2 still running when PASS 3 starts
        go.touch()
        return pass3(*args, **kwargs)

    monkeypatch.setattr(passes, "Pass2Beside", Recorded)
    monkeypatch.setattr(passes, "pass3", recorded_pass3)
    echoed = []
    results = passes.run_all(smoke_sweep, echo=lambda r: echoed.append(r.name))
    assert seen == [False] and echoed == ["PASS 1", "PASS 2", "PASS 3", "PASS 4"]
    assert all(r.ok for r in results) and "(0.50, 0.50)" in results[1].summary


def test_on_two_cores_pass3_and_4_run_in_a_forked_child_and_the_lines_keep_their_order(smoke_sweep, tmp_path,
                                                                                        monkeypatch):
    from rlvr_sweep.verify import passes

    monkeypatch.setattr(passes, "default_jobs", lambda: 2)
    where = tmp_path / "pass3_pid"
    pass3 = passes.pass3

    def recorded_pass3(*args, **kwargs):
        where.write_text(str(os.getpid()))
        return pass3(*args, **kwargs)

    monkeypatch.setattr(passes, "pass3", recorded_pass3)
    echoed = []
    results = passes.run_all(smoke_sweep, echo=lambda r: echoed.append(r.name))
    assert echoed == ["PASS 1", "PASS 2", "PASS 3", "PASS 4"] and [r.name for r in results] == echoed
    assert all(r.ok for r in results) and int(where.read_text()) != os.getpid()

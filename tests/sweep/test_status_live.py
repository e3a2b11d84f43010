"""`status` followed through a real basic-launcher sweep: visible from the start of its preflight (`checking`),
`status ROOT` and `status -- <its overrides>` agreeing at every look while jobs wait their turn, and, once
its process is killed with `kill -9` during the second job and the root moved elsewhere, each run once with
its true state."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from rlvr_sweep.sweep.cli import CONF_DIR
from rlvr_sweep.sweep.preflight import located_jobs
from rlvr_sweep.sweep.status import planned_report, sweep_states
from tests.conftest import REPO

pytestmark = pytest.mark.slow  # a real three-job sweep in a subprocess


def test_status_follows_a_basic_launcher_sweep_from_its_preflight(tmp_path):
    root = tmp_path / "runs"
    line = ["+arm=ra_flat", "profile=smoke", "train.steps=40", "eval.limit=4", f"run.out_root={root}"]
    jobs = located_jobs(str(CONF_DIR), [*line, "seed=1,2,3"])  # what `status -- <line>` composes, once
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "rlvr_sweep", *line, "-m", "seed=1,2,3"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    looks = []  # ({seed: row} by `status ROOT`, {seed: row} by `status -- <line>`)
    try:
        deadline = time.time() + 600
        while proc.poll() is None and time.time() < deadline:
            by_root = {r["seed"]: r for r in sweep_states(root)}
            planned = {r["seed"]: r for r in planned_report(jobs)[0]}
            looks.append((by_root, planned))
            if by_root.get(2, {}).get("state") == "running":
                os.kill(proc.pid, signal.SIGKILL)  # during the second job
                break
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
        out = proc.communicate()[0]
    assert proc.returncode == -signal.SIGKILL, out[-3000:]
    seen = [by_root for by_root, _ in looks if by_root]
    assert seen and {r["state"] for r in seen[0].values()} == {"checking"}, seen[:1]  # at once, while checking
    assert any(sorted(s) == [1, 2, 3] and {r["state"] for r in s.values()} == {"checking"} for s in seen)
    agreed = 0
    for by_root, planned in looks:
        for seed, row in by_root.items():
            if row["state"] in ("queued", "checking"):
                assert planned[seed]["state"] != "new", (seed, row, planned[seed])  # never "start" as if unknown
                if planned[seed]["state"] == row["state"]:
                    assert planned[seed]["detail"] == row["detail"]
                    agreed += 1
    assert agreed >= 2, looks[-1]
    assert any(s.get(3, {}).get("detail") == f"job 3 of 3 of the sweep run by pid {proc.pid} (basic launcher: one "
               "job after another)" for s in seen)

    after = {r["seed"]: r for r in sweep_states(root)}
    assert [after[s]["state"] for s in (1, 2, 3)] == ["finished", "dead", "not started"], after
    assert after[3]["detail"] == f"its sweep (pid {proc.pid}) has ended; relaunch it"
    assert [r["would"] for r in planned_report(jobs)[0]][::2] == ["skip", "start"]

    moved = tmp_path / "moved"
    shutil.move(root, moved)  # a results folder received from elsewhere
    rows = sweep_states(moved)
    assert [(r["seed"], r["state"]) for r in rows] == [(1, "finished"), (2, "dead"), (3, "not started")], \
        [(r["seed"], r["state"], r.get("row")) for r in rows]

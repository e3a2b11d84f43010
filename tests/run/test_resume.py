"""A killed run started again with the same command resumes and writes the same ledger."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from rlvr_sweep import store as results
from rlvr_sweep.run import checkpoint, run
from tests.conftest import REPO
from tests.helpers import compose_cfg, run_dir_of, run_killed_at

TIMING = ["seconds"]  # wall-clock columns differ between any two runs


def ledger(run_dir) -> dict[str, pd.DataFrame]:
    return {name: results.read_table(run_dir, name).drop(columns=TIMING, errors="ignore")
            for name in ("steps", "rollouts", "pairs", "grades") if (Path(run_dir) / f"{name}.parquet").is_file()}


def assert_same_ledger(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], check_exact=True, obj=name)


ARGS = ["profile=smoke", "train.steps=30", "train.checkpoint_every=10", "train.write_every=5", "eval.limit=16"]


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["ra_flat", "stopped_tree"])
def test_crashed_run_resumes_to_the_uninterrupted_ledger(tmp_path, arm):
    reference = run(compose_cfg([f"+arm={arm}", *ARGS, f"run.out_root={tmp_path}/a"]))
    cfg = compose_cfg([f"+arm={arm}", *ARGS, f"run.out_root={tmp_path}/b"])
    run_killed_at(cfg, step=17)
    run_dir = run_dir_of(cfg)
    assert not results.is_finished(run_dir) and (run_dir / checkpoint.CHECKPOINT).is_file()
    assert results.read_run_json(run_dir)["status"] == "failed"
    resumed = run(cfg)
    assert resumed["resumed_from_step"] == 10 and resumed["status"] == "finished"
    assert not (run_dir / checkpoint.CHECKPOINT).exists()  # pruned once the run is done
    assert_same_ledger(ledger(reference["run_dir"]), ledger(run_dir))
    assert resumed["accuracy"] == reference["accuracy"]


@pytest.mark.slow
def test_kill_9_then_same_command_resumes(tmp_path):
    """A real SIGKILL of the entrypoint mid-run; the same command line then finishes the run."""
    args = ["+arm=ra_flat", "profile=smoke", "train.steps=30", "train.checkpoint_every=5", "eval=none",
            f"run.out_root={tmp_path}/runs"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    cmd = [sys.executable, "-m", "rlvr_sweep", *args]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = run_dir_of(compose_cfg(args))
    deadline = time.time() + 120
    while not (run_dir / checkpoint.CHECKPOINT).is_file() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not results.is_finished(run_dir), "the run finished before it could be killed"
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    info = results.read_run_json(run_dir)
    assert info["status"] == "finished" and info["resumed_from_step"] >= 5
    reference = run(compose_cfg([*args[:-1], f"run.out_root={tmp_path}/ref"]))
    assert_same_ledger(ledger(reference["run_dir"]), ledger(run_dir))

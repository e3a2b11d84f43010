"""A sweep's job runs the run its launch planned, or nothing (`sweep.planned`): a task whose rows change from
process to process (here: rows naming the pid that made them) is refused in the job, in one line naming the
input, before any folder is written; `status` then says the job never started, not that it is queued."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rlvr_sweep.sweep.planned import UnplannedRunError, check_planned
from rlvr_sweep.sweep.records import LAUNCH_ENV, SWEEPS
from tests.conftest import REPO

JOB = ["+arm=ra_flat", "seed=1"]
INPUTS = {"train": {"sha256": "a" * 64}, "model": {"sha256": "m" * 64}}


def _record(root, stamp="20261205-060000-42"):
    (root / SWEEPS).mkdir(parents=True)
    (root / SWEEPS / f"{stamp}.json").write_text(json.dumps({"jobs": [
        {"number": 1, "overrides": JOB, "run_hash": "b342e542", "inputs": {"train": "a" * 64, "model": "m" * 64}}]}))
    return stamp


def test_a_job_that_computes_another_run_than_planned_is_refused_naming_the_input(tmp_path, monkeypatch):
    monkeypatch.setenv(LAUNCH_ENV, _record(tmp_path))
    check_planned(tmp_path, JOB, "b342e542", INPUTS)  # as planned
    check_planned(tmp_path, [*JOB, "train.lr=1e-05"], "ccdba40a", INPUTS)  # a job the record does not hold
    moved = {**INPUTS, "train": {"sha256": "c" * 64}}
    with pytest.raises(UnplannedRunError, match=r"^this job computed run ccdba40a, not the run b342e542 its launch "
                                                r"planned: its inputs train differ between the launching process"):
        check_planned(tmp_path, JOB, "ccdba40a", moved)
    with pytest.raises(UnplannedRunError, match="its settings differ"):
        check_planned(tmp_path, JOB, "ccdba40a", INPUTS)
    with pytest.raises(UnplannedRunError, match="its inputs plugins differ"):  # an input the plan lacks is named
        check_planned(tmp_path, JOB, "ccdba40a", {**INPUTS, "plugins": {"sha256": "p" * 64}})
    # a record elsewhere, or hidden, that plans this job under another hash: never read through the stamp
    (tmp_path / "elsewhere.json").write_text((tmp_path / SWEEPS / "20261205-060000-42.json").read_text())
    (tmp_path / SWEEPS / ".hidden.json").write_text((tmp_path / SWEEPS / "20261205-060000-42.json").read_text())
    (tmp_path / SWEEPS / "broken.json").write_text("{bad")
    (tmp_path / SWEEPS / "nulled.json").write_text(json.dumps({"jobs": [{"overrides": JOB, "run_hash": None}]}))
    for stamp in ("", "../elsewhere", ".hidden", "broken", "nulled"):  # none names a plan to hold the job to
        monkeypatch.setenv(LAUNCH_ENV, stamp)
        check_planned(tmp_path, JOB, "ccdba40a", moved)


PER_PROCESS = '''import os

from rlvr_sweep.extend import TASKS


def _held():
    return [{"id": f"h{i}", "problem": f"{i}+1", "answer": str(i + 1)} for i in range(2)]


@TASKS.register("t_per_process", benchmarks={"t_per_process_heldout": _held})
def rows():
    """Rows that name the process that made them: the same within a process, other in the next."""
    return [{"id": f"p{os.getpid()}-{i}", "problem": f"{i}+2", "answer": str(i + 2)} for i in range(4)]
'''


def test_rows_that_change_between_processes_fail_the_job_in_one_line_and_status_says_it_never_started(tmp_path):
    plugin = tmp_path / "t_per_process.py"
    plugin.write_text(PER_PROCESS)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src")}
    env.pop(LAUNCH_ENV, None)
    line = ["+arm=ra_flat", "profile=smoke", f"plugins=[{plugin}]", "data.name=t_per_process", "data.train_file=null",
            "eval.benchmarks=[t_per_process_heldout]", "train.steps=1", "run.out_root=runs",
            "hydra/launcher=submitit_local", "hydra.launcher.submitit_folder=submitit/%j", "-m", "seed=1"]
    proc = subprocess.run([sys.executable, "-m", "rlvr_sweep", *line], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    out = proc.stdout.splitlines()
    assert proc.returncode == 1 and "runs: 1 failed" in out, (proc.stdout + proc.stderr)[-3000:]
    (said,) = [s for s in out if s.startswith("  failed: (job 0): ")]
    assert "its inputs train differ between the launching process and this one" in said
    assert said.endswith("nothing was written; the job is recorded as failed")
    assert not list((tmp_path / "runs").rglob("run.json")) and "Traceback" not in proc.stdout + proc.stderr
    status = subprocess.run([sys.executable, "-m", "rlvr_sweep", "status", "runs"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert "1 run: 1 not started" in status.stdout and "made no run folder (it failed first" in status.stdout

"""A relaunch decides "finished, skip" from the run's identity alone: neither torch nor transformers
is imported, in a single run or in a sweep (its preflight included)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow  # three launches of real runs in subprocesses

RUN = ["+arm=ra_flat", "profile=smoke", "train.steps=2", "eval.limit=4"]


def launch(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "rlvr_sweep", *args,
                           f"run.out_root={tmp_path / 'runs'}"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)


def imported(proc: subprocess.CompletedProcess) -> set[str]:
    return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}


def test_a_relaunch_of_finished_runs_imports_neither_torch_nor_transformers(tmp_path):
    first = launch(tmp_path, *RUN, "-m", "seed=42,101")
    assert first.returncode == 0, first.stderr[-3000:]
    assert {"torch", "transformers"} <= imported(first)  # they ran
    again = launch(tmp_path, *RUN, "-m", "seed=42,101")
    assert again.returncode == 0 and "runs: 2 skipped" in again.stdout, again.stdout[-2000:] + again.stderr[-2000:]
    assert not {"torch", "transformers"} & imported(again)
    single = launch(tmp_path, *RUN, "seed=42")
    assert single.returncode == 0 and "skipped" in single.stdout
    assert not {"torch", "transformers"} & imported(single)
    other = launch(tmp_path, *RUN, "-m", "seed=42,7")  # one new run: then they are needed
    assert other.returncode == 0 and "torch" in imported(other)

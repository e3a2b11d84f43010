"""The other benchmark scripts run end to end at their smallest size, so a schema or API change that
breaks one fails here instead of in a user's hands (their figures are not checked: speed is not a test)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


def bench(script: str, *args: str, tmp_path) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, str(REPO / "bench" / script), *args], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def test_collect_bench_collates_the_runs_it_wrote(tmp_path):
    out = bench("bench_collect.py", "--runs", "3", "--steps", "2", "--root", str(tmp_path / "store"), tmp_path=tmp_path)
    # per run: 2 steps, 8 rollouts and 4 pairs per step, 200 items read out before and after training
    assert "runs=3 steps=6 rollouts=48 pairs=24 grades=1200 skipped=0" in out


@pytest.mark.slow
def test_generation_bench_compares_with_model_generate(tmp_path):
    out = bench("bench_generation.py", "--model", str(REPO / "src/rlvr_sweep/policy/assets/tiny_qwen3"),
                "--repeats", "1", "--max-new-tokens", "8", tmp_path=tmp_path)
    figures = dict(part.split("=", 1) for line in out.splitlines() for part in line.split() if "=" in part)
    assert float(figures["ours_tokens_per_s"]) > 0 and float(figures["hf_tokens_per_s"]) > 0 and "ratio" in figures


@pytest.mark.slow
def test_grader_load_bench_keeps_every_call_near_the_limit(tmp_path):
    out = bench("bench_grader_load.py", "--threads", "2", "--calls", "3", "--limit", "1", tmp_path=tmp_path)
    assert "6 calls from 2 threads, limit 1.0 s" in out and "pool counters" in out

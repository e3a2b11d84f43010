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


@pytest.mark.slow
def test_store_bench_makes_a_store_that_collect_analysis_and_verify_accept(tmp_path):
    """Its smallest size: 3 real smoke runs as templates, a store of 6 (3 copies under new identities)."""
    out = bench("bench_store.py", "--sizes", "3,6", "--collect-sizes", "", "--template-arms", "ra_flat",
                "--template-steps", "2", "--template-limit", "4", "--root", str(tmp_path / "b"), tmp_path=tmp_path)
    lines = [line for line in out.splitlines() if "runs=6" in line]
    assert [line.split(":")[0] for line in lines] == ["collect_first", "collect", "tables", "verify"], out  # all passed
    assert all("growth_exponent=" in line and "per_run_ms=" in line for line in lines)
    assert (tmp_path / "b" / "store_6" / ".rlvr_sweep" / "tables.json").is_file()  # a later call remembered the tables
    copies = sorted((tmp_path / "b" / "store_6" / "smoke" / "ra_flat").iterdir())
    assert len(copies) == 6 and len({p.name.rsplit("_", 1)[1] for p in copies}) == 6  # six identities


@pytest.mark.slow
def test_the_gpu_check_runs_its_whole_sequence_on_the_cpu_in_its_dry_run(tmp_path):
    from tests.conftest import QWEN3_TOKENIZER, need_data

    data = need_data("math500.jsonl", "math_train.jsonl")
    if not (QWEN3_TOKENIZER / "vocab.json").is_file():
        pytest.skip("no Qwen3 tokenizer")
    out = bench("gpu_check.py", "--dry-run", "--prepare", "--tokenizer", str(QWEN3_TOKENIZER), "--data", str(data),
                "--work", str(tmp_path / "work"), tmp_path=tmp_path)
    figures = dict(line.split("=", 1) for line in out.splitlines() if "=" in line and not line.startswith(" "))
    assert figures["mode"] == "dry_run_cpu" and figures["dependencies_missing"] == "none"
    assert all(figures[f"{part}_ok"] == "True" for part in ("install", "tests", "engine", "arm1")), out
    assert float(figures["decode_ms_per_step_b8_static"]) > 0 and float(figures["train_step_s"]) > 0
    assert int(figures["arm1_steps"]) == 2 and float(figures["projected_50_steps_plus_950_readout_s"]) > 0


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

"""The engine benchmark's CPU mode runs end to end (so its GPU mode's code cannot rot unnoticed)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_cpu_mode_prints_every_figure():
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, str(REPO / "bench" / "bench_engine.py"), "--cpu", "--quick"], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    figures = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)
    for key in ("decode_ms_per_step_b8_hf_generate", "decode_ms_per_step_b8_reference", "decode_ms_per_step_b8_static",
                "static_vs_hf_generate_tokens_per_s_ratio", "arm1_step_s_static", "arm1_projected_50_steps_s_static",
                "readout_s_fixed32_static", "readout_s_refill_static", "projected_total_s_static_fixed32",
                "projected_total_s_static_refill", "vllm", "decode_ms_per_step_b32_reference",
                "decode_ms_per_step_b32_static", "readout_tokens_per_s_fixed32_static",
                "readout_tokens_per_s_refill_static", "step_split_step_ms_b8", "step_split_top_p_sampling_ms_b8",
                "step_split_greedy_pick_ms_b8", "step_split_rest_ms_b8", "step_split_step_ms_b32",
                "trace_cpu_ops_per_step_b8", "trace_cpu_ops_ms_per_step_b8", "trace_wall_ms_per_step_b8", "trace_top1",
                "trace_top10", "graph_ms_per_step_b1_w64", "graph_ms_per_step_b32_w128",
                "decode_ms_per_step_b8_static_in_graph", "decode_ms_per_step_b32_static_in_graph",
                "compile_first_call_s_b8", "decode_ms_per_step_b8_static_compiled"):
        assert key in figures, f"{key} missing from:\n{run.stdout}"
    assert "decode_ms_per_step_b32_hf_generate" not in figures  # batch 32: the two engines the read-out uses
    assert figures["greedy_rows_identical_static_vs_reference_compiled"] == "1"  # float32: the compiled step's tokens
    assert float(figures["greedy_rows_identical_static_vs_reference"]) == 1.0  # float32 CPU: bitwise equal
    assert figures["greedy_first_differing_position"] == "none"
    assert not any(k.startswith("peak_gpu_memory") for k in figures)  # a CUDA figure only
    assert 0.5 < float(figures["readout_refill_utilisation"]) <= 1.0  # generated tokens / slot-steps
    only = subprocess.run([sys.executable, str(REPO / "bench" / "bench_engine.py"), "--cpu", "--quick", "--only",
                           "agreement"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    parts = {line.split("=", 1)[0] for line in only.stdout.splitlines() if line.startswith(("decode_ms", "greedy_",
                                                                                             "arm1_", "readout_"))}
    assert only.returncode == 0 and parts == {"greedy_rows_identical_static_vs_reference",
                                              "greedy_token_agreement_static_vs_reference",
                                              "greedy_first_differing_position"}, only.stdout
    wrong = subprocess.run([sys.executable, str(REPO / "bench" / "bench_engine.py"), "--cpu", "--only", "decoder"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert wrong.returncode == 1 and "--only: unknown parts ['decoder']" in wrong.stderr


def _workloads():
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import engine_workloads
    finally:
        sys.path.remove(str(REPO / "bench"))
    return engine_workloads


def test_replayed_lengths_match_the_papers_token_counts():
    wl = _workloads()
    arm1 = wl.arm1_lengths()
    assert arm1.shape == (50, 8) and arm1.max() == 512
    assert 320 < arm1.mean() < 370  # Table 1, Arm 1: 135.7k tokens / 400 rollouts = 339
    assert 400 < arm1.max(axis=1).mean() < 450  # 169.6k untrimmed / 400 = 424 steps per group
    assert 60 < wl.arm1_prompt_lengths().mean() < 110  # 33.7k prefill / 400 = 84
    readout = wl.readout_lengths()
    assert readout.shape == (950,) and 0.08 < (readout == 2048).mean() < 0.13  # AllCap2048 52.7/500
    assert 500 < readout.mean() < 680


def test_bench_plans_are_the_schedules():
    from rlvr_sweep.evaluation.schedule import fixed_batches, length_sorted_order

    wl = _workloads()
    prompts = wl.random_prompts(wl.readout_prompt_lengths(77), vocab=100)
    assert wl.fixed_batches(77, 32) == fixed_batches(77, 32)
    assert wl.longest_prompt_first(prompts) == length_sorted_order([len(p) for p in prompts])


def test_random_qwen3_has_the_requested_shapes():
    import torch

    wl = _workloads()
    shapes = wl.Shapes(layers=2, hidden=64, q_heads=4, kv_heads=2, head_dim=32, mlp=96, vocab=300)
    model = wl.build_qwen3(shapes, torch.bfloat16, "cpu")
    attn = model.model.layers[0].self_attn
    assert len(model.model.layers) == 2 and attn.q_proj.weight.shape == (4 * 32, 64)
    assert attn.k_proj.weight.shape == (2 * 32, 64) and model.model.layers[0].mlp.up_proj.weight.shape == (96, 64)
    assert model.lm_head.weight.shape == (300, 64) and not model.config.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()
    assert wl.QWEN3_0_6B == wl.Shapes(layers=28, hidden=1024, q_heads=16, kv_heads=8, head_dim=128, mlp=3072,
                                      vocab=151_936)

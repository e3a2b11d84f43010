"""Workloads for `bench_engine.py`: model shapes and rollout / read-out lengths replayed from the paper.

No weights are downloaded: the models are randomly initialised with Qwen3-0.6B-Base's exact shapes
(or, for the CPU mode, the shipped tiny checkpoint). A random model never stops on its own, so the
benchmark prescribes every row's length and ignores EOS; lengths are drawn (seeded) from
distributions fitted to the paper's token counts:

- Arm 1 rollouts (seed paper Table 1, Arm 1): 135.7k generated tokens over 50 steps x 8 rollouts
  (mean 339 per rollout), 169.6k untrimmed (a step's batch runs 424 steps on average: its longest
  rollout), 33.7k prefill tokens (84 per rollout), cap 512. Per step a scale ``U(0.15, 1.3) x 512``,
  per rollout ``scale x LogNormal(0, 0.3)``, clipped to [4, 512]: mean ~345, mean step max ~424,
  ~27% of rollouts at the cap (the paper: 30.6% of active steps have every R=0 leaf at 512).
- Read-out after training (950 items: MATH-500, val210, Ext240 at 2,048 tokens): Arm 1 hits the
  cap on 52.7/500 = 10.5% of MATH-500 items (Table 1, AllCap2048); the other responses follow
  ``LogNormal(5.7, 0.8)`` (median ~300 tokens), so the mean is ~590 tokens, the length a
  Qwen3-0.6B-Base policy reaches after 50 GRPO steps in the book's runs (performance_anchors.md §1c).
  Prompts: ``LogNormal(ln 80, 0.5)`` tokens, clipped to [20, 400].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ARM1_CAP = 512
READOUT_CAP = 2048
READOUT_ITEMS = 950


@dataclass(frozen=True)
class Shapes:
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int


QWEN3_0_6B = Shapes(layers=28, hidden=1024, q_heads=16, kv_heads=8, head_dim=128, mlp=3072, vocab=151_936)


def build_qwen3(shapes: Shapes, dtype, device, seed: int = 0):
    """A randomly initialised, untied Qwen3ForCausalLM of the given shapes, in eval mode."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=shapes.vocab, hidden_size=shapes.hidden, intermediate_size=shapes.mlp,
        num_hidden_layers=shapes.layers, num_attention_heads=shapes.q_heads, num_key_value_heads=shapes.kv_heads,
        head_dim=shapes.head_dim, max_position_embeddings=32_768, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        tie_word_embeddings=False, eos_token_id=shapes.vocab - 1, pad_token_id=shapes.vocab - 1,
    )
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen3ForCausalLM(config)
    return model.to(dtype).eval()


def arm1_lengths(steps: int = 50, group: int = 8, cap: int = ARM1_CAP, seed: int = 0) -> np.ndarray:
    """(steps, group) rollout lengths for Arm 1 (see the module docstring)."""
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.15, 1.3, steps)[:, None] * ARM1_CAP
    lengths = np.round(scale * rng.lognormal(0.0, 0.3, (steps, group)))
    return np.clip(lengths * cap / ARM1_CAP, 1, cap).astype(int)


def arm1_prompt_lengths(steps: int = 50, seed: int = 1, scale: float = 1.0) -> np.ndarray:
    """(steps,) question lengths, mean ~84 tokens (times ``scale``)."""
    rng = np.random.default_rng(seed)
    return np.maximum(1, np.round(rng.uniform(40, 128, steps) * scale)).astype(int)


def readout_lengths(items: int = READOUT_ITEMS, cap: int = READOUT_CAP, seed: int = 2) -> np.ndarray:
    """(items,) greedy response lengths after Arm 1 training, at ``cap`` (scaled from 2,048)."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.round(rng.lognormal(5.7, 0.8, items)), 4, READOUT_CAP - 1)
    lengths[rng.random(items) < 0.105] = READOUT_CAP
    return np.clip(np.round(lengths * cap / READOUT_CAP), 1, cap).astype(int)


def readout_prompt_lengths(items: int = READOUT_ITEMS, seed: int = 3, scale: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(np.round(rng.lognormal(np.log(80), 0.5, items) * scale), max(1, 20 * scale), 400 * scale).astype(int)


def random_prompts(lengths, vocab: int, seed: int = 4) -> list[list[int]]:
    """Token ids in [1, vocab - 2] (never the pad/EOS id vocab - 1 nor 0)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(1, vocab - 1, int(n)).tolist() for n in lengths]


def fixed_batches(n_items: int, batch_size: int) -> list[list[int]]:
    """The paper's read-out plan, as `rlvr_sweep.evaluation.schedule.fixed_batches` makes it (not
    imported: the evaluation package pulls in the Hydra config, which the GPU image does not have)."""
    return [list(range(lo, min(lo + batch_size, n_items))) for lo in range(0, n_items, batch_size)]


def longest_prompt_first(prompts: list[list[int]]) -> list[int]:
    """The refill schedule's admission order (`evaluation.schedule.length_sorted_order`)."""
    return sorted(range(len(prompts)), key=lambda i: (-len(prompts[i]), i))

"""The candidate-set nucleus filter against the full sort, at Qwen3's vocabulary (151,936 tokens):
the same kept set, the same probabilities bit for bit, the same sampled tokens."""

from __future__ import annotations

import zlib

import pytest
import torch

from rlvr_sweep.rollout import nucleus
from rlvr_sweep.rollout.engine import sample_next_token
from rlvr_sweep.rollout.nucleus import _top_p_candidates, top_p_filter, top_p_sorted

VOCAB = 151_936
BATCH = 8


def _logits(kind: str, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(BATCH, VOCAB, generator=g)
    if kind == "peaked":  # a language model's usual step: a few tokens hold most of the mass
        logits[:, :40] += torch.linspace(12, 4, 40)
    elif kind == "ties":  # many exactly equal probabilities near the top (bf16 rounds them together)
        logits[:, :3000] = (logits[:, :3000] * 2).round() + 6
    elif kind == "flat":  # no small candidate set reaches the mass: the full sort decides
        logits *= 0.01
    return logits.to(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("kind", ["peaked", "ties", "flat", "plain"])
@pytest.mark.parametrize("temperature,top_p", [(0.6, 0.9), (1.0, 0.95), (1.0, 0.5), (0.6, 0.0)])
def test_the_candidate_filter_returns_the_full_sort_s_tensor_and_samples(dtype, kind, temperature, top_p):
    logits = _logits(kind, dtype, seed=zlib.crc32(f"{kind} {temperature} {top_p}".encode()) % 1000)
    probs = torch.softmax(logits / temperature, dim=-1)
    want = top_p_sorted(probs, top_p)
    got = top_p_filter(probs, top_p)
    assert torch.equal(got, want)  # every kept probability, renormalised, bit for bit; every other one 0
    assert torch.equal(got > 0, want > 0)
    draws = [sample_next_token(logits, temperature, top_p, torch.Generator().manual_seed(s)) for s in range(3)]
    for s, drawn in enumerate(draws):
        probs_ref = top_p_sorted(torch.softmax(logits / temperature, dim=-1), top_p)
        assert torch.equal(drawn, torch.multinomial(probs_ref, 1, generator=torch.Generator().manual_seed(s)).squeeze(-1))


def test_the_candidate_path_is_what_runs_on_a_peaked_step_and_the_full_sort_on_a_flat_one():
    peaked = torch.softmax(_logits("peaked", torch.bfloat16, 1) / 0.6, dim=-1)
    rows = [_top_p_candidates(row, 0.9) for row in peaked]
    assert all(r is not None for r in rows)
    full = top_p_sorted(peaked, 0.9)
    for row, kept, ref in zip(peaked, rows, full):
        assert torch.equal(kept / kept.sum(), ref)
        assert 1 <= int((kept > 0).sum()) <= nucleus.CANDIDATES[-1]
    flat = torch.softmax(_logits("flat", torch.bfloat16, 2), dim=-1)
    assert all(_top_p_candidates(row, 0.9) is None for row in flat)  # the 4096 likeliest hold < 0.9


def test_equal_probabilities_across_the_cut_go_to_the_full_sort():
    row = torch.zeros(VOCAB, dtype=torch.bfloat16)
    row[:4] = torch.tensor([0.5, 0.2, 0.2, 0.1], dtype=torch.bfloat16)
    assert _top_p_candidates(row, 0.6) is None  # one 0.2 is kept, the other not: the sort's order decides
    kept = _top_p_candidates(row, 0.75)  # both 0.2 kept (mass before the second: 0.7 < 0.75)
    assert kept is not None and torch.equal(kept[:4] > 0, torch.tensor([True, True, True, False]))
    assert torch.equal(top_p_filter(row[None], 0.6), top_p_sorted(row[None], 0.6))

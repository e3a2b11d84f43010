"""The candidate-set nucleus filter against the full sort: the same kept set, the same probabilities
bit for bit, the same sampled tokens, at Qwen3's vocabulary (151,936 tokens) and the tiny model's
(400), batch by batch: rows decided on 256 or 4,096 candidates beside rows the full sort decides
(mass short, equal probabilities across the cut, screened out), bf16 and float32, batches of 1, 8
and 32."""

from __future__ import annotations

import zlib

import pytest
import torch

from rlvr_sweep.rollout import nucleus
from rlvr_sweep.rollout.engine import sample_next_token
from rlvr_sweep.rollout.nucleus import (
    _candidates,
    _top_p_candidates,
    top_p_filter,
    top_p_sorted,
)

VOCAB = 151_936
BATCH = 8
KINDS = ("peaked", "ties", "flat", "plain")


def _logits(kind: str, dtype: torch.dtype, seed: int, batch: int = BATCH, vocab: int = VOCAB) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, vocab, generator=g)
    if kind == "peaked":  # a language model's usual step: a few tokens hold most of the mass
        logits[:, :40] += torch.linspace(12, 4, 40)
    elif kind == "ties":  # many exactly equal probabilities near the top (bf16 rounds them together)
        logits[:, :3000] = (logits[:, :3000] * 2).round() + 6
    elif kind == "flat":  # no small candidate set reaches the mass: the full sort decides
        logits *= 0.01
    return logits.to(dtype)


def _mixed_kinds(dtype: torch.dtype, batch: int, vocab: int = VOCAB, seed: int = 0) -> torch.Tensor:
    """(batch, vocab) logits whose rows cycle through KINDS."""
    return torch.cat([_logits(KINDS[i % len(KINDS)], dtype, seed + i, batch=1, vocab=vocab) for i in range(batch)])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("temperature,top_p", [(0.6, 0.9), (1.0, 0.95), (1.0, 0.5), (0.6, 0.0)])
def test_the_candidate_filter_returns_the_full_sort_s_tensor_and_samples(dtype, kind, temperature, top_p):
    logits = _logits(kind, dtype, seed=zlib.crc32(f"{kind} {temperature} {top_p}".encode()) % 1000)
    probs = torch.softmax(logits / temperature, dim=-1)
    want = top_p_sorted(probs, top_p)
    got = top_p_filter(probs, top_p)
    assert torch.equal(got, want)  # every kept probability, renormalised, bit for bit; every other one 0
    assert torch.equal(got > 0, want > 0)
    # the sampler draws from that tensor: the same tokens as a draw from the sort's, under one seed (the
    # tensors are equal bit for bit, so more seeds would only repeat the check at ~0.25 s each)
    drawn = sample_next_token(logits, temperature, top_p, torch.Generator().manual_seed(5))
    assert torch.equal(drawn, torch.multinomial(want, 1, generator=torch.Generator().manual_seed(5)).squeeze(-1))


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


def _paths(probs: torch.Tensor, top_p: float) -> dict:
    """Which rows each candidate size decided, and which the full sort decides."""
    decided, undecided = _candidates(probs, top_p)
    paths = {index.shape[1]: sorted(rows.tolist()) for rows, index, _ in decided}
    paths["sort"] = sorted(undecided.tolist())
    return paths


def _mixed_rows(dtype: torch.dtype, seed: int) -> torch.Tensor:
    """(6, VOCAB) probabilities, one row per path: peaked (256 candidates), a ~900-token nucleus
    (4,096), a ~7,000-token nucleus (beyond 4,096), flat, wide, and 0.5, 0.25, 0.125, 0.125."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(5, VOCAB, generator=g)
    logits[0, :40] += torch.linspace(12, 4, 40)
    logits[0] /= 0.6
    logits[1, :1000] += 8
    logits[2, :8000] += 8
    logits[3] *= 0.01
    logits[4, :2000] += torch.linspace(6, 2, 2000)
    by_hand = torch.zeros(1, VOCAB, dtype=dtype)
    by_hand[0, 7:11] = torch.tensor([0.5, 0.25, 0.125, 0.125], dtype=dtype)
    return torch.cat([torch.softmax(logits.to(dtype), dim=-1), by_hand])


def _assert_rows_alone_keep_the_same_tokens(probs: torch.Tensor, got: torch.Tensor, top_p: float) -> None:
    """A loop oracle: each row alone keeps the same tokens with the same probabilities before
    renormalising. (Renormalised, a row alone may differ from the batch in the last bit: the full
    sort's row sums are a multithreaded reduction whose split follows the batch's shape; so the
    filter divides by the sums of the batch it is given, as the full sort does.)"""
    for row, row_got in zip(probs, got):
        alone = top_p_sorted(row[None], top_p)[0]
        assert torch.equal(row_got > 0, alone > 0)
        assert torch.equal(row[row_got > 0], row[alone > 0])


@pytest.mark.parametrize("dtype,top_p,paths", [
    # float32: the peaked row and 0.5, 0.25, 0.125, 0.125 on 256 candidates, the ~900-token nucleus on
    # 4,096; the ~7,000-token one, flat and wide rows by the full sort, and at 0.8 the by-hand row
    # too (0.5, 0.25, 0.125 | 0.125: equal probabilities on both sides of the cut).
    (torch.float32, 0.9, {256: [0, 5], 4096: [1], "sort": [2, 3, 4]}),
    (torch.float32, 0.8, {256: [0], 4096: [1, 2], "sort": [3, 4, 5]}),
    (torch.float32, 0.0, {256: [0, 1, 2, 3, 4, 5], "sort": []}),  # the top token alone
    # bf16 rounds neighbouring probabilities together: wide nuclei end inside a run of equal values
    (torch.bfloat16, 0.9, {256: [0, 5], "sort": [1, 2, 3, 4]}),
    (torch.bfloat16, 0.8, {"sort": [0, 1, 2, 3, 4, 5]}),
    (torch.bfloat16, 0.0, {256: [0, 1, 2, 4, 5], "sort": [3]}),  # flat: its two likeliest are equal
])
def test_a_batch_mixing_every_path_returns_the_full_sort_s_tensor(dtype, top_p, paths):
    probs = _mixed_rows(dtype, seed=0)
    got = top_p_filter(probs, top_p)
    assert torch.equal(got, top_p_sorted(probs, top_p))
    assert _paths(probs, top_p) == paths
    _assert_rows_alone_keep_the_same_tokens(probs, got, top_p)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_batches_of_1_8_and_32_at_the_real_vocabulary(dtype):
    """A decode step's batch at Qwen3's vocabulary, its rows of every kind side by side: the full sort's
    tensor bit for bit at each batch size, each row keeping what it keeps alone, and the candidate path
    taken by most peaked rows (a batch wholly sent to the sort would test nothing)."""
    peaked = decided = 0
    for batch in (1, 8, 32):
        probs = torch.softmax(_mixed_kinds(dtype, batch, seed=10 * batch) / 0.6, dim=-1)
        got = top_p_filter(probs, 0.9)
        assert torch.equal(got, top_p_sorted(probs, 0.9)), batch
        _assert_rows_alone_keep_the_same_tokens(probs, got, 0.9)
        rows = {row for rows, _, _ in _candidates(probs, 0.9)[0] for row in rows.tolist()}
        peaked += len(range(0, batch, len(KINDS)))  # rows 0, 4, 8, ... (bf16 may tie one at its cut)
        decided += len(rows & set(range(0, batch, len(KINDS))))
    assert decided >= peaked - 2 and decided > 0, (decided, peaked)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("batch", [1, 8, 32])
def test_small_candidate_sets_at_a_small_vocabulary_return_the_full_sort_s_tensor(dtype, batch, monkeypatch):
    """The candidate path's arithmetic at the tiny model's vocabulary (400), with candidate sets of 8 and
    64 made to run there (by default one batched sort decides at 400: `FULL_SORT_MAX_VOCAB`)."""
    monkeypatch.setattr(nucleus, "CANDIDATES", (8, 64))
    monkeypatch.setattr(nucleus, "VOCAB_PER_CANDIDATE", 1)
    monkeypatch.setattr(nucleus, "FULL_SORT_MAX_VOCAB", 7)
    logits = _mixed_kinds(dtype, batch, vocab=400, seed=batch)
    logits[:, :30] += torch.linspace(9, 1, 30).to(dtype)  # nuclei of a few to a few dozen tokens
    taken = set()
    for temperature, top_p in ((0.6, 0.9), (1.0, 0.95), (1.0, 0.5), (0.6, 0.0), (2.0, 0.9)):
        probs = torch.softmax(logits / temperature, dim=-1)
        got = top_p_filter(probs, top_p)
        assert torch.equal(got, top_p_sorted(probs, top_p)), (temperature, top_p)
        _assert_rows_alone_keep_the_same_tokens(probs, got, top_p)
        taken |= {index.shape[1] for _, index, _ in _candidates(probs, top_p)[0]}
    assert 8 in taken  # the candidate path ran, not only the sort


def test_a_step_no_candidate_set_can_decide_costs_no_candidate_try(monkeypatch):
    """A flat step (the 4,096 likeliest tokens hold far less than top_p) is screened out before any
    topk: it pays for the full sort alone, not a failed try on top of it; a peaked step makes one try."""
    calls = []
    topk = torch.Tensor.topk
    monkeypatch.setattr(torch.Tensor, "topk", lambda self, *a, **k: calls.append(a) or topk(self, *a, **k))
    flat = torch.softmax(_logits("flat", torch.bfloat16, 3), dim=-1)
    decided, undecided = _candidates(flat, 0.9)
    assert decided == [] and sorted(undecided.tolist()) == list(range(BATCH)) and calls == []
    assert torch.equal(top_p_filter(flat, 0.9), top_p_sorted(flat, 0.9)) and calls == []
    peaked = torch.softmax(_logits("peaked", torch.bfloat16, 3) / 0.6, dim=-1)
    decided, undecided = _candidates(peaked, 0.9)
    assert undecided.numel() == 0 and [c[0] for c in calls] == [256]  # one try of 256 decides every row

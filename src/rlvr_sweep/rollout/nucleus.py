"""The baseline's nucleus (top-p) filter (spec §6 step 3), and the same filter computed on a candidate
set: on the CPU `top_p_filter` sorts only the few most probable tokens and returns the full sort's
tensor bit for bit (tests/rollout/test_top_p.py, at Qwen3's 151,936-token vocabulary).
"""

from __future__ import annotations

import torch


def top_p_filter(probs: torch.Tensor, top_p: float | None) -> torch.Tensor:
    """Baseline nucleus filter on probabilities of shape ``(..., V)`` (usually ``(B, V)``).

    Sort descending; keep a token iff the cumulative mass strictly *before* it is ``< top_p`` (the
    token that crosses the threshold is kept); the top-1 token is always kept (also for ``top_p <= 0``).
    The rest are zeroed and each row is renormalised. ``top_p`` of ``None`` or ``>= 1.0`` returns
    ``probs`` unchanged. The arithmetic stays in ``probs.dtype`` (the baseline does it on bf16 probs).

    On the CPU the rows of a ``(B, V)`` batch go through `_top_p_candidates`, which sorts only the few
    most probable tokens and returns the same tensor as the full sort (`top_p_sorted`), bit for bit
    (tests/rollout/test_top_p.py, at the real vocabulary); elsewhere, and for any other shape, the full sort.
    """
    if top_p is None or top_p >= 1.0:
        return probs
    if probs.device.type in CANDIDATE_DEVICES and probs.dim() == 2:
        rows = []
        for row in probs:
            rows.append(_top_p_candidates(row, top_p))
            if rows[-1] is None:
                break  # the whole batch goes to the full sort, as one tensor (its order of ties is the batch's)
        else:
            filtered = torch.stack(rows)
            return filtered / filtered.sum(dim=-1, keepdim=True)
    return top_p_sorted(probs, top_p)


CANDIDATE_DEVICES = ("cpu",)  # where the candidate path is proven equal to the full sort (the GPU check tests CUDA)
CANDIDATES = (256, 4096)  # candidate sets tried: tokens at least as probable as the 256th, then the 4096th


def top_p_sorted(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """The baseline's nucleus filter as written: the whole vocabulary sorted (see `top_p_filter`)."""
    sorted_probs, sorted_idx = torch.sort(probs, dim=-1, descending=True)
    cum = torch.cumsum(sorted_probs, dim=-1)
    # Exclusive prefix sum by shifting (not cum - p, which adds rounding error at the boundary).
    before = torch.zeros_like(cum)
    before[..., 1:] = cum[..., :-1]
    keep = before < top_p
    keep[..., 0] = True
    kept_sorted = sorted_probs.masked_fill(~keep, 0)
    filtered = torch.zeros_like(probs).scatter_(-1, sorted_idx, kept_sorted)
    return filtered / filtered.sum(dim=-1, keepdim=True)


def _top_p_candidates(row: torch.Tensor, top_p: float) -> torch.Tensor | None:
    """One row's kept probabilities (the rest zero, not yet renormalised), computed on a candidate set;
    None when the full sort must decide.

    Candidates: every token at least as probable as the k-th most probable (ties included), so their
    values, sorted, are exactly the first values of the full sort, and their sequential prefix sums
    the full sort's first prefix sums. When the candidates' mass reaches ``top_p``, every token the
    full sort keeps is among them, decided by the same comparisons. The order of equal probabilities
    (which the full sort leaves to its algorithm) matters only when equal tokens sit on both sides of
    the cut: then None. A candidate set short of ``top_p`` is followed by the next of `CANDIDATES`."""
    for k in CANDIDATES:
        if k >= row.numel():
            break
        threshold = torch.topk(row, k).values[-1]
        index = torch.nonzero(row >= threshold).squeeze(-1)
        values, order = torch.sort(row[index], descending=True)
        cum = torch.cumsum(values, dim=-1)
        if not bool(cum[-1] >= top_p):
            continue
        before = torch.zeros_like(cum)
        before[1:] = cum[:-1]
        keep = before < top_p
        keep[0] = True
        kept = int(keep.sum())
        if kept < len(values) and bool(values[kept] == values[kept - 1]):
            return None  # equal probabilities on both sides of the cut: the full sort's order decides
        filtered = torch.zeros_like(row)
        filtered[index[order[:kept]]] = values[:kept]
        return filtered
    return None

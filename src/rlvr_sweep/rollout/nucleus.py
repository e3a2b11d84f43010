"""The baseline's nucleus (top-p) filter (spec §6 step 3), and the same filter computed on candidate
sets: on the CPU, at a large vocabulary (Qwen3's 151,936 tokens), `top_p_filter` takes each row's few
most probable tokens (one batched topk), decides every row they can decide, sends the others to the
full sort, and returns the full sort's tensor bit for bit (tests/rollout/test_top_p.py). At a small
vocabulary (the tiny model's 400) one batched sort is cheaper, and is what runs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CANDIDATE_DEVICES = ("cpu",)  # where the candidate path is proven equal to the full sort (the GPU check tests CUDA)
CANDIDATES = (256, 4096)  # candidate set sizes tried in turn: each row's 256 likeliest tokens, then its 4,096
# Where candidates pay, measured with `python bench/bench_top_p.py --sweep --threads 1` (which lifts
# the two rules below and times the candidate path against one batched sort; bf16, batch 8 and 32,
# peaked / wide / flat steps, on a shared 2-core x86 box): at V=400 candidates cost 1.7-4x the sort
# (a topk of 256 of 400 costs about as much as sorting all 400, plus a dozen small ops); at
# 1,024-4,096 they win 1-6x on peaked steps but lose up to 2.5x on wide or flat ones, whose tries
# fail; from 8,192 on, a failed try of 256 costs ~5-15% of a sort and peaked steps win 2-12x. A try
# of 4,096 costs ~20% of a sort at 151,936 but a third to over half of one at 8,192-32,768. Hence:
# a set of k candidates is tried only where V >= VOCAB_PER_CANDIDATE * k, and below the first such
# vocabulary one batched sort decides everything.
VOCAB_PER_CANDIDATE = 32
FULL_SORT_MAX_VOCAB = VOCAB_PER_CANDIDATE * CANDIDATES[0] - 1  # up to here (8,191): the full sort directly
MASS_SLACK = 1.02  # a row whose next candidate set provably holds < top_p (with this margin) skips it
SCREEN = 4  # the screening pass sums the mass above top_p / (SCREEN * largest candidate set)


def top_p_filter(probs: torch.Tensor, top_p: float | None) -> torch.Tensor:
    """Baseline nucleus filter on probabilities of shape ``(..., V)`` (usually ``(B, V)``).

    Sort descending; keep a token iff the cumulative mass strictly *before* it is ``< top_p`` (the
    token that crosses the threshold is kept); the top-1 token is always kept (also for ``top_p <= 0``).
    The rest are zeroed and each row is renormalised. ``top_p`` of ``None`` or ``>= 1.0`` returns
    ``probs`` unchanged. The arithmetic stays in ``probs.dtype`` (the baseline does it on bf16 probs).

    On the CPU a ``(B, V)`` batch with ``V > FULL_SORT_MAX_VOCAB`` goes through `_candidates`, which
    decides every row it can on its likeliest tokens (all rows at once) and sends the others to the
    full sort; the result is `top_p_sorted`'s tensor bit for bit (tests/rollout/test_top_p.py).
    Elsewhere, at a small vocabulary, and for any other shape: the full sort.
    """
    if top_p is None or top_p >= 1.0:
        return probs
    # The vocabulary first: reading ``probs.device`` costs ~20 us, 5% of a sort at V=400 (bench_top_p).
    if probs.dim() != 2 or probs.shape[-1] <= FULL_SORT_MAX_VOCAB or probs.device.type not in CANDIDATE_DEVICES:
        return top_p_sorted(probs, top_p)
    decided, undecided = _candidates(probs, top_p)
    if undecided.numel() == probs.shape[0]:
        return top_p_sorted(probs, top_p)
    filtered = torch.zeros_like(probs)  # (B, V)
    for rows, index, kept in decided:
        _place(filtered, rows, index, kept)
    if undecided.numel():  # the full sort on those rows alone (it acts row by row: the same bits)...
        filtered.index_copy_(0, undecided, _kept_by_sort(probs.index_select(0, undecided), top_p))
        # ...and the whole batch divided by its row sums, as the full sort's is: one row summed alone
        # may round differently (a multithreaded reduction splits by the batch's shape)
        return filtered / filtered.sum(dim=-1, keepdim=True)
    # Every row decided on candidates: divide only the kept entries by their row's sum (the same
    # elementwise division as dividing the whole row; every other entry is 0 either way).
    total = filtered.sum(dim=-1, keepdim=True)  # (B, 1): the sums the full sort's rows divide by
    for rows, index, kept in decided:
        _place(filtered, rows, index, kept / (total if rows.numel() == probs.shape[0] else total[rows]))
    return filtered


def _place(out: torch.Tensor, rows: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> None:
    """``out[rows[i], index[i, j]] = values[i, j]`` (``rows`` ascending)."""
    if rows.numel() == out.shape[0]:  # every row, in order
        out.scatter_(-1, index, values)
    else:
        out.view(-1).index_put_(((rows[:, None] * out.shape[-1] + index).view(-1),), values.view(-1))


def top_p_sorted(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """The baseline's nucleus filter as written: the whole vocabulary sorted (see `top_p_filter`)."""
    filtered = _kept_by_sort(probs, top_p)
    return filtered / filtered.sum(dim=-1, keepdim=True)


def _kept_by_sort(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """The kept probabilities (the rest zero, not yet renormalised) by the full sort. Row by row:
    sort, cumulative sum and scatter act on each row alone, so a subset of rows gets the same bits."""
    sorted_probs, sorted_idx = torch.sort(probs, dim=-1, descending=True)
    cum = torch.cumsum(sorted_probs, dim=-1)
    # Exclusive prefix sum by shifting (not cum - p, which adds rounding error at the boundary).
    before = torch.zeros_like(cum)
    before[..., 1:] = cum[..., :-1]
    keep = before < top_p
    keep[..., 0] = True
    kept_sorted = sorted_probs.masked_fill(~keep, 0)
    return torch.zeros_like(probs).scatter_(-1, sorted_idx, kept_sorted)


def _candidates(probs: torch.Tensor, top_p: float):
    """The rows of ``probs`` (B, V) that their likeliest tokens decide, and the rest.

    Returns ``(decided, undecided)``: ``decided`` a list of ``(rows, index, kept)`` groups, one per
    candidate size k that decided some rows: ``rows`` (R,) long, ``index`` (R, k) token ids, ``kept``
    (R, k) their probabilities with the tokens the full sort drops set to 0; ``undecided`` (U,) long,
    the rows the full sort must decide.

    Why this is the full sort's answer: `torch.topk` returns each row's k largest values in
    descending order, which are exactly the first k values of the row's full sort (equal values are
    interchangeable), so their sequential prefix sums are the full sort's first k prefix sums and
    the keep test compares the same numbers. The prefix sums never decrease, so the full sort keeps
    a prefix: token j > 0 is kept iff the sum through token j - 1 is ``< top_p``. When that count n
    is below k, nothing after the candidates is kept. Which tokens hold those n values is fixed
    unless the n-th and (n+1)-th values are equal (equal tokens on both sides of the cut, whose
    order only the full sort's algorithm decides): such rows are undecided, as are rows whose
    largest candidate set holds less than ``top_p``.

    Example (one row, top_p 0.6): values 0.5, 0.2, 0.2, 0.1 have prefix sums 0.5, 0.7, 0.9, 1.0, so
    n = 1 + 1 = 2: one 0.2 is kept and the other not, and the row is undecided; at top_p 0.75,
    n = 3 and the row is decided (0.5, 0.2, 0.2 kept).
    """
    sizes = [k for k in CANDIDATES if probs.shape[-1] >= max(VOCAB_PER_CANDIDATE * k, k + 1)]
    rows = torch.arange(probs.shape[0], device=probs.device)  # (R,) rows still to decide, ascending
    decided, undecided = [], []
    if not sizes:
        return decided, rows
    # Upper bounds on the mass of each row's k likeliest tokens, so that a try that cannot decide a
    # row is not made (a failed try would cost a topk on top of the full sort). One pass: the mass
    # above t plus k * t bounds it for every k (float32 and loose: they only spare tries).
    t = top_p / (SCREEN * sizes[-1])
    above = F.threshold(probs, t, 0).sum(dim=-1, dtype=torch.float32)  # (B,) mass of the tokens > t
    mass = last = None  # (R,) after a try: the mass of the `tried` candidates and the smallest of them
    tried = 0
    for k in sizes:
        reach = torch.minimum(above + k * t, mass + last * (k - tried)) if tried else above + k * t
        hopeful = reach * MASS_SLACK >= top_p  # (R,)
        if not bool(hopeful.all()):
            undecided.append(rows[~hopeful])
            rows = rows[hopeful]
            if rows.numel() == 0:
                break
            above = above[hopeful]
            if tried:
                mass, last = mass[hopeful], last[hopeful]
        sub = probs if rows.numel() == probs.shape[0] else probs.index_select(0, rows)
        values, index = sub.topk(k, dim=-1)  # (R, k) each, values descending
        cum = values.cumsum(dim=-1)
        n = (cum[:, :-1] < top_p).sum(dim=-1, keepdim=True) + 1  # (R, 1) kept count; n < k: decided here
        pair = values.gather(-1, torch.cat([n - 1, n.clamp(max=k - 1)], dim=-1))  # (R, 2) last kept, first cut
        done = (n < k).squeeze(-1) & (pair[:, 0] != pair[:, 1])
        kept = values.masked_fill(torch.arange(k, device=probs.device) >= n, 0)
        if bool(done.all()):
            decided.append((rows, index, kept))
            rows = rows[:0]
            break
        if bool(done.any()):
            decided.append((rows[done], index[done], kept[done]))
        short = (n >= k).squeeze(-1)
        undecided.append(rows[~done & ~short])  # equal probabilities on both sides of the cut
        rows, above, tried = rows[short], above[short], k
        mass, last = cum[short, -1].float(), values[short, -1].float()
        if rows.numel() == 0:
            break
    undecided.append(rows)
    return decided, torch.cat(undecided)


def _top_p_candidates(row: torch.Tensor, top_p: float) -> torch.Tensor | None:
    """One row's kept probabilities (the rest zero, not yet renormalised) decided on its candidate
    sets, or None when the full sort must decide (see `_candidates`)."""
    decided, undecided = _candidates(row[None], top_p)
    if undecided.numel():
        return None
    out = torch.zeros_like(row[None])
    for rows, index, kept in decided:
        _place(out, rows, index, kept)
    return out[0]

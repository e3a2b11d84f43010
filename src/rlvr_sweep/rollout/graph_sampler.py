"""Sampling (paper §6 steps 1-4) as fixed-shape tensor work with no read-back: what a captured decode step
can hold, drawing the same tokens from the same generator as `engine.sample_next_token`.

Why it is the same draw: ``torch.multinomial(probs, 1, generator=g)`` is, in ATen (``multinomial`` in
``Distributions.cpp``, the path for one sample), ``q = empty_like(probs).exponential_(generator=g)`` over
the whole ``(B, V)`` tensor, then ``argmax(probs / q)``: the exponential trick. `noise` draws that ``q``;
`sorted_tokens` is that argmax over the baseline's full-sort nucleus (`nucleus.top_p_sorted`), so it is
`sample_next_token`'s draw bit for bit and leaves the generator where multinomial leaves it
(tests/rollout/test_graph_sampler.py checks both, float32 and bf16).

`candidate_tokens` takes each row's ``k`` likeliest tokens instead of sorting the vocabulary and says, per row,
whether they decide it (`nucleus._candidates`' argument: a top-k's values are the full sort's first ``k``,
so the kept count ``n`` is the sort's when ``n < k``, and the kept set is fixed unless the ``n``-th and
``n+1``-th values are equal). Where they do, its token is the full sort's:

- the renormalising sum is taken over the whole ``(B, V)`` row with the kept values scattered into zeros,
  the very tensor the full sort sums, so each kept ``p / total`` has the same bits;
- every token outside the kept set has ``0 / q = 0`` and every kept one ``p / total / q > 0``, so the maximum
  is among the kept, and an exact tie in ``p / total / q`` goes to the smallest token id, as ``argmax`` does;
- a row with a zero in its noise (``0 / 0`` is NaN, which ``argmax`` prefers: probability about ``V`` in
  ``2**24`` per row in float32) is left undecided.

Greedy decoding (temperature 0) is an argmax and draws nothing.
"""

from __future__ import annotations

import torch

from rlvr_sweep.rollout.nucleus import top_p_sorted

__all__ = ["noise", "probabilities", "sorted_tokens", "candidate_tokens"]


def probabilities(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Step 1-2: ``softmax(logits / temperature)`` in the logits' dtype, as `engine.next_token_probs`."""
    if temperature != 1.0:
        logits = logits / temperature
    return torch.softmax(logits, dim=-1)


def noise(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """The ``(B, V)`` exponential draws ``torch.multinomial(probs, 1, generator=generator)`` makes."""
    return torch.empty_like(probs).exponential_(generator=generator)


def sorted_tokens(probs: torch.Tensor, top_p: float | None, q: torch.Tensor) -> torch.Tensor:
    """(B,) the multinomial draw, under noise ``q``, from the baseline's full-sort nucleus of ``probs``."""
    filtered = probs if top_p is None or top_p >= 1.0 else top_p_sorted(probs, top_p)
    return (filtered / q).argmax(dim=-1)


def candidate_tokens(probs: torch.Tensor, top_p: float, q: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens, decided)``, each (B,): the draw under noise ``q`` from the nucleus of ``probs`` (B, V) decided on
    each row's ``k`` likeliest tokens, and which rows that decides (elsewhere ``tokens`` is meaningless and
    `sorted_tokens` must decide). ``0 < top_p < 1``, ``k < V``. No data-dependent branch or read-back.

    Example (one row, top_p 0.6, k 3): probabilities 0.5, 0.3, 0.1, 0.1 have prefix sums 0.5, 0.8, 0.9, so
    ``n = 2`` tokens are kept (0.5 and 0.3; the cut falls between 0.3 and 0.1) and the row is decided.
    """
    vocab = probs.shape[-1]
    values, index = probs.topk(k, dim=-1)  # (B, k) each, values descending
    cum = values.cumsum(dim=-1)
    n = (cum[:, :-1] < top_p).sum(dim=-1, keepdim=True) + 1  # (B, 1) kept count; decided only when n < k
    cut = values.gather(-1, torch.cat([n - 1, n.clamp(max=k - 1)], dim=-1))  # (B, 2) last kept, first dropped
    decided = (n < k).squeeze(-1) & (cut[:, 0] != cut[:, 1]) & (q > 0).all(dim=-1)
    kept = values.masked_fill(torch.arange(k, device=probs.device) >= n, 0)  # (B, k)
    total = torch.zeros_like(probs).scatter_(-1, index, kept).sum(dim=-1, keepdim=True)  # (B, 1): the sort's sums
    scores = kept / total / q.gather(-1, index)  # (B, k); 0 beyond the kept
    best = scores.amax(dim=-1, keepdim=True)
    tokens = torch.where(scores == best, index, vocab).amin(dim=-1)  # the smallest id among equal maxima
    return tokens, decided

"""Where a deterministic test-time fork branches off its greedy root (seed paper §5.6 items 2-3).

Pure functions of one root's teacher-forced margins ``margins[t] = z_(1) - z_(2)`` at zero-based
positions ``t`` (the root's first 72 tokens in the paper); the window is ``[start, end)`` (``[4, 64)``)
cut at the margins' length. A non-finite margin never qualifies (there was no second-best token).

- ``min_margin_positions``: ``t_min1`` = the smallest margin in the window; ``t_min2`` = the smallest
  margin among positions with ``|t - t_min1| >= sep`` (2), which is not necessarily the unrestricted
  second smallest (`Self_MinMargin_Top2_Rank1..2`, `MinMargin-Fork@3`).
- ``first_gap_slots``: the chronologically first and second positions with ``margin <= threshold``
  (0.5), the second at least ``sep`` after the first (`FirstGap05-Fork@3`). Per-slot fallback: slot 1
  takes ``t_min1`` when no position qualifies; slot 2 takes ``t_min2`` when fewer than two non-adjacent
  positions qualify.
- ``extra_first_gap_slots``: the tie-gated extra slots (FG3, FG4 of `TieGated-FG05`), see its docstring.
- ``hybrid_positions``: the union of both rules' forks (`Hybrid-Fork`, 3-5 branches per item).

Choices where the paper is silent (each has a test): equal margins go to the earliest position; an
extra slot without a qualifying position falls back to the smallest margin at least ``sep`` from every
position already chosen; a slot that no position can fill stays empty (``None``), so an item whose
root is shorter than the window gets fewer branches.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["Slot", "window", "smallest_margin", "min_margin_positions", "first_gap_chain", "first_gap_slots",
           "extra_first_gap_slots", "hybrid_positions"]

FIRST_GAP, FALLBACK = "first_gap", "fallback"


class Slot(NamedTuple):
    position: int | None  # None: no position can fill the slot
    source: str  # "first_gap" (margin <= threshold) or "fallback" (smallest margin)


def window(margins: Sequence[float], start: int, end: int) -> range:
    """The zero-based positions a fork may use: ``[start, min(end, len(margins)))``."""
    return range(max(start, 0), min(end, len(margins)))


def smallest_margin(margins: Sequence[float], positions, avoid: Sequence[int] = (), sep: int = 2) -> int | None:
    """The position of the smallest finite margin among ``positions`` at least ``sep`` from every
    position in ``avoid``; the earliest on equal margins; None when none is left.

    >>> smallest_margin([3.0, 0.2, 0.9, 0.2, 5.0], range(5))
    1
    >>> smallest_margin([3.0, 0.2, 0.9, 0.2, 5.0], range(5), avoid=[1])
    3
    """
    pool = [t for t in positions if math.isfinite(margins[t]) and all(abs(t - a) >= sep for a in avoid)]
    return min(pool, key=lambda t: (margins[t], t)) if pool else None


def min_margin_positions(margins: Sequence[float], start: int, end: int, sep: int = 2) -> tuple[int | None, int | None]:
    """``(t_min1, t_min2)``: the smallest margin in the window, then the smallest at least ``sep`` away.

    >>> min_margin_positions([9, 9, 9, 9, 1.0, 0.1, 0.2, 0.8], 4, 64)   # 0.2 at t=6 is adjacent to t=5
    (5, 7)
    """
    positions = window(margins, start, end)
    t1 = smallest_margin(margins, positions)
    t2 = None if t1 is None else smallest_margin(margins, positions, avoid=[t1], sep=sep)
    return t1, t2


def first_gap_chain(margins: Sequence[float], start: int, end: int, threshold: float, sep: int = 2) -> list[int]:
    """Every chronological first-gap slot: the first position with ``margin <= threshold``, then each
    next one at least ``sep`` after the previous pick.

    >>> first_gap_chain([9, 9, 9, 9, 0.4, 0.5, 2.0, 0.1, 0.3], 4, 64, 0.5)   # 5 is adjacent to 4; 8 to 7
    [4, 7]
    """
    chain: list[int] = []
    for t in window(margins, start, end):
        if margins[t] <= threshold and (not chain or t - chain[-1] >= sep):  # NaN compares False
            chain.append(t)
    return chain


def first_gap_slots(margins: Sequence[float], start: int, end: int, threshold: float,
                    sep: int = 2) -> tuple[Slot, Slot]:
    """FirstGap05's two fork slots with the paper's per-slot fallback to ``t_min1`` / ``t_min2``.

    >>> first_gap_slots([9, 9, 9, 9, 0.4, 0.3, 2.0, 0.7], 4, 64, 0.5)   # one non-adjacent gap: slot 2 falls back
    (Slot(position=4, source='first_gap'), Slot(position=7, source='fallback'))
    """
    chain = first_gap_chain(margins, start, end, threshold, sep)
    t_min1, t_min2 = min_margin_positions(margins, start, end, sep)
    slot1 = Slot(chain[0], FIRST_GAP) if chain else Slot(t_min1, FALLBACK)
    slot2 = Slot(chain[1], FIRST_GAP) if len(chain) >= 2 else Slot(t_min2, FALLBACK)
    return slot1, slot2


def extra_first_gap_slots(margins: Sequence[float], start: int, end: int, threshold: float, taken: Sequence[int],
                          n: int, sep: int = 2) -> list[Slot]:
    """The next ``n`` slots after FirstGap05's two (TieGated-FG05's FG3, FG4), given the fork positions
    already ``taken``: the chain of first gaps continues (its 3rd, 4th, ... positions); a slot the chain
    cannot fill takes the smallest margin at least ``sep`` from every position taken so far (the paper
    names no fallback for these slots; this one keeps FirstGap05's "smallest margin" fallback and its
    separation). A slot nothing can fill is ``Slot(None, "fallback")``.
    """
    chain = first_gap_chain(margins, start, end, threshold, sep)
    chosen = [t for t in taken if t is not None]
    slots = []
    for k in range(n):
        t = chain[2 + k] if len(chain) > 2 + k else None
        slot = Slot(t, FIRST_GAP) if t is not None and t not in chosen else Slot(
            smallest_margin(margins, window(margins, start, end), avoid=chosen, sep=sep), FALLBACK)
        slots.append(slot)
        if slot.position is not None:
            chosen.append(slot.position)
    return slots


def hybrid_positions(min_margin: Sequence[int | None], first_gap: Sequence[int | None]) -> list[int]:
    """Hybrid-Fork's branch positions: MinMargin's forks, then FirstGap05's that are new (in slot order).

    >>> hybrid_positions([12, 30], [5, 12])
    [12, 30, 5]
    """
    out: list[int] = []
    for t in [*min_margin, *first_gap]:
        if t is not None and t not in out:
            out.append(t)
    return out

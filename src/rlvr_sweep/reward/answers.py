"""What a response answers, and whether a set of responses has a majority (seed paper §5.5, §5.6).

One copy of the two rules every vote and every tie-gated fork uses: `answer_of` (a response that hit
its cap without a `\\boxed` answer answers "", the paper's e_i = "", whatever number the extractor's
fallback found) and `plurality` (the unique most frequent non-empty answer, after the grader's
normalisation, when it occurs at least twice; None for a tie: 1-1-1, 2-2, all empty).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from rlvr_sweep.reward.grading import normalize


# The grader's normalisation, remembered: a vote normalises the same few answers once per rule and item.
normalized = functools.lru_cache(maxsize=1 << 16)(normalize)


def answer_of(extracted, capped_unboxed) -> str:
    return "" if bool(capped_unboxed) else (extracted or "")


def frequencies(answers: Iterable[str]) -> dict[str, int]:
    """{non-empty answer: how often}, in first-seen order (as `Counter`, without its cost on a vote's 3-5)."""
    counts: dict[str, int] = {}
    for a in answers:
        if a:
            counts[a] = counts.get(a, 0) + 1
    return counts


def plurality(answers: Iterable[str]) -> str | None:
    """The unique most frequent non-empty normalised answer with frequency >= 2, else None."""
    counts = frequencies(normalized(x) for x in answers)
    top = max(counts.values(), default=0)
    if top < 2:
        return None
    leaders = [a for a, n in counts.items() if n == top]
    return leaders[0] if len(leaders) == 1 else None


def no_majority(rows: Iterable) -> bool:
    """True when graded rows (`extracted`, `capped_unboxed`) hold no plurality answer: TieGated's test."""
    return plurality(answer_of(r["extracted"], r["capped_unboxed"]) for r in rows) is None

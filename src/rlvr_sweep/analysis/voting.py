"""Voting over k candidate answers to one question (seed paper §5.5, §5.6 item 3).

A candidate is (extracted answer, length in tokens, correct) and optionally its own token limit
`eff_cap` (batched fork continuations of §5.6 stop at eff_cap_i = 2048 - max_j K_j + K_i <= 2048).
Answers are compared after the baseline's normalisation (`rlvr_sweep.reward.normalize`); an empty
answer never counts towards a majority. The selected candidate is the plurality answer's lowest index
when one non-empty answer is most frequent with frequency >= 2 (for k = 3: "if e0 matches e1 or e2,
pick 0; else if e1 == e2, pick 1"). Otherwise the rule breaks the tie:

- `rand`:   the exact expectation of a uniform pick (1-1-1: (c0 + c1 + c2) / 3);
- `maxlen`: the longest candidate with a non-empty answer (the longest overall if all are empty),
            lowest index on equal lengths: max(range(k), key=lambda i: (bool(e_i), L_i));
- `mdl`:    the shortest *eligible* candidate, eligible = non-empty and min_len <= L < cap (its
            eff_cap when given); if none is eligible, the shortest overall (the `fb` of Table 4);
            lowest index on equal lengths: min(range(k), key=lambda i: (not eligible_i, L_i));
- `cr`:     CompletedRoot: keep candidate 0 (the greedy root) when it is eligible, else `mdl`.

For k = 4, 5 (§5.6: `_plurality_cr_mdl`) two answers can tie at the top frequency f_max >= 2 (2-2,
2-2-1): every rule then chooses among the tied answers' candidates only (`mdl` and `cr`: the
shortest eligible one, falling back to the shortest; `maxlen`: the longest; `rand`: the mean).
For k = 3 this is exactly §5.5's rule set.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from rlvr_sweep.reward.answers import frequencies, normalized, plurality

RULES = ("rand", "maxlen", "mdl", "cr")
_KNOWN = frozenset(RULES)


class Candidate(NamedTuple):
    answer: str  # the extracted answer, as stored (normalised here)
    length: int  # generated tokens
    correct: float  # 1.0 / 0.0 (a bool is fine)
    eff_cap: int | None = None  # this candidate's own token limit; None = the vote's cap


class Vote(NamedTuple):
    value: float  # expected correctness of the selection
    index: int | None  # the selected candidate; None when `rand` averages over a tie
    tie: bool  # no unique most frequent non-empty answer with frequency >= 2
    fallback: bool  # mdl / cr took the shortest candidate because none was eligible


def _eligible(c: Candidate, answer: str, cap: int, min_len: int) -> bool:
    limit = cap if c.eff_cap is None else c.eff_cap
    return bool(answer) and min_len <= c.length < limit


def _shortest(pool: Sequence[int], ok: Sequence[bool], cands: Sequence[Candidate]) -> tuple[int, bool]:
    """(index, fallback): the shortest eligible in `pool`, else the shortest; lowest index on ties."""
    best = min(pool, key=lambda i: (not ok[i], cands[i].length, i))
    return best, not ok[best]


def vote_detail(candidates: Sequence, rule: str, cap: int = 2048, min_len: int = 15) -> Vote:
    """The vote of `rule` over `candidates` (Candidate or plain tuples), with what decided it."""
    return vote_details(candidates, (rule,), cap, min_len)[rule]


def vote_details(candidates: Sequence, rules: Sequence[str], cap: int = 2048, min_len: int = 15) -> dict[str, Vote]:
    """{rule: its vote} for several rules over the same candidates (what they share is worked out once)."""
    if not _KNOWN.issuperset(rules):
        unknown = [r for r in rules if r not in RULES]
        raise ValueError(f"unknown voting rule {unknown[0]!r}; valid: {list(RULES)}")
    cands = [c if isinstance(c, Candidate) else Candidate(*c) for c in candidates]
    if not cands:
        raise ValueError("vote needs at least one candidate")
    answers = [normalized(c.answer) for c in cands]
    correct = [float(c.correct) for c in cands]
    leader = plurality(answers)  # an empty answer never forms a majority
    if leader is not None:
        chosen = answers.index(leader)  # lowest index holding the plurality answer
        return {rule: Vote(correct[chosen], chosen, False, False) for rule in rules}
    ok = [_eligible(c, a, cap, min_len) for c, a in zip(cands, answers)]
    freq = frequencies(answers)
    f_max = max(freq.values(), default=0)
    top = [a for a, f in freq.items() if f == f_max] if f_max >= 2 else []
    # A tie: between the top answers' candidates (2-2, 2-2-1), or among all (1-1-1, empties).
    pool = [i for i, a in enumerate(answers) if a in top] if top else list(range(len(cands)))
    return {rule: _tie_vote(rule, pool, top, ok, answers, correct, cands) for rule in rules}


def _tie_vote(rule: str, pool, top, ok, answers, correct, cands) -> Vote:
    if rule == "rand":
        return Vote(sum(correct[i] for i in pool) / len(pool), None, True, False)
    if rule == "maxlen":
        chosen = min(pool, key=lambda i: (not answers[i], -cands[i].length, i))
        return Vote(correct[chosen], chosen, True, False)
    if rule == "cr" and not top and ok[0]:
        return Vote(correct[0], 0, True, False)  # the root completed: keep it
    chosen, fallback = _shortest(pool, ok, cands)
    return Vote(correct[chosen], chosen, True, fallback)


def vote(candidates: Sequence, rule: str, cap: int = 2048, min_len: int = 15) -> float:
    """Expected correctness of the answer `rule` selects from `candidates` (see the module docstring).

    >>> vote([("7", 300, 1), ("\\\\text{7}", 40, 1), ("8", 20, 0)], "mdl")   # 7 is the majority
    1.0
    >>> vote([("7", 300, 1), ("9", 40, 0), ("8", 20, 0)], "rand")           # 1-1-1: (1 + 0 + 0) / 3
    0.3333333333333333
    """
    return vote_detail(candidates, rule, cap, min_len).value

"""Where each prefix-splice probe cuts (seed paper §5.6 items 1-2, Table 5A): pure rules on token lists.

The recipient B is teacher-forced along the donor A's first ``span = min(160, |y_A|)`` tokens; a
*mismatch* is a position where B's argmax differs from A's token. Every condition is a prefix of K
tokens given to B (then continued greedily, `continuation`):

- ``K0_none``: nothing (the prompt only);
- ``K96_self_ctrl`` / ``K160_self_ctrl``: B's own first min(96 | 160, |y_B|) tokens;
- ``MismatchPrefix_m_donor`` (m = 1, 2, 3): A's tokens through the m-th mismatch, ``K = t*_m + 1``; with
  fewer than m mismatches the earlier cut is reused (`mismatch_cut`);
- ``K_nl1_donor`` / ``K_nl2_donor``: A's tokens through its 1st / 2nd newline token at a position >= 5;
- ``K96_donor_full`` / ``K160_donor_full``: A's first min(96 | 160, |y_A|) tokens;
- ``Self_MinMargin_Top2_Rank1..2``: B's own tokens before ``t_min,m`` (its smallest-margin positions in
  [4, 64) of a margin pass over its own first 72 tokens, `fork_rules.min_margin_positions`) and then its
  teacher-forced top-2 token there (K = t + 1);
- ``Self_Identity_Ctrl_Rank1..2``: B's own tokens through ``t_min,m`` (its recorded token at the same cut).
The two-branch unions are read off the Rank1 / Rank2 rows by analysis.

Choices where the paper is silent (tested): with no mismatch at all (B agrees on the whole span) the
mismatch cuts take the whole span; with no newline at a position >= 5 the newline cuts reuse the
earlier cut, and with none at all take the span; a self fork without a position (B's response is
shorter than the window) yields no row for that condition (it rescues nothing). Responses are token
lists as decoded (a finished one ends with EOS), so a cut through a final EOS is a complete response.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["CONDITIONS", "DONOR_CONDITIONS", "mismatch_positions", "mismatch_cut", "newline_positions",
           "newline_cut", "plan_cuts"]

CONDITIONS = (
    "K0_none", "K96_self_ctrl", "K160_self_ctrl",
    "MismatchPrefix_1_donor", "MismatchPrefix_2_donor", "MismatchPrefix_3_donor",
    "K_nl1_donor", "K_nl2_donor", "K96_donor_full", "K160_donor_full",
    "Self_MinMargin_Top2_Rank1", "Self_Identity_Ctrl_Rank1", "Self_MinMargin_Top2_Rank2", "Self_Identity_Ctrl_Rank2",
)
DONOR_CONDITIONS = tuple(c for c in CONDITIONS if c.endswith("_donor") or c.endswith("_donor_full"))


def mismatch_positions(recipient_top1: Sequence[int], donor_tokens: Sequence[int]) -> list[int]:
    """Positions where the recipient's teacher-forced argmax is not the donor's token.

    >>> mismatch_positions([5, 6, 9, 8, 1], [5, 6, 7, 8, 2])
    [2, 4]
    """
    return [t for t, (a, b) in enumerate(zip(recipient_top1, donor_tokens)) if a != b]


def mismatch_cut(mismatches: Sequence[int], m: int, span: int) -> int:
    """K after the m-th mismatch (1-based), reusing the last earlier cut when there are fewer than m
    mismatches; the whole span when there is none.

    >>> [mismatch_cut([2, 9], m, 20) for m in (1, 2, 3)], mismatch_cut([], 1, 20)
    ([3, 10, 10], 20)
    """
    if not mismatches:
        return span
    return mismatches[min(m, len(mismatches)) - 1] + 1


def newline_positions(tokens: Sequence[int], is_newline: Callable[[int], bool], min_pos: int) -> list[int]:
    """Positions >= ``min_pos`` holding a newline token.

    >>> newline_positions([1, 0, 3, 0, 0, 4, 0], lambda t: t == 0, 3)
    [3, 4, 6]
    """
    return [t for t, tok in enumerate(tokens) if t >= min_pos and is_newline(tok)]


def newline_cut(newlines: Sequence[int], n: int, span: int) -> int:
    """K through the n-th newline (1-based), reusing the earlier one when there are fewer; the span when none."""
    if not newlines:
        return span
    return newlines[min(n, len(newlines)) - 1] + 1


def plan_cuts(*, donor: Sequence[int], recipient: Sequence[int], mismatches: Sequence[int], newlines: Sequence[int],
              span: int, self_forks: Sequence[int | None], self_top1: Sequence[int], self_top2: Sequence[int],
              self_cuts: Sequence[int], donor_cuts: Sequence[int]) -> dict[str, tuple[list[int], dict]]:
    """{condition: (prefix tokens, details)} of one item; details hold the fork's position and tokens.

    ``self_cuts`` / ``donor_cuts``: the (96, 160) lengths in this profile's tokens; ``self_forks``:
    (t_min1, t_min2) of the recipient's own margin pass, ``self_top1`` / ``self_top2`` its top ids there.
    """
    out: dict[str, tuple[list[int], dict]] = {"K0_none": ([], {})}
    for name, k in zip(("K96_self_ctrl", "K160_self_ctrl"), self_cuts):
        out[name] = (list(recipient[:k]), {})
    for m in (1, 2, 3):
        k = mismatch_cut(mismatches, m, span)
        out[f"MismatchPrefix_{m}_donor"] = (list(donor[:k]), {"fork_pos": k - 1})
    for n in (1, 2):
        out[f"K_nl{n}_donor"] = (list(donor[: newline_cut(newlines, n, span)]), {})
    for name, k in zip(("K96_donor_full", "K160_donor_full"), donor_cuts):
        out[name] = (list(donor[:k]), {})
    for rank, t in enumerate(self_forks, start=1):
        if t is None:
            continue
        detail = {"fork_pos": t, "orig_token": recipient[t], "inserted_token": self_top2[t], "top1_token": self_top1[t]}
        out[f"Self_MinMargin_Top2_Rank{rank}"] = (list(recipient[:t]) + [self_top2[t]], detail)
        out[f"Self_Identity_Ctrl_Rank{rank}"] = (list(recipient[: t + 1]), {**detail, "inserted_token": recipient[t]})
    return out

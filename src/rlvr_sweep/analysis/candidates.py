"""Graded rows as vote candidates: the one place a stored response becomes (answer, length, correct, cap).

A response that hit its cap without a `\\boxed` answer counts as an empty answer (the paper's
e_i = "", §5.5), whatever number the extractor's fallback found; an empty answer never forms a
majority. A fork branch votes with its own effective cap (`eff_cap`, §5.6): MDL and CR count it as
completed when ``min_len <= L < eff_cap``. `fork_tie` is the test TieGated-FG05 stops on: the
branches have no unique most frequent non-empty answer (the read-out calls it through the run).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rlvr_sweep.analysis.voting import Candidate
from rlvr_sweep.reward import answer_of, no_majority

__all__ = ["answer_of", "candidate", "fork_tie"]


def candidate(row: Mapping) -> Candidate:
    """A vote candidate from one graded row (a dict or a DataFrame row)."""
    cap = row.get("eff_cap") if hasattr(row, "get") else None
    cap = None if cap is None or (isinstance(cap, float) and math.isnan(cap)) else int(cap)
    return Candidate(answer_of(row["extracted"], row["capped_unboxed"]), int(row["length"]), float(row["correct"]), cap)


def fork_tie(rows: Sequence[Mapping]) -> bool:
    """True when the branches hold no unique most frequent non-empty answer (1-1-1, 2-2-1, empties): the
    test the fork read-out stopped on (`reward.no_majority`)."""
    return no_majority(rows)

"""One item of a fork read-out, voted under each branching rule (seed paper §5.6 item 3, Table 5B).

The read-out stores one row per branch with its slot in each rule (`evaluation.forks`); a rule's
candidates are its branches in slot order, candidate 0 being the greedy root:

- ``minmargin``  MinMargin-Fork@3: root, t_min1, t_min2 (``mm_slot`` 0, 1, 2);
- ``firstgap``   FirstGap05-Fork@3: root, first and second gap (``fg_slot`` 0, 1, 2);
- ``tiegated``   TieGated-FG05: FirstGap05's three, plus FG3 / FG4 (``fg_slot`` 3, 4) on its 3-way ties;
- ``hybrid``     Hybrid-Fork: every branch of the two @3 rules, in branch order (3 to 5).

Each candidate votes with its own effective cap (`analysis.candidates`). `item_votes` gives the per-item
numbers Table 5B sums: the root, each rule's branch accuracies, MDL- and CR-Maj, Pass@M, branch
count, FirstGap05's and MinMargin's stratum, whether TieGated resolved a tie (f_max >= 2), and on a
wrong anchor (the root missed) whether a rule's first fork (`rescue1`) or either of its two (`rescue2`)
rescued it, and MinMargin's forks re-indexed chronologically: the earlier (`early_rescue`) and the
later (`late_rescue`) fork position.
Strata of a @3 rule (§5.6: Unanimous, Root+1, Sibling Override, Completed Tie, Truncated Tie): the
majority answer is every branch's, includes the root, or excludes it; with no majority, the root is
completed (CR keeps it) or not (CR falls back to MDL).
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from rlvr_sweep.analysis.candidates import candidate
from rlvr_sweep.analysis.voting import Candidate, vote_detail
from rlvr_sweep.reward import normalize

RULES = ("minmargin", "firstgap", "tiegated", "hybrid")
STRATA = ("unanimous", "root_plus_1", "sibling_override", "completed_tie", "truncated_tie")


def rule_branches(item: pd.DataFrame, rule: str) -> pd.DataFrame:
    """The rows of one item's branches that `rule` votes over, in candidate order."""
    if rule == "minmargin":
        return item[item["mm_slot"] >= 0].sort_values("mm_slot")
    if rule == "firstgap":
        return item[item["fg_slot"].between(0, 2)].sort_values("fg_slot")
    if rule == "tiegated":  # slots 3, 4 exist only where FirstGap05 tied
        return item[item["fg_slot"] >= 0].sort_values("fg_slot")
    if rule == "hybrid":
        return item[(item["mm_slot"] >= 0) | item["fg_slot"].between(0, 2)].sort_values("branch")
    raise ValueError(f"unknown branching rule {rule!r}; valid: {list(RULES)}")


def top_frequency(cands: list[Candidate]) -> int:
    """f_max: how often the most frequent non-empty (normalised) answer occurs (0 when all are empty)."""
    counts = Counter(a for a in (normalize(c.answer) for c in cands) if a)
    return max(counts.values(), default=0)


def stratum(cands: list[Candidate], cap: int, min_len: int) -> str:
    """The §5.6 stratum of one item's branches under a @3 rule (candidate 0 is the root)."""
    v = vote_detail(cands, "cr", cap, min_len)
    if v.tie:  # no majority: CR keeps the root exactly when the root completed
        return "completed_tie" if v.index == 0 and not v.fallback else "truncated_tie"
    answers = [normalize(c.answer) for c in cands]
    holders = [i for i, a in enumerate(answers) if a == answers[v.index]]
    if len(holders) == len(cands):
        return "unanimous"
    return "root_plus_1" if 0 in holders else "sibling_override"


def item_votes(item: pd.DataFrame, cap: int, min_len: int) -> dict:
    """Per-item numbers of one fork read-out item (`rule.column` keys, see the module docstring)."""
    root = item[item["branch"] == 0].iloc[0]
    out = {"b0": float(root["correct"]), "fg_tie": bool(root["fg_tie"])}
    for rule in RULES:
        rows = rule_branches(item, rule)
        cands = [candidate(r) for _, r in rows.iterrows()]
        out[f"{rule}.mdl"] = vote_detail(cands, "mdl", cap, min_len).value
        out[f"{rule}.cr"] = vote_detail(cands, "cr", cap, min_len).value
        out[f"{rule}.pass"] = float(max(c.correct for c in cands))
        out[f"{rule}.branches"] = len(cands)
        if rule in ("minmargin", "firstgap"):
            out[f"{rule}.stratum"] = stratum(cands, cap, min_len)
            # the paper's check: MDL with the plain cap instead of each branch's eff_cap
            out[f"{rule}.mdl_plain_cap"] = vote_detail([c._replace(eff_cap=None) for c in cands], "mdl", cap,
                                                       min_len).value
            slot = "mm_slot" if rule == "minmargin" else "fg_slot"
            for k in (1, 2):
                hit = rows[rows[slot] == k]
                out[f"{rule}.b{k}"] = float(hit["correct"].iloc[0]) if len(hit) else float("nan")
                out[f"{rule}.t{k}"] = float(hit["fork_pos"].iloc[0]) if len(hit) else float("nan")
        if rule == "firstgap":
            gaps = rows[rows["fg_slot"] >= 1]
            out["firstgap.fallbacks"] = int(gaps["fg_fallback"].astype(bool).sum())
            out["firstgap.strict"] = int((~gaps["fg_fallback"].astype(bool)).sum())
        if rule == "tiegated":
            out["tiegated.resolved"] = bool(out["fg_tie"] and top_frequency(cands) >= 2)
    wrong = out["b0"] == 0  # a wrong anchor: the greedy root missed the item
    out["wrong_anchor"] = wrong
    for rule in ("minmargin", "firstgap"):
        b1, b2 = (out[f"{rule}.b{k}"] == 1 for k in (1, 2))  # NaN (no such fork) is no rescue
        out[f"{rule}.rescue1"], out[f"{rule}.rescue2"] = wrong and b1, wrong and (b1 or b2)
    mm = item[item["mm_slot"].isin([1, 2])].sort_values("fork_pos")  # MinMargin's forks, earliest first
    out["minmargin.early_rescue"] = bool(wrong and len(mm) and mm["correct"].iloc[0])
    out["minmargin.late_rescue"] = bool(wrong and len(mm) > 1 and mm["correct"].iloc[-1])
    return out


def readout_items(rows: pd.DataFrame, cap: int, min_len: int) -> pd.DataFrame:
    """`item_votes` of every item of one fork read-out (one benchmark or several), one row per item."""
    out = []
    for (benchmark, index), item in rows.groupby(["benchmark", "index"], sort=False):
        out.append({"benchmark": benchmark, "index": index, "item_id": item["item_id"].iloc[0],
                    **item_votes(item, cap, min_len)})
    return pd.DataFrame(out)

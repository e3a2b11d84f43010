"""PASS 4: the vote counts of Tables 4 and 5B, recounted by the paper's rule written out again.

The tables vote through `analysis.voting`; this module does not call it. For at most three candidates
(Table 4's k = 3 seeds or draws, Table 5B's root and two forks) the paper's rule reads (§5.5, §5.6):
e_i is the candidate's answer ("" when it hit its cap without a `\\boxed` answer, normalised as the
grader normalises); if e_0 is non-empty and equals e_1 or e_2, pick candidate 0; else if e_1 is
non-empty and equals e_2, pick candidate 1; else there is no majority and the rule breaks the tie:
Rand the mean correctness of all, MaxLen the longest candidate with a non-empty answer (the longest
overall if none has one), MDL the shortest candidate that completed (non-empty, min_len <= L < its cap)
or, when none did, the shortest overall (a fallback, `fb`), CR candidate 0 when it completed, else MDL.
Equal lengths go to the lower index.
"""

from __future__ import annotations

import pandas as pd

from rlvr_sweep.analysis import Sweep
from rlvr_sweep.analysis.checkpoints import readouts_of
from rlvr_sweep.analysis.source import grade_rows
from rlvr_sweep.reward import answer_of, normalize


def _candidates(rows: pd.DataFrame) -> list[tuple[str, int, float, int | None]]:
    """(answer, length, correct, own cap) of each row, in order."""
    out = []
    for _, r in rows.iterrows():
        answer = normalize(answer_of(r["extracted"], r["capped_unboxed"]))
        cap = r.get("eff_cap")
        out.append((answer, int(r["length"]), float(r["correct"]), None if cap is None or pd.isna(cap) else int(cap)))
    return out


def plain_vote(cands, rule: str, cap: int, min_len: int) -> tuple[float, bool]:
    """(correctness of the pick, whether MDL fell back) under the rule above, for 1 to 3 candidates."""
    if not 1 <= len(cands) <= 3:
        raise ValueError(f"the written-out rule covers 1 to 3 candidates, got {len(cands)}")
    answers = [c[0] for c in cands]
    if len(cands) >= 2 and answers[0] and answers[0] in answers[1:]:
        return cands[0][2], False
    if len(cands) == 3 and answers[1] and answers[1] == answers[2]:
        return cands[1][2], False
    completed = [bool(a) and min_len <= length < (own if own is not None else cap) for a, length, _, own in cands]
    if rule == "rand":
        return sum(c[2] for c in cands) / len(cands), False
    if rule == "maxlen":
        pool = [i for i, a in enumerate(answers) if a] or list(range(len(cands)))
        best = pool[0]
        for i in pool:
            if cands[i][1] > cands[best][1]:
                best = i
        return cands[best][2], False
    if rule == "cr" and completed[0]:
        return cands[0][2], False
    pool = [i for i in range(len(cands)) if completed[i]]
    fallback = not pool
    pool = pool or list(range(len(cands)))
    best = pool[0]
    for i in pool:
        if cands[i][1] < cands[best][1]:
            best = i
    return cands[best][2], fallback


def _compare(problems: list, what: str, stored, recounted) -> int:
    if pd.isna(stored) or abs(float(stored) - float(recounted)) > 1e-9:
        problems.append(f"{what}: the table says {stored}, the written-out vote gives {recounted}")
    return 1


def _table4_items(sweep: Sweep, row) -> list[list]:
    if row["mode"] == "sampled":
        rows = next((r.of(row["benchmark"]) for r in readouts_of(sweep, "sampled_k3")
                     if r.key == row["unit"] and r.phase == row["phase"] and len(r.of(row["benchmark"]))
                     and int(r.of(row["benchmark"])["sample_seed"].iloc[0]) == int(row["sample_seed"])), pd.DataFrame())
        return [_candidates(item.sort_values("draw")) for _, item in rows.groupby("index", sort=True)] if len(rows) else []
    g = grade_rows(sweep, row["unit"], row["benchmark"])
    by_seed = {s: part.set_index("item_id") for s, part in g.groupby("seed")}
    seeds = list(row["seeds"])
    order = by_seed[seeds[0]].sort_values("index").index
    return [_candidates(pd.DataFrame([by_seed[s].loc[i] for s in seeds])) for i in order
            if all(i in by_seed[s].index for s in seeds)]


def table4_vote_problems(sweep: Sweep, frame: pd.DataFrame) -> tuple[int, list[str]]:
    """Rand- / MaxLen- / MDL-Maj@k and MDL's fallback count of every Table 4 row, recounted."""
    checked, problems = 0, []
    for _, row in frame[frame["mode"].isin(["cross_seed", "sampled"])].iterrows():
        items = _table4_items(sweep, row)
        what = f"Table 4 {row['label']} {row['benchmark']}"
        if len(items) != row["n_items"]:
            problems.append(f"{what}: {row['n_items']} items in the table, {len(items)} in the stored rows")
            continue
        for rule in ("rand", "maxlen", "mdl"):
            votes = [plain_vote(c, rule, int(row["cap"]), int(row["min_len"])) for c in items]
            checked += _compare(problems, f"{what} {rule}-Maj@{row['k']}", row[rule],
                                100 * sum(v for v, _ in votes) / len(votes))
            if rule == "mdl":
                checked += _compare(problems, f"{what} MDL fallbacks", row["fb"], sum(fb for _, fb in votes))
    return checked, problems


def table5b_vote_problems(sweep: Sweep, frame: pd.DataFrame) -> tuple[int, list[str]]:
    """MinMargin's and FirstGap05's MDL- and CR-Maj@3 counts of every Table 5B row, recounted."""
    checked, problems = 0, []
    slots = {"minmargin": "mm_slot", "firstgap": "fg_slot"}
    for r in readouts_of(sweep, "fork3"):
        rows = r.rows
        for b in [*r.benchmarks(), "pool"]:
            hit = frame[(frame["key"] == r.key) & (frame["benchmark"] == b) & (frame["phase"] == r.phase)] \
                if len(frame) and "n_items" in frame else frame.iloc[:0]
            if not len(hit):
                continue
            part = rows if b == "pool" else rows[rows["benchmark"] == b]
            for rule, slot in slots.items():
                for vote in ("mdl", "cr"):
                    total = 0.0
                    for _, item in part.groupby(["benchmark", "index"], sort=False):
                        branches = item[item[slot].between(0, 2)].sort_values(slot)
                        total += plain_vote(_candidates(branches), vote, r.cap, r.min_len)[0]
                    checked += _compare(problems, f"Table 5B {r.label} {b} {rule} {vote.upper()}-Maj@3 count",
                                        hit.iloc[0][f"{rule}.{vote}_count"], total)
    return checked, problems

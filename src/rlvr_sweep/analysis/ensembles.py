"""Oracle unions of chosen checkpoints, and the item strata they define (seed paper §5.6 item 4).

`checkpoint_union(sweep, picks, benchmark)`: for any list of (arm, seed) picks (seed None: every seed of
the arm), the per-item correctness matrix of those checkpoints' greedy read-outs and its oracle union:
an item counts when any chosen checkpoint answered it. The paper's "6-model oracle union Arm 15 ∪ Arm 18
= 350/500" is `[("15", None), ("18", None)]` on MATH-500; its "3-model Arm 15(101) + 17(42) + 18(7)
Pass@3 = 643/950" is `[("15", 101), ("17", 42), ("18", 7)]` on Pool950: Pass@k of chosen checkpoints and
their union are one number. `python -m rlvr_sweep.analysis union ROOT --checkpoints 15:101,17:42,18:7
--benchmark pool950` prints it and can save the matrix.

`build_strata(sweep)` (Table `strata`): R-strata of items by how many reference checkpoints answer them.
The paper names "the out-of-sample 27-checkpoint R2 (7..13/27, n = 59) stratum" and uses R1 on MATH-500
("16.33/108 greedy, 43/108 Pass@3 on R1") and R2 on Val210, without saying which 27 checkpoints or
where R1 and R3 end. Our rule: the reference set is every checkpoint of paper Arms 1-9 in the sweep
(the 512-token study: 9 arms x 3 seeds = 27 in the paper's grid); an item answered by k of the N
reference checkpoints is in R0 when k = 0 and otherwise in R1..R4 by k / N in [0, 7/27), [7/27, 14/27),
[14/27, 21/27), [21/27, 1] (R2's width, 7 of 27, repeated; for N = 27: R1 1-6, R2 7-13, R3 14-20,
R4 21-27). Per benchmark and stratum, every arm outside the reference set ("out-of-sample") gets its
mean correct count over seeds and its Pass@k over seeds within the stratum.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlvr_sweep.analysis.render import Table, num
from rlvr_sweep.analysis.source import BENCHMARK_NAMES, Sweep, benchmark_order, grade_rows

REFERENCE_ARMS = tuple(str(a) for a in range(1, 10))  # the 512-token study: Arms 1-9
STRATUM_EDGES = (7 / 27, 14 / 27, 21 / 27)  # R1 | R2 | R3 | R4 boundaries as shares of the reference set


def parse_checkpoints(spec: str) -> list[tuple[str, int | None]]:
    """"15,18" (every seed) or "15:101,17:42,18:7" -> [(arm, seed or None)]."""
    picks = []
    for part in (p.strip() for p in str(spec).split(",")):
        if not part:
            continue
        arm, sep, seed = part.partition(":")
        try:
            picks.append((arm, int(seed) if sep else None))
        except ValueError:
            raise ValueError(f"--checkpoints {spec!r}: {part!r} is not ARM or ARM:SEED") from None
    if not picks:
        raise ValueError(f"--checkpoints {spec!r}: name at least one ARM or ARM:SEED")
    return picks


def correctness_matrix(sweep: Sweep, picks, benchmark: str) -> pd.DataFrame:
    """Items (rows, the benchmark's order) x chosen checkpoints (columns "<arm label> seed <s>"): 0 / 1,
    on the items every chosen checkpoint read out. A pick the sweep lacks is a ValueError naming it."""
    columns = {}
    for ref, seed in picks:
        rows = sweep.candidates(ref)
        if len(rows) != 1:
            raise ValueError(f"arm {ref!r} names {len(rows)} rows of the sweep"
                             + (f" ({'; '.join(sweep.label(u) for u in rows)}): choose with --where" if rows else ""))
        g = grade_rows(sweep, rows[0], benchmark)
        seeds = [seed] if seed is not None else list(sweep.runs_of(rows[0])["seed"])
        for s in seeds:
            mine = g[g["seed"] == s]
            if not len(mine):
                raise ValueError(f"{sweep.label(rows[0])} seed {s} has no {benchmark} read-out")
            columns[f"{sweep.label(rows[0])} seed {s}"] = mine.set_index("item_id")["correct"].astype(float)
            order = mine.set_index("item_id")["index"]
    matrix = pd.DataFrame(columns).dropna()
    return matrix.loc[sorted(matrix.index, key=lambda i: order.get(i, 0))]


def checkpoint_union(sweep: Sweep, picks, benchmark: str) -> dict:
    matrix = correctness_matrix(sweep, picks, benchmark)
    union = int(matrix.max(axis=1).sum()) if len(matrix) else 0
    return {"benchmark": benchmark, "checkpoints": list(matrix.columns), "k": matrix.shape[1], "n_items": len(matrix),
            "union": union, "union_pct": 100 * union / len(matrix) if len(matrix) else float("nan"),
            "accuracy": {c: 100 * float(matrix[c].mean()) for c in matrix.columns}, "matrix": matrix}


def stratum_of(k: int, n: int) -> str:
    if k == 0:
        return "R0"
    share = k / n
    return f"R{1 + sum(share >= edge for edge in STRATUM_EDGES)}"


_COLUMNS = ("item_id", "seed", "correct")  # the grade rows' columns the strata read


def _by_item(rows: pd.DataFrame) -> tuple[list, dict]:
    """(seeds in order, {item_id: [0/1 per seed]}) of one arm's 0/1 `correct` rows: each (item, seed)'s
    first row, the items every seed answered. What `pivot_table(index="item_id", columns="seed",
    aggfunc="first").dropna()` gives, without a pivot per arm (the items' order is not needed: only
    counts and sums of whole numbers are taken of them)."""
    first: dict = {}
    for item, seed, correct in zip(rows["item_id"].tolist(), rows["seed"].tolist(), rows["correct"].tolist()):
        first.setdefault((item, seed), int(correct))
    seeds = sorted({seed for _, seed in first})
    items = dict.fromkeys(item for item, _ in first)
    return seeds, {i: [first[(i, s)] for s in seeds] for i in items if all((i, s) in first for s in seeds)}


def build_strata(sweep: Sweep, reference=REFERENCE_ARMS) -> Table:
    """Table `strata` with `reference` (paper arm numbers or arm names) as the reference set."""
    reference = tuple(str(r) for r in reference)
    named = "Arms 1-9" if reference == REFERENCE_ARMS else "arms " + ", ".join(reference)
    title = f"Item strata R0-R4 by the reference checkpoints ({named}) that answer an item, per out-of-sample arm (§5.6)"
    units = sweep.units()
    ref_units = [u for u in units if set(sweep.runs_of(u)[["paper_arm", "arm"]].iloc[0]) & set(reference)]
    others = [u for u in units if u not in ref_units]
    if not ref_units or not others:
        return Table.unbuilt("strata", title, f"the sweep needs runs of the reference {named} and of at least one other arm")
    rows = []
    for b in sweep.benchmarks():
        at = np.concatenate([sweep.positions("grades", unit=u, benchmark=b, phase="trained") for u in ref_units])
        ref = sweep.grades.iloc[at][["unit", *_COLUMNS]]  # the reference arms' rows, arm by arm
        ref = ref.assign(col=ref["unit"] + ":" + ref["seed"].astype(str)).reset_index(drop=True)
        if not len(ref):
            continue
        solved = ref.pivot_table(index="item_id", columns="col", values="correct", aggfunc="first").dropna()
        n_ref = solved.shape[1]
        stratum = pd.Series([stratum_of(int(k), n_ref) for k in solved.sum(axis=1)], index=solved.index)
        stratum_of_item = stratum.to_dict()  # looked up per item and arm below: a dict, not the Series
        names = sorted(stratum.unique())
        for u in others:
            g = grade_rows(sweep, u, b, columns=_COLUMNS)
            mine = g[g["item_id"].isin(stratum.index)]
            if not len(mine):
                continue
            by_seed = _by_item(mine) if mine["correct"].dtype == bool else None
            if by_seed is None:  # not the stored 0/1 column: pandas' pivot, as it always was
                by_item = mine.pivot_table(index="item_id", columns="seed", values="correct", aggfunc="first").dropna()
                seeds, complete = list(by_item.columns), by_item.astype(float)
            for name in names:
                if by_seed is not None:
                    seeds, values = by_seed
                    part = [v for i, v in values.items() if stratum_of_item[i] == name]
                    n_items, mean_correct = len(part), float(np.mean(np.sum(part, axis=0))) if part else 0.0
                    pass_k = sum(max(v) for v in part)
                else:
                    items = [i for i in complete.index if stratum_of_item[i] == name]
                    part = complete.loc[items] if items else complete.iloc[:0]
                    n_items = len(items)
                    mean_correct = float(part.sum(axis=0).mean()) if len(part) else 0.0
                    pass_k = int(part.max(axis=1).sum()) if len(part) else 0
                rows.append({"benchmark": b, "stratum": name, "label": sweep.label(u), "unit": u,
                             "reference": ",".join(reference), "n_reference": n_ref, "n_items": n_items,
                             "seeds": [int(s) for s in seeds], "mean_correct": mean_correct, "pass_k": int(pass_k)})
    if not rows:
        return Table.unbuilt("strata", title, "no benchmark was read out by both the reference and another arm")
    frame = pd.DataFrame(rows)
    frame = frame.assign(_b=frame["benchmark"].map(benchmark_order)).sort_values(["_b", "stratum"], kind="stable")
    frame = frame.drop(columns="_b").reset_index(drop=True)
    display = pd.DataFrame([{
        "Benchmark": BENCHMARK_NAMES.get(r["benchmark"], r["benchmark"]), "Stratum": r["stratum"],
        "Arm": r["label"], "Items": r["n_items"],
        "Mean correct over seeds / Pass@k": f"{num(r['mean_correct'], 2)} / {int(r['pass_k'])} of {r['n_items']}",
    } for _, r in frame.iterrows()])
    return Table("strata", title, frame, display,
                 notes=[f"reference: {int(frame['n_reference'].iloc[0])} checkpoints of {named}; strata by the share "
                        "k/N of them answering the item: R0 k = 0, R1 < 7/27, R2 < 14/27, R3 < 21/27, R4 the rest "
                        "(N = 27: R1 1-6, R2 7-13, R3 14-20, R4 21-27); --strata-reference chooses the set"])


def union_lines(result: dict) -> list[str]:
    name = BENCHMARK_NAMES.get(result["benchmark"], result["benchmark"])
    lines = [f"oracle union of {result['k']} checkpoints on {name}: {result['union']}/{result['n_items']} "
             f"({num(result['union_pct'], 2)}%) (= Pass@{result['k']} of the chosen checkpoints)"]
    lines += [f"  {c}: {num(a, 2)}%" for c, a in result["accuracy"].items()]
    return lines

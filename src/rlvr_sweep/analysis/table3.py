"""Table 3 (seed paper §5.4): the single-seed exploratory ablations, one row per run.

Runs whose paper label is an ablation name (`ablate_skip`, `ablate_selective`, `mst_act30`,
`mst_zpd_act35`, `ra_mst_tail50`, `stopped_tree_h1024`, or any other non-numeric label): steps,
active steps and all-ones steps, accuracy with counts on every benchmark, cap hits / IncTrunc on
the main benchmark, FLOP proxies and seconds.
"""

from __future__ import annotations

import pandas as pd

from rlvr_sweep.analysis.render import Table, num, tflops
from rlvr_sweep.analysis.source import BENCHMARK_NAMES, Sweep, is_paper_number
from rlvr_sweep.analysis.table1 import cap_benchmark, run_proxies


def build_table3(sweep: Sweep) -> Table:
    title = "Table 3: single-seed ablations (§5.4)"
    runs = sweep.runs
    abl = runs[[bool(pa) and not is_paper_number(pa) for pa in runs["paper_arm"]]] if len(runs) else runs
    if not len(abl):
        return Table.unbuilt("table3", title, "no ablation runs in the sweep (runs whose paper arm is a name such "
                             "as ablate_skip, ablate_selective, mst_act30, mst_zpd_act35, ra_mst_tail50, "
                             "stopped_tree_h1024)")
    benchmarks, cap_bench = sweep.benchmarks(), cap_benchmark(sweep)
    rows = []
    for _, run in abl.iterrows():
        keys = {k: run[k] for k in ("arm", "horizon", "seed", "run_hash")}
        steps = _of(sweep.steps, keys)
        grades = _of(sweep.grades, keys)
        grades = grades[grades["phase"] == "trained"] if len(grades) else grades
        row = {"label": run["label"], "unit": run["unit"], "seed": int(run["seed"]), "steps": len(steps),
               "active": int(steps["active"].sum()) if len(steps) else 0,
               "all_ones": int((steps["mean_reward"] == 1).sum()) if len(steps) else 0}
        for b in benchmarks:
            g = grades[grades["benchmark"] == b]
            if len(g):
                row.update({f"{b}.correct": int(g["correct"].sum()), f"{b}.n": len(g), f"{b}.acc": 100 * g["correct"].mean()})
        if cap_bench:
            g = grades[grades["benchmark"] == cap_bench]
            row.update({"allcap": int(g["capped"].sum()), "inctrunc": int(g["inc_trunc"].sum())} if len(g) else {})
        if pd.notna(run.get("params")) and "totals.gen_tokens" in run:
            p = run_proxies(run)
            row.update({"tflops.out": p["out"], "tflops.full": p["full"], "tflops.pad_full": p["pad_full"]})
        row["seconds"] = float(run.get("totals.seconds", float("nan")))
        rows.append(row)
    frame = pd.DataFrame(rows)
    return Table("table3", title, frame, _display(frame, benchmarks, cap_bench))


def _of(frame: pd.DataFrame, keys: dict) -> pd.DataFrame:
    if not len(frame):
        return frame
    mask = pd.Series(True, index=frame.index)
    for k, v in keys.items():
        mask &= frame[k] == v
    return frame[mask]


def _display(frame: pd.DataFrame, benchmarks: list[str], cap_bench: str | None) -> pd.DataFrame:
    out = []
    for _, r in frame.iterrows():
        d = {"Run": f"{r['label']} (seed {r['seed']})", "Steps / Active (all1)": f"{r['steps']} / {r['active']} ({r['all_ones']})"}
        for b in benchmarks:
            n = r.get(f"{b}.n")
            d[BENCHMARK_NAMES.get(b, b)] = (f"{num(r[f'{b}.acc'])} ({int(r[f'{b}.correct'])}/{int(n)})"
                                            if pd.notna(n) else "—")
        if cap_bench:
            d["AllCap / IncTrunc"] = (f"{int(r['allcap'])} / {int(r['inctrunc'])}" if pd.notna(r.get("allcap"))
                                      else "—")
        d["Out / Full / PadFull TFLOPs"] = " / ".join(tflops(r.get(f"tflops.{x}")) for x in ("out", "full", "pad_full"))
        d["Sec"] = num(r["seconds"], 1)
        out.append(d)
    return pd.DataFrame(out)

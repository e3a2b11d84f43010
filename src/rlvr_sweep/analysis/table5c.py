"""Table 5C: the online counterfactual fork-pair arms (14-19) beside their stopped-tree references
(12, 13) (seed paper §5.6 item 4).

Per arm: each benchmark's trained greedy accuracy, mean ± SD over seeds with the per-seed correct
counts, and the pool of every benchmark's items together (Pool950 in the paper: Val210 + Ext240 +
MATH-500); on the first benchmark (MATH-500 when present) the seeds' MDL-Maj@k and Oracle Pass@k
(`table4.summarize_votes`); active updates per seed; post-warmup divergent pairs over post-warmup
pairs with the winners split by branch (b0 = the on-policy / first leaf, b1 = the alternative /
second), counted as the paper counts (`Div`: pairs of post-warmup *active* steps, after rescue duplication,
over 4 x those steps: the paper's 180 / 192 / 224 / 124 for Arms 12-15; a duplicated (1, 0) pair is no
longer divergent, so Arms 15-19 show 0 b0 wins) and raw (`Div raw`: the sampled rewards' divergent pairs
over every post-warmup pair); "false activations", active steps whose four on-policy branches all passed (b0 = 4/4); and,
for the counterfactual arms, the steps their credit gated (rescue duplication removed the activation)
or skipped (pair-balanced, unrescued).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlvr_sweep.analysis.render import Table, mean_sd_text, num
from rlvr_sweep.analysis.source import BENCHMARK_NAMES, Sweep, grade_rows
from rlvr_sweep.analysis.stats import mean_sd
from rlvr_sweep.analysis.table1 import cap_benchmark
from rlvr_sweep.analysis.table4 import MDL_MIN_LEN, item_candidates, summarize_votes
from rlvr_sweep.config import scaled_length

ARMS = ("13", "12", "14", "15", "16", "17", "18", "19")  # the paper's row order
CF_ARMS = ARMS[2:]


def _accuracy(sweep: Sweep, unit: str, benchmarks: list[str]) -> dict:
    """{name: (mean %, sd, per-seed correct counts, items)} per benchmark and for their pool."""
    out, pooled = {}, {}
    for b in benchmarks:
        rows = grade_rows(sweep, unit, b)
        if not len(rows):
            continue
        by_seed = rows.groupby("seed")["correct"]
        counts, sizes = by_seed.sum(), by_seed.size()
        seeds = [s for s in sweep.runs_of(unit)["seed"] if s in counts.index]
        m, sd = mean_sd([100 * counts[s] / sizes[s] for s in seeds])
        out[b] = (m, sd, [int(counts[s]) for s in seeds], int(sizes[seeds[0]]))
        for s in seeds:
            c, n = pooled.get(s, (0, 0))
            pooled[s] = (c + int(counts[s]), n + int(sizes[s]))
    if len(out) > 1:
        m, sd = mean_sd([100 * c / n for c, n in pooled.values()])
        out["pool"] = (m, sd, [c for c, _ in pooled.values()], next(iter(pooled.values()))[1])
    return out


def _ledger(sweep: Sweep, unit: str) -> dict:
    """Active updates, divergent pairs and false activations from the unit's step and pair ledgers."""
    steps = sweep.steps[sweep.steps["unit"] == unit] if len(sweep.steps) else sweep.steps
    pairs = sweep.pairs[sweep.pairs["unit"] == unit] if len(sweep.pairs) else sweep.pairs
    if not len(steps) or not len(pairs):
        return {}
    post = pairs[pairs["category"] != "flat_warmup"]
    has = lambda c: c in post.columns and post[c].notna().all()  # noqa: E731  (fork arms' ledger columns)
    r0 = post["r0_raw"] if has("r0_raw") else post["r0"]
    r1 = post["r1_raw"] if has("r1_raw") else post["r1"]
    divergent = r0 != r1
    e0, e1 = (post["r0_eff"], post["r1_eff"]) if has("r0_eff") else (r0, r1)  # after rescue duplication
    # b0 pass per step: the on-policy leaves (first leaf of each pair) of tree / fork steps
    b0 = (r0 > 0).groupby([post["seed"], post["step"]]).sum()
    active_steps = steps.set_index(["seed", "step"])["active"].astype(bool)
    post_steps = b0.index.intersection(active_steps.index)
    false_act = int(((b0.loc[post_steps] == 4) & active_steps.loc[post_steps]).sum())
    seeds = list(sweep.runs_of(unit)["seed"])
    per_seed_false = [int(((b0.loc[post_steps] == 4) & active_steps.loc[post_steps]).xs(s, level=0).sum())
                      if s in post_steps.get_level_values(0) else 0 for s in seeds]
    in_active = pd.Series([bool(active_steps.get((sd, st), False)) for sd, st in zip(post["seed"], post["step"])],
                          index=post.index)
    div_eff = in_active & (e0 != e1)
    out = {"active_per_seed": [int(steps.loc[steps["seed"] == s, "active"].astype(bool).sum()) for s in seeds],
           "divergent": int(div_eff.sum()), "active_post_pairs": int(in_active.sum()),
           "b0_wins": int((div_eff & (e0 > e1)).sum()), "b1_wins": int((div_eff & (e1 > e0)).sum()),
           "raw_divergent": int(divergent.sum()), "post_pairs": len(post),
           "raw_b0_wins": int((divergent & (r0 > r1)).sum()), "raw_b1_wins": int((divergent & (r1 > r0)).sum()),
           "false_act": false_act, "false_act_per_seed": per_seed_false}
    if "cf_status" in steps.columns and steps["cf_status"].notna().any():
        out.update(gated=int((steps["cf_status"] == "gated_rescue_dup").sum()),
                   skipped=int((steps["cf_status"] == "skipped_pb_unrescued").sum()))
    return out


def build_table5c(sweep: Sweep, n_resamples: int = 4000, seed: int = 0) -> Table:
    title = "Table 5C: online counterfactual fork-pair GRPO (Arms 14-19) vs stopped-tree Arms 12-13 (§5.6 item 4)"
    units = [u for u in sweep.units() if sweep.runs_of(u)["paper_arm"].iloc[0] in ARMS]
    if not any(sweep.runs_of(u)["paper_arm"].iloc[0] in CF_ARMS for u in units):
        return Table.unbuilt("table5c", title, "no counterfactual fork-pair arm (14-19) in the sweep")
    units.sort(key=lambda u: ARMS.index(sweep.runs_of(u)["paper_arm"].iloc[0]))
    benchmarks = sweep.benchmarks()
    vote_bench = cap_benchmark(sweep)
    rows = []
    for unit in units:
        runs = sweep.runs_of(unit)
        row = {"label": sweep.label(unit), "unit": unit, "paper_arm": runs["paper_arm"].iloc[0],
               "seeds": list(runs["seed"])}
        for name, (m, sd, counts, n) in _accuracy(sweep, unit, benchmarks).items():
            row.update({f"{name}.mean": m, f"{name}.sd": sd, f"{name}.counts": counts, f"{name}.n": n})
        g = grade_rows(sweep, unit, vote_bench) if vote_bench else pd.DataFrame()
        seeds = [s for s in runs["seed"] if len(g) and s in set(g["seed"])]
        if len(seeds) >= 2 and runs["eval_max_new_tokens"].notna().all():
            cap = int(runs["eval_max_new_tokens"].min())
            min_len = scaled_length(MDL_MIN_LEN, float(runs["length_scale"].iloc[0]))
            votes = summarize_votes(item_candidates(g, seeds), cap, min_len, n_resamples, seed)
            row.update({"mdl": votes["mdl"], "pass_k": votes["oracle"], "k": votes["k"],
                        "pass_k_count": round(votes["oracle"] * votes["n_items"] / 100)})
        row.update(_ledger(sweep, unit))
        rows.append(row)
    frame = pd.DataFrame(rows)
    names = [b for b in benchmarks if f"{b}.mean" in frame.columns] + (["pool"] if "pool.mean" in frame.columns else [])
    return Table("table5c", title, frame, _display(frame, names, vote_bench),
                 notes=["b0 / b1: the pair's first leaf (on-policy branch) / second leaf (alternative) won; "
                        "Div: divergent pairs of post-warmup active steps after rescue duplication / 4 x those steps "
                        "(the paper's count); Div raw: divergent sampled pairs / every post-warmup pair; "
                        "False Act: active steps whose four first leaves all passed",
                        f"MDL-Maj@k and Pass@k across the arm's seeds on {BENCHMARK_NAMES.get(vote_bench, vote_bench)}"])


def _display(frame: pd.DataFrame, names: list[str], vote_bench: str | None) -> pd.DataFrame:
    out = []
    for _, r in frame.iterrows():
        line = {"Arm (seeds)": f"{r['label']} ({'/'.join(str(s) for s in r['seeds'])})"}
        for name in names:
            head = "Pool" if name == "pool" else BENCHMARK_NAMES.get(name, name)
            if isinstance(r.get(f"{name}.counts"), list):
                counts = r[f"{name}.counts"]
                text = mean_sd_text(r[f"{name}.mean"], r[f"{name}.sd"], [100 * c / r[f"{name}.n"] for c in counts])
                line[f"{head} (N={r[f'{name}.n']})"] = f"{text.split(' (')[0]} ({'/'.join(map(str, counts))})"
        bench = BENCHMARK_NAMES.get(vote_bench, vote_bench)
        line[f"{bench} MDL / Pass@k"] = (f"{num(r.get('mdl'), 1)} / {num(r.get('pass_k'), 1)} ({int(r['pass_k_count'])})"
                                         if pd.notna(r.get("mdl", np.nan)) else "—")
        active = r.get("active_per_seed")
        line["Act"] = num(float(np.mean(active)), 2) if isinstance(active, list) else "—"
        if pd.notna(r.get("divergent", np.nan)):
            line["Div (b0 / b1)"] = (f"{int(r['divergent'])}/{int(r['active_post_pairs'])} "
                                     f"({int(r['b0_wins'])} / {int(r['b1_wins'])})")
            line["Div raw (b0 / b1)"] = (f"{int(r['raw_divergent'])}/{int(r['post_pairs'])} "
                                         f"({int(r['raw_b0_wins'])} / {int(r['raw_b1_wins'])})")
            gated = f" ({int(r['gated'])} gated)" if pd.notna(r.get("gated", np.nan)) else ""
            per = "/".join(map(str, r["false_act_per_seed"]))
            line["b0=4/4 False Act"] = f"{int(r['false_act'])} ({per}){gated}"
        out.append(line)
    return pd.DataFrame(out)

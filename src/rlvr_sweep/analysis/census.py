"""Table 2A (seed paper §4.4): a descriptive census of cap-associated active steps and reward-divergent
tree pairs, per arm over its seeds, from the step, rollout and pair ledgers.

Cap = the run's rollout horizon in tokens (run.json `horizon_tokens`: 512 / 1024, scaled in smoke).
- Active steps: steps whose rewards are not all equal.
- CapAssocActive: active steps whose every R = 0 rollout has L = Cap.
- CapR0: R = 0 rollouts with L = Cap / all R = 0 rollouts, in active steps.
- Divergent pairs: post-warmup tree pairs (not `flat` / `flat_warmup`) with R_k1 != R_k2; Shared: those
  with pl0 > 0 and pl1 > 0 (they receive beta (M_k - Vhat_k)); CapR0Div: the R = 0 leaf has L = Cap;
  NonCapR0Div: it has L < Cap; Both < Cap: both leaves shorter than Cap (also per run).
Flat arms have no divergent-pair columns ("— (flat)"). R is the training reward (gated where gated).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlvr_sweep.analysis.render import Table, num
from rlvr_sweep.analysis.source import Sweep

FLAT_CATEGORIES = ("flat", "flat_warmup")


def build_table2a(sweep: Sweep) -> Table:
    title = "Table 2A: census of cap-associated active steps and reward-divergent pairs (§4.4)"
    per_run = census_by_run(sweep.steps, sweep.rollouts, sweep.pairs, sweep.runs)
    # an arm's numbers are its runs' sums (whole numbers: the same in any order), all arms in one grouping
    runs = sweep.runs
    unit_of = runs.drop_duplicates("run_hash").set_index("run_hash")["unit"] if len(runs) else pd.Series(dtype=str)
    per_unit = per_run.groupby(unit_of.reindex(per_run.index).to_numpy(), sort=False).sum()
    units = [u for u in sweep.units() if u in per_unit.index and per_unit.at[u, "steps"]]
    if not units:
        return Table.unbuilt("table2a", title, "no run has a steps ledger")
    caps = runs.groupby("unit", sort=False)["horizon_tokens"].unique()
    n_runs = runs.groupby("unit", sort=False).size()
    rows = []
    for u in units:
        cap = sorted(caps[u])
        rows.append({"label": sweep.label(u), "unit": u, "cap": int(cap[0]) if len(cap) == 1 else -1,
                     **_unit_counts(per_unit.loc[u], int(n_runs[u]))})
    frame = pd.DataFrame(rows)
    return Table("table2a", title, frame, _display(frame))


_RUN_COUNTS = ("steps", "active_steps", "cap_assoc_active", "capr0_leaves", "r0_leaves", "tree_pairs", "divergent",
               "shared", "capr0_div", "noncapr0_div", "both_lt_cap")


def census_by_run(steps: pd.DataFrame, rollouts: pd.DataFrame, pairs: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The census numbers per run (indexed by run_hash; see the module docstring), from one pass over the
    sweep's ledgers: an arm's numbers are its runs' sums (`_unit_counts`)."""
    out = pd.DataFrame(0, index=pd.Index(runs["run_hash"].unique(), name="run_hash"), columns=list(_RUN_COUNTS))
    if not len(steps):
        return out
    cap = runs.drop_duplicates("run_hash").set_index("run_hash")["horizon_tokens"]
    add = lambda column, counts: out.__setitem__(column, counts.reindex(out.index, fill_value=0).astype(int))  # noqa: E731
    add("steps", steps.groupby("run_hash").size())
    active = steps.loc[steps["active"].astype(bool), ["run_hash", "step"]]
    add("active_steps", active.groupby("run_hash").size())
    if len(rollouts):
        ro = rollouts[["run_hash", "step", "reward", "length"]]
        ro = ro[pd.MultiIndex.from_frame(ro[["run_hash", "step"]]).isin(pd.MultiIndex.from_frame(active))]
        r0 = ro[(ro["reward"] == 0) & ro["run_hash"].isin(cap.index)]
        capped = r0["length"].to_numpy() == cap.reindex(r0["run_hash"].to_numpy()).to_numpy()
        flags = pd.DataFrame({"run_hash": r0["run_hash"].to_numpy(), "step": r0["step"].to_numpy(), "capped": capped})
        add("r0_leaves", flags.groupby("run_hash").size())
        add("capr0_leaves", flags.groupby("run_hash")["capped"].sum())
        per_step = flags.groupby(["run_hash", "step"])["capped"].all()  # every R = 0 leaf of the step at the cap
        add("cap_assoc_active", per_step.groupby(level="run_hash").sum())
    if len(pairs):
        tree = pairs[~pairs["category"].isin(FLAT_CATEGORIES) & pairs["run_hash"].isin(cap.index)]
        add("tree_pairs", tree.groupby("run_hash").size())
        div = tree[tree["r0"] != tree["r1"]]
        by = div["run_hash"].to_numpy()
        c = cap.reindex(by).to_numpy()  # each pair's cap
        l0, l1, r0_, pl0, pl1 = (div[k].to_numpy() for k in ("l0", "l1", "r0", "pl0", "pl1"))
        l_r0 = np.where(r0_ == 0, l0, l1)  # the length of the leaf that failed
        count = lambda flags: pd.Series(flags, dtype=bool).groupby(by).sum()  # noqa: E731
        add("divergent", div.groupby("run_hash").size())
        add("shared", count((pl0 > 0) & (pl1 > 0)))
        add("capr0_div", count(l_r0 == c))
        add("noncapr0_div", count(l_r0 < c))
        add("both_lt_cap", count((l0 < c) & (l1 < c)))
    return out


def _unit_counts(sums: pd.Series, n_runs: int) -> dict:
    """An arm's census row from the sums of its runs' rows of `census_by_run`."""
    total = {k: int(v) for k, v in sums.items()}
    out = {"n_runs": n_runs, "steps": total["steps"], "active_steps": total["active_steps"],
           "cap_assoc_active": total["cap_assoc_active"], "capr0_leaves": total["capr0_leaves"],
           "r0_leaves": total["r0_leaves"]}
    if not total["tree_pairs"]:
        return out  # a flat arm: no divergent-pair census
    out.update({k: total[k] for k in ("divergent", "shared", "capr0_div", "noncapr0_div", "both_lt_cap")})
    out["both_lt_cap_per_run"] = float(total["both_lt_cap"]) / n_runs
    return out


def _ratio(a, b) -> str:
    return f"{int(a)} / {int(b)} ({num(100 * a / b, 1)}%)" if b else f"{int(a)} / 0"


def _display(frame: pd.DataFrame) -> pd.DataFrame:
    out = []
    for _, r in frame.iterrows():
        runs = f"{int(r['n_runs'])} run{'s' if r['n_runs'] != 1 else ''}"
        d = {"Arm (runs, steps)": f"{r['label']} ({runs}, {int(r['steps'])} steps)",
             "Cap": int(r["cap"]), "Active steps": int(r["active_steps"]),
             "CapAssocActive": _ratio(r["cap_assoc_active"], r["active_steps"]),
             "CapR0 / all R=0 (active)": _ratio(r["capr0_leaves"], r["r0_leaves"])}
        if "divergent" in r and pd.notna(r.get("divergent")):
            d["Divergent (Shared)"] = f"{int(r['divergent'])} ({int(r['shared'])})"
            d["CapR0Div"] = _ratio(r["capr0_div"], r["divergent"])
            d["NonCapR0Div (Both < Cap; per run)"] = (f"{int(r['noncapr0_div'])} ({int(r['both_lt_cap'])}; "
                                                      f"{num(r['both_lt_cap_per_run'], 1)}/run)")
        else:
            d["Divergent (Shared)"], d["CapR0Div"], d["NonCapR0Div (Both < Cap; per run)"] = "— (flat)", "—", "—"
        out.append(d)
    return pd.DataFrame(out)

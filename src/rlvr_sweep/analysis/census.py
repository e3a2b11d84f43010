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

import pandas as pd

from rlvr_sweep.analysis.render import Table, num
from rlvr_sweep.analysis.source import Sweep
from rlvr_sweep.store import RUN_KEYS

FLAT_CATEGORIES = ("flat", "flat_warmup")


def _with_cap(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    return frame.merge(runs[[*RUN_KEYS, "horizon_tokens"]], on=list(RUN_KEYS), how="inner")


def census_counts(steps: pd.DataFrame, rollouts: pd.DataFrame, pairs: pd.DataFrame, runs: pd.DataFrame) -> dict:
    """The census numbers of one arm's runs (all frames already restricted to those runs)."""
    step_keys = [*RUN_KEYS, "step"]
    active = steps.loc[steps["active"].astype(bool), step_keys]
    leaves = _with_cap(rollouts.merge(active, on=step_keys, how="inner"), runs)
    r0 = leaves[leaves["reward"] == 0]
    capped = r0["length"] == r0["horizon_tokens"]
    per_step = capped.groupby([r0[k] for k in step_keys]).all()  # every R = 0 leaf of the step at the cap
    out = {"n_runs": len(runs), "steps": len(steps), "active_steps": len(active),
           "cap_assoc_active": int(per_step.sum()), "capr0_leaves": int(capped.sum()), "r0_leaves": len(r0)}
    tree = pairs[~pairs["category"].isin(FLAT_CATEGORIES)] if len(pairs) else pairs
    if not len(tree):
        return out  # a flat arm: no divergent-pair census
    tree = _with_cap(tree, runs)
    div = tree[tree["r0"] != tree["r1"]]
    l_r0 = div["l0"].where(div["r0"] == 0, div["l1"])  # the length of the leaf that failed
    both = (div["l0"] < div["horizon_tokens"]) & (div["l1"] < div["horizon_tokens"])
    out.update({"divergent": len(div), "shared": int(((div["pl0"] > 0) & (div["pl1"] > 0)).sum()),
                "capr0_div": int((l_r0 == div["horizon_tokens"]).sum()),
                "noncapr0_div": int((l_r0 < div["horizon_tokens"]).sum()), "both_lt_cap": int(both.sum()),
                "both_lt_cap_per_run": float(both.sum()) / len(runs)})
    return out


def build_table2a(sweep: Sweep) -> Table:
    title = "Table 2A: census of cap-associated active steps and reward-divergent pairs (§4.4)"
    units = [u for u in sweep.units() if len(sweep.steps[sweep.steps["unit"] == u])]
    if not units:
        return Table.unbuilt("table2a", title, "no run has a steps ledger")
    rows = []
    for u in units:
        runs = sweep.runs_of(u)
        pick = lambda f: f[f["unit"] == u]  # noqa: E731
        caps = sorted(runs["horizon_tokens"].unique())
        rows.append({"label": sweep.label(u), "unit": u, "cap": int(caps[0]) if len(caps) == 1 else -1,
                     **census_counts(pick(sweep.steps), pick(sweep.rollouts), pick(sweep.pairs), runs)})
    frame = pd.DataFrame(rows)
    return Table("table2a", title, frame, _display(frame))


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

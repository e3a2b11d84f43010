"""PASS 4, counterfactual arms: replay every stored fork group's credit from its ledger (paper §7).

For each step of a `cf_fork` run the pair ledger holds what the credit was computed from (raw rewards,
fork position t*, leaf lengths, whether the pair forked) and what it gave (effective rewards, rescue
duplication, A_pref, A_cont per branch); the step ledger holds the variant, hinge weight, status
(active / homogeneous / gated / skipped), b0_pass and the signed token mass M_tot. `replay_cf`
recomputes `credit.cf_credit` from the inputs alone and compares every stored output.
"""

from __future__ import annotations

import math

import pandas as pd

from rlvr_sweep.credit import cf_credit

TOLERANCE = 1e-5  # float32 coefficients stored as float64


def _close(a, b) -> bool:
    return math.isclose(float(a), float(b), rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def replay_step(step_row: dict, pair_rows: pd.DataFrame) -> list[str]:
    """Problems with one stored fork step (empty when the replay reproduces it)."""
    where = f"{step_row['run_dir']} step {step_row['step']}"
    pairs = pair_rows.sort_values("k")
    cf = cf_credit(pairs[["r0_raw", "r1_raw"]].to_numpy(copy=True), pairs["t_star"].astype(int).to_numpy(copy=True),
                   pairs[["l0", "l1"]].astype(int).to_numpy(copy=True), variant=step_row["cf_variant"],
                   hinge_weight=float(step_row["hinge_weight"]),
                   forked=(pairs["category"] != "cf_no_fork").to_numpy(copy=True))
    problems = []
    m = cf.metrics
    for key, stored in (("status", step_row["cf_status"]), ("b0_pass", step_row["b0_pass"])):
        if m[key] != stored:
            problems.append(f"{where}: {key} replays as {m[key]!r}, stored {stored!r}")
    if not _close(m["m_tot"], step_row["m_tot"]):
        problems.append(f"{where}: M_tot replays as {m['m_tot']:.6f}, stored {step_row['m_tot']:.6f}")
    for (_, pair), pre, cont, dup in zip(pairs.iterrows(), cf.prefix.tolist(), cf.cont.tolist(), cf.dup.tolist()):
        stored = (pair["a_pref"], pair["a_cont0"], pair["a_cont1"])
        if bool(pair["rescue_dup"]) != dup or not all(_close(a, b) for a, b in zip((pre[0], *cont), stored)):
            problems.append(f"{where} pair {pair['k']}: coefficients replay as A_pref {pre[0]:.4f}, A_cont "
                            f"({cont[0]:.4f}, {cont[1]:.4f}), dup {dup}; stored {tuple(round(float(x), 4) for x in stored)}, "
                            f"dup {bool(pair['rescue_dup'])}")
    return problems


def replay_cf(steps: pd.DataFrame, pairs: pd.DataFrame, runs: pd.DataFrame) -> dict:
    """{"steps": fork steps replayed, "active": active groups among them, "problems": [...]} over a sweep's
    collated tables (`steps` and `pairs` carry the run keys; `runs` maps them to run folders)."""
    keys = ["arm", "horizon", "seed", "run_hash"]
    if not len(steps) or "cf_status" not in steps.columns or "t_star" not in pairs.columns:
        return {"steps": 0, "active": 0, "problems": []}
    fork_steps = steps[steps["cf_status"].notna()].merge(runs[[*keys, "run_dir"]], on=keys, how="left")
    grouped = dict(iter(pairs[pairs["t_star"].notna()].groupby([*keys, "step"]))) if len(pairs) else {}
    problems, active = [], 0
    for _, row in fork_steps.iterrows():
        found = grouped.get(tuple(row[k] for k in [*keys, "step"]))
        if found is None:
            problems.append(f"{row['run_dir']} step {row['step']}: no fork pairs in the pair ledger")
            continue
        problems += replay_step(row.to_dict(), found)
        active += bool(row["cf_active"])
    return {"steps": len(fork_steps), "active": active, "problems": problems}

"""PASS 4, counterfactual arms: replay every stored fork group's credit from its ledger (paper §7).

For each step of a `cf_fork` run the pair ledger holds what the credit was computed from (raw rewards,
fork position t*, leaf lengths, whether the pair forked) and what it gave (effective rewards, rescue
duplication, A_pref, A_cont per branch); the step ledger holds the variant, hinge weight, status
(active / homogeneous / gated / skipped), b0_pass and the signed token mass M_tot. `replay_cf`
recomputes `credit.cf_credit` from the inputs alone and compares every stored output.

`fork_choice_problems` re-derives each pair's online fork choice (paper §5.6 item 4) from the margins
the pair ledger stored for every position of its fork window, with the rule written out again here
(not the sampler's function): the first position whose margin is <= the run's `sampler.fork_threshold`
(`cf_first_gap`), else the smallest finite margin, first on ties (`cf_min_margin`), else no fork; the
stored margin at t* and the window's minimum must be those margins, and the alternative token the
best-ranked id other than the root's own (`top1` unless the root sampled it, then `top2`).
"""

from __future__ import annotations

import math

import pandas as pd


TOLERANCE = 1e-5  # float32 coefficients stored as float64


def _close(a, b) -> bool:
    return math.isclose(float(a), float(b), rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def replay_step(step_row: dict, pair_rows: pd.DataFrame, estimator=None) -> list[str]:
    """Problems with one stored fork step (empty when the replay reproduces it). `estimator`: the run's own
    (a plugin's, bound as the run bound it: `credit.BoundEstimator`) called on the rewards and group shape it was given; None: the
    built-in counterfactual credit of the stored variant."""
    from rlvr_sweep.credit import GroupShape, cf_credit  # torch: imported only by a sweep with fork steps to replay

    where = f"{step_row['run_dir']} step {step_row['step']}"
    pairs = pair_rows.sort_values("k")
    if estimator is not None:
        import torch

        shape = GroupShape(torch.tensor(pairs["tau"].astype(int).to_numpy(copy=True)),
                           torch.tensor(pairs[["pl0", "pl1"]].astype(int).to_numpy(copy=True)),
                           torch.tensor(pairs[["l0", "l1"]].astype(int).to_numpy(copy=True)),
                           torch.tensor((pairs["category"] != "cf_no_fork").to_numpy(copy=True)))
        try:
            cf = estimator.group(torch.tensor(pairs[["r0", "r1"]].astype(float).to_numpy(copy=True),
                                              dtype=torch.float32), shape).cf
        except (TypeError, ValueError) as err:  # the plugin's estimator refuses its own group: named, no traceback
            return [f"{where}: the run's estimator fails on replay ({err})"]
        if cf is None:
            return [f"{where}: the run's estimator gives this fork group no counterfactual credit on replay"]
    else:
        cf = cf_credit(pairs[["r0_raw", "r1_raw"]].to_numpy(copy=True), pairs["t_star"].astype(int).to_numpy(copy=True),
                       pairs[["l0", "l1"]].astype(int).to_numpy(copy=True), variant=step_row["cf_variant"],
                       hinge_weight=float(step_row["hinge_weight"]),
                       forked=(pairs["category"] != "cf_no_fork").to_numpy(copy=True),
                       pb_loser=step_row.get("cf_pb_loser") if isinstance(step_row.get("cf_pb_loser"), str) else "balanced")
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


def _expected_fork(window: list[float], start: int, threshold: float) -> tuple[int | None, str]:
    for offset, margin in enumerate(window):
        if margin <= threshold:  # NaN compares False: no second-best token never qualifies
            return start + offset, "cf_first_gap"
    finite = [(margin, offset) for offset, margin in enumerate(window) if math.isfinite(margin)]
    if finite:
        return start + min(finite)[1], "cf_min_margin"
    return None, "cf_no_fork"


def _same_float(a, b) -> bool:
    a, b = float(a), float(b)
    return (math.isnan(a) and math.isnan(b)) or a == b


def fork_choice_problems(pairs: pd.DataFrame, runs: pd.DataFrame) -> tuple[int, list[str]]:
    """(fork pairs checked, problems): every stored fork choice against its re-derivation."""
    if not len(pairs) or "window_margins" not in pairs.columns:
        return 0, []
    keys = ["arm", "horizon", "seed", "run_hash"]
    threshold = {tuple(r[k] for k in keys): float(r["config"].get("sampler.fork_threshold", math.nan))
                 for _, r in runs.iterrows()} if "config" in runs.columns else {}
    checked, problems = 0, []
    for _, pair in pairs[pairs["t_star"].notna()].iterrows():
        window = [float(m) for m in pair["window_margins"]] if pair["window_margins"] is not None else []
        where = f"{pair['arm']} seed {pair['seed']} step {pair['step']} pair {pair['k']}"
        limit = threshold.get(tuple(pair[k] for k in keys), math.nan)
        checked += 1
        if math.isnan(limit):
            problems.append(f"{where}: the run's config gives no sampler.fork_threshold: the fork choice cannot be "
                            "re-derived")
            continue
        t_star, category = _expected_fork(window, int(pair["window_start"]), limit)
        if category != pair["category"] or (t_star is not None and t_star != int(pair["t_star"])):
            problems.append(f"{where}: the stored margins give {category} at t*={t_star}, the ledger says "
                            f"{pair['category']} at t*={int(pair['t_star'])}")
            continue
        finite = [m for m in window if math.isfinite(m)]
        if not _same_float(pair["min_margin"], min(finite) if finite else math.nan):
            problems.append(f"{where}: min_margin {pair['min_margin']} is not the window's minimum")
        if category == "cf_no_fork":
            if not pair["v0"] == pair["v1"] == -1:
                problems.append(f"{where}: a pair without a fork has fork tokens ({pair['v0']}, {pair['v1']})")
            continue
        if not _same_float(pair["fork_margin"], window[t_star - int(pair["window_start"])]):
            problems.append(f"{where}: fork_margin {pair['fork_margin']} is not the stored margin at t*={t_star}")
        best_other = pair["top1"] if pair["v0"] != pair["top1"] else pair["top2"]
        if pair["v1"] != best_other or pair["v1"] == pair["v0"]:
            problems.append(f"{where}: alternative token {pair['v1']} is not the best-ranked other than v0={pair['v0']} "
                            f"(top-2 ids {pair['top1']}, {pair['top2']})")
    return checked, problems


def replay_cf(steps: pd.DataFrame, pairs: pd.DataFrame, runs: pd.DataFrame, plugin_estimator=None) -> dict:
    """{"steps": fork steps replayed, "active": active groups among them, "problems": [...], "unchecked":
    [...]} over a sweep's collated tables (`steps` and `pairs` carry the run keys; `runs` maps them to run
    folders). A run whose estimator a plugin registered is replayed with that estimator when
    `plugin_estimator(run_dir) -> (estimator, None) | (None, why)` gives it (`verify --plugins`), else its
    fork steps are listed as not replayed: the built-in rule is not its rule."""
    keys = ["arm", "horizon", "seed", "run_hash"]
    if not len(steps) or "cf_status" not in steps.columns or "t_star" not in pairs.columns:
        return {"steps": 0, "active": 0, "forks": 0, "problems": [], "unchecked": []}
    from rlvr_sweep.credit import ESTIMATORS

    built_in = {o.name for o in ESTIMATORS.options() if o.built_in}
    estimator_of = {r["run_dir"]: (r["config"] or {}).get("estimator.name") if isinstance(r.get("config"), dict) else None
                    for _, r in runs.iterrows()} if "config" in runs.columns else {}
    fork_steps = steps[steps["cf_status"].notna()].merge(runs[[*keys, "run_dir"]], on=keys, how="left")
    grouped = dict(iter(pairs[pairs["t_star"].notna()].groupby([*keys, "step"]))) if len(pairs) else {}
    problems, active, replayed, skipped, own = [], 0, 0, {}, {}
    for _, row in fork_steps.iterrows():
        name = estimator_of.get(row["run_dir"])
        estimator = None
        if name is not None and name not in built_in:
            if row["run_dir"] not in own:
                own[row["run_dir"]] = plugin_estimator(row["run_dir"]) if plugin_estimator else \
                    (None, "the run's plugin code is not imported (rerun with --plugins)")
            estimator, why = own[row["run_dir"]]
            if estimator is None:
                skipped.setdefault((row["run_dir"], name, why), 0)
                skipped[(row["run_dir"], name, why)] += 1
                continue
        found = grouped.get(tuple(row[k] for k in [*keys, "step"]))
        if found is None:
            problems.append(f"{row['run_dir']} step {row['step']}: no fork pairs in the pair ledger")
            continue
        problems += replay_step(row.to_dict(), found, estimator)
        active += bool(row["cf_active"])
        replayed += 1
    forks, more = fork_choice_problems(pairs, runs)
    unchecked = [f"{run_dir}: {n} fork groups credited by plugin estimator {name!r} were not replayed, {why}"
                 for (run_dir, name, why), n in skipped.items()]
    return {"steps": replayed, "active": active, "forks": forks, "problems": problems + more, "unchecked": unchecked}

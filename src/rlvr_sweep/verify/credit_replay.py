"""PASS 4, credit: every stored advantage re-derived from the stored rewards with the run's own estimator.

Each rollout row holds the credit the run gave it (`adv_prefix` on its prefix tokens, `adv_cont` on the rest,
`run.train.rollout_rows`); the pair ledger holds each group's shape (every pair's shared prefix, each leaf's
prefix and length, whether it forked). `replay_credit` binds the run's estimator from its config.yaml as the run
bound it and calls it on each group's stored rewards and shape, as the run did: a leaf or tree estimator per
group, a batch estimator per update (the groups of the steps up to and including the one that made it, less
those dynamic sampling filtered out, which it never saw and which keep no credit). A fork group's credit is
`cf_replay`'s (its own ledger of coefficients); the flat warmup groups of a fork arm are replayed here. A run
whose estimator a plugin registered is replayed with that estimator when `verify --plugins` imports it, and
is listed as not re-derived otherwise; runs made before the rollout rows held their credit are counted apart
(their other checks are as before).
"""

from __future__ import annotations

import math

import pandas as pd

from rlvr_sweep.config.categories import CF_CATEGORIES

TOLERANCE = 1e-6  # the same float32 computation replayed: equal but for a last-bit reordering
KEYS = ["arm", "horizon", "seed", "run_hash"]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def _shape(pairs: pd.DataFrame):
    """The `credit.GroupShape` of one step's pairs (k order)."""
    import torch

    from rlvr_sweep.credit import GroupShape

    p = pairs.sort_values("k")
    fork = p["category"].isin(CF_CATEGORIES)
    return GroupShape(torch.tensor(p["tau"].astype(int).to_numpy(copy=True)),
                      torch.tensor(p[["pl0", "pl1"]].astype(int).to_numpy(copy=True)),
                      torch.tensor(p[["l0", "l1"]].astype(int).to_numpy(copy=True)),
                      torch.tensor((p["category"] != "cf_no_fork").to_numpy(copy=True)) if fork.all() else None)


def bound_estimator(run_dir, config: dict, plugin_estimator=None):
    """(the run's `credit.BoundEstimator`, None), bound from its config.yaml as the run bound it, or (None, why)."""
    from rlvr_sweep.credit import ESTIMATORS
    from rlvr_sweep.verify.plugin_runs import bound_estimator as bound

    group = config.get("estimator") if isinstance(config, dict) else None
    if not isinstance(group, dict) or not isinstance(group.get("name"), str):
        return None, "its config.yaml names no estimator (missing or unreadable): its credit was not re-derived"
    name = group["name"]
    if name not in ESTIMATORS:
        if plugin_estimator is None:
            return None, (f"its credit comes from plugin estimator {name!r} and was not re-derived (the run's "
                          "plugin code is not imported: rerun with --plugins)")
        return plugin_estimator(run_dir)
    option = ESTIMATORS[name]
    if not option.built_in and plugin_estimator is not None:  # imported earlier in this process: still its own code
        return plugin_estimator(run_dir)
    if not option.built_in:
        return None, (f"its credit comes from plugin estimator {name!r} and was not re-derived (rerun with "
                      "--plugins)")
    return bound(option, group), None


def _updates(steps: pd.DataFrame) -> list[list[int]]:
    """The steps of each update of a batch-credited run, in order: those since the last update up to and including
    the one that made it, less filtered ones; the questions after the last update were never credited."""
    out, current = [], []
    for step, action in zip(steps["step"], steps["action"]):
        if action == "filtered":
            continue
        current.append(int(step))
        if action != "accumulated":
            out.append(current)
            current = []
    return out


def replay_run(run_dir, config: dict, steps: pd.DataFrame, rollouts: pd.DataFrame, pairs: pd.DataFrame,
               plugin_estimator=None) -> tuple[int, list[str], list[str]]:
    """(groups re-derived, problems, unchecked) of one run."""
    import torch

    if "adv_cont" not in rollouts.columns:
        return 0, [], []  # a run made before the rollout rows held their credit: `replay_credit` counts it
    estimator, why = bound_estimator(run_dir, config, plugin_estimator)
    if estimator is None:
        return 0, [], [f"{run_dir}: {why}"]
    by_step = {int(s): g.sort_values("index") for s, g in rollouts.groupby("step")}
    pairs_of = {int(s): g for s, g in pairs.groupby("step")}
    steps = steps.sort_values("step")
    fork_steps = set(steps.loc[steps["cf_status"].notna(), "step"].astype(int)) if "cf_status" in steps.columns else set()
    problems, replayed = [], 0

    def rewards_of(step: int) -> torch.Tensor:
        """The rewards the step's credit saw: less each rollout's KL penalty where the run took one."""
        k, rows = len(pairs_of[step]), by_step[step]
        r = torch.tensor(rows["reward"].astype(float).to_numpy(copy=True), dtype=torch.float32)
        if "kl_penalty" in rows.columns and rows["kl_penalty"].notna().all():
            r = r - torch.tensor(rows["kl_penalty"].astype(float).to_numpy(copy=True), dtype=torch.float32)
        return r.view(k, -1)

    def compare(step: int, prefix, cont) -> None:
        rows = by_step[step]
        for i, (p, c, sp, sc) in enumerate(zip(prefix, cont, rows["adv_prefix"], rows["adv_cont"])):
            if not (_close(float(p), float(sp)) and _close(float(c), float(sc))):
                problems.append(f"{run_dir} step {step} rollout {i}: stored credit ({float(sp):.6g}, {float(sc):.6g}) "
                                f"re-derives as ({float(p):.6g}, {float(c):.6g})")

    missing = [s for s in steps["step"].astype(int) if s not in by_step or s not in pairs_of]
    if missing:
        return 0, [f"{run_dir}: steps {missing[:5]} have no rollout or pair rows to re-derive their credit from"], []
    if estimator.per_update:
        credited = set()
        for update in _updates(steps):
            rewards, shapes = [rewards_of(s) for s in update], [_shape(pairs_of[s]) for s in update]
            try:
                given = estimator.update(rewards, shapes, [estimator.group(r, sh) for r, sh in zip(rewards, shapes)])
            except (TypeError, ValueError) as err:  # e.g. a missing reward: no finite credit re-derives
                problems.append(f"{run_dir} steps {update}: their credit does not re-derive from their rewards ({err})")
                credited.update(update)
                continue
            for s, credit in zip(update, given):
                compare(s, credit.prefix.flatten().tolist(), credit.cont.flatten().tolist())
                credited.add(s)
                replayed += 1
        for s in (set(by_step) - credited):  # filtered, or after the last update: never credited
            zeros = [0.0] * len(by_step[s])
            compare(s, zeros, zeros)
            replayed += 1
        return replayed, problems, []
    for s in steps["step"].astype(int):
        if s in fork_steps:
            continue  # cf_replay's
        rewards, shape = rewards_of(s), _shape(pairs_of[s])
        try:
            credit = estimator.group(rewards, shape)
        except (TypeError, ValueError) as err:  # e.g. a missing reward: no finite credit re-derives
            problems.append(f"{run_dir} step {s}: its credit does not re-derive from its rewards "
                            f"{rewards.flatten().tolist()} ({err})")
            continue
        compare(s, credit.prefix.flatten().tolist(), credit.cont.flatten().tolist())
        replayed += 1
    return replayed, problems, []


def replay_credit(steps: pd.DataFrame, rollouts: pd.DataFrame, pairs: pd.DataFrame, runs: pd.DataFrame,
                  configs: dict, plugin_estimator=None) -> dict:
    """{"groups": re-derived, "runs": runs replayed, "older": runs made before the rollout rows held their credit,
    "problems": [...], "unchecked": [...]} over a sweep's collated tables; `configs`: {run_dir: its config.yaml as
    a dict}."""
    out = {"groups": 0, "runs": 0, "older": 0, "problems": [], "unchecked": []}
    if not len(steps) or not len(runs):
        return out
    of = lambda frame: dict(iter(frame.groupby("run_hash"))) if len(frame) else {}  # noqa: E731
    steps_of, rollouts_of, pairs_of = of(steps), of(rollouts), of(pairs)
    for run in runs.to_dict("records"):
        h = run["run_hash"]
        if h not in steps_of:
            continue  # no training steps: a read-out of a checkpoint
        mine = rollouts_of.get(h)
        if mine is not None and ("adv_cont" not in mine.columns or mine["adv_cont"].isna().all()):
            out["older"] += 1  # collated with newer runs, an older run's rows have the column, empty
            continue
        try:
            n, problems, unchecked = replay_run(run["run_dir"], configs.get(run["run_dir"]) or {}, steps_of[h],
                                                rollouts_of.get(h, pd.DataFrame(columns=["step"])),
                                                pairs_of.get(h, pd.DataFrame(columns=["step"])), plugin_estimator)
        except (ValueError, TypeError, KeyError, RuntimeError) as err:  # a crafted or damaged ledger value
            n, problems, unchecked = 0, [f"{run['run_dir']}: its credit cannot be re-derived from its ledgers "
                                         f"({type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''})"], []
        out["groups"] += n
        out["runs"] += bool(n)
        out["problems"] += problems
        out["unchecked"] += unchecked
    return out

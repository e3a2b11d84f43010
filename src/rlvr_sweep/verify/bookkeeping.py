"""PASS 4, the objective's bookkeeping: each step's health signals (docs/health.md) held against what can be
recomputed without the model.

Per run, with its objective from its config.yaml (`objective.name`, `passes`, `mini_batches`, `mask_truncated`;
a run made before objectives were a choice: the paper's `reinforce`, one pass):
- a step that made no update (`accumulated`, `filtered`), and every step of an on-policy objective (the paper's),
  records no ratio, clip share or engine-trainer gap;
- a ratio objective's update: 0 <= clip_low, clip_high and clip_low + clip_high <= 1, 0 < ratio_min <= ratio_mean
  <= ratio_max; where the update is one optimizer step (passes x mini_batches = 1) the ratio is pi / sg(pi),
  exactly 1 on every token, so ratio_min = ratio_mean = ratio_max = 1 and no token was clipped (for a built-in
  objective: a plugin's ratio is its own);
- the gap: 0 <= logp_gap_mean <= logp_gap_max and 0 <= logp_gap_outside <= 1; each rollout row's log-prob sums
  (`logp_engine`, what the engine recorded as it sampled; `logp_behaviour`, the trainer's recompute of the
  same policy) are <= 0; and over the update's rollouts that hold both and entered the loss, the triangle
  inequality bounds what the step recorded: sum_i |behaviour_i - engine_i| <= logp_gap_mean x their tokens, and
  |behaviour_i - engine_i| / length_i <= logp_gap_max for each. Rollouts that hold both sums mean the step
  measured a gap.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

PER_TOKEN = 1e-5  # float32 sums over a rollout's tokens, added in another order: this much per token
RATIO = ("ratio_mean", "ratio_min", "ratio_max", "clip_low", "clip_high")
GAP = ("logp_gap_mean", "logp_gap_max", "logp_gap_outside")
NO_UPDATE = ("accumulated", "filtered")


def _objective(config: dict) -> dict:
    o = config.get("objective") if isinstance(config, dict) else None
    o = o if isinstance(o, dict) else {}
    steps = 1
    for key in ("passes", "mini_batches"):
        value = o.get(key, 1)
        steps *= int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1
    return {"name": o.get("name") if isinstance(o.get("name"), str) else "reinforce", "one_step": steps == 1,
            "mask_truncated": o.get("mask_truncated") is True}


def _kind(name: str):
    """(kind, built in) of an objective, or (None, False) for one no import has registered (a plugin's)."""
    from rlvr_sweep.update import OBJECTIVES

    if name not in OBJECTIVES:
        return None, False
    option = OBJECTIVES[name]
    return option.kind, option.built_in


def _numbers(row, columns) -> dict:
    out = {}
    for c in columns:
        v = getattr(row, c, None)
        out[c] = float(v) if isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool) \
            else math.nan
    return out


def _sum_or_none(value) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        return None
    return None if math.isnan(float(value)) else float(value)


def _row_problems(v: dict, updated: bool, kind, built_in: bool, one_step: bool) -> list[str]:
    ratio = {k: v[k] for k in RATIO if not math.isnan(v[k])}
    gap = {k: v[k] for k in GAP if not math.isnan(v[k])}
    out = []
    if not updated and (ratio or gap):
        out.append(f"made no update but records {sorted({**ratio, **gap})}")
    if kind == "on_policy" and ratio:
        out.append(f"its objective has no importance ratio but the step records {sorted(ratio)}")
    if len(ratio) == len(RATIO):
        lo, mean, hi, cl, ch = (v[k] for k in ("ratio_min", "ratio_mean", "ratio_max", "clip_low", "clip_high"))
        if not (0 < lo <= mean * (1 + 1e-6) and mean <= hi * (1 + 1e-6)):
            out.append(f"ratio min / mean / max ({lo:.6g}, {mean:.6g}, {hi:.6g}) are not 0 < min <= mean <= max")
        if not (0 <= cl <= 1 and 0 <= ch <= 1 and cl + ch <= 1):
            out.append(f"clip shares low {cl:.6g} and high {ch:.6g} are not shares of the tokens")
        if one_step and built_in and (lo, mean, hi, cl, ch) != (1.0, 1.0, 1.0, 0.0, 0.0):
            out.append(f"one optimizer step per update: the ratio is exactly 1 and nothing is clipped, but the step "
                       f"records ratio ({lo:.6g}, {mean:.6g}, {hi:.6g}) and clip shares ({cl:.6g}, {ch:.6g})")
    elif ratio and updated:
        out.append(f"records {sorted(ratio)} but not all of {list(RATIO)}")
    if gap:
        mean, top, outside = v["logp_gap_mean"], v["logp_gap_max"], v["logp_gap_outside"]
        if not (0 <= mean <= top * (1 + 1e-6) + 1e-12 and 0 <= outside <= 1):
            out.append(f"engine-trainer gap mean {mean:.6g}, max {top:.6g}, outside share {outside:.6g} are not "
                       "0 <= mean <= max, 0 <= share <= 1")
    return out


def _gap_problems(v: dict, rows: pd.DataFrame, mask_truncated: bool) -> list[str]:
    """The update's rollouts against its recorded gap (`rows`: its questions' rollout rows)."""
    if not len(rows) or "logp_engine" not in rows.columns or "logp_behaviour" not in rows.columns:
        return []
    both = []
    for r in rows.itertuples(index=False):
        engine, trainer = _sum_or_none(r.logp_engine), _sum_or_none(r.logp_behaviour)
        if engine is None or trainer is None or (mask_truncated and bool(r.capped)):
            continue
        both.append((abs(trainer - engine), int(r.length)))
    if not both:
        return []
    mean, top = v["logp_gap_mean"], v["logp_gap_max"]
    if math.isnan(mean) or math.isnan(top):
        return [f"{len(both)} rollouts hold engine and trainer log-prob sums but the step records no gap"]
    tokens = sum(n for _, n in both)
    total = sum(d for d, _ in both)
    out = []
    if total > mean * tokens + PER_TOKEN * tokens:
        out.append(f"its rollouts' |trainer - engine| log-prob sums add to {total:.6g} over {tokens} tokens, more than "
                   f"the recorded mean gap {mean:.6g} allows ({mean * tokens:.6g})")
    worst = max(d / max(n, 1) for d, n in both)
    if worst > top + PER_TOKEN:
        out.append(f"a rollout's mean |trainer - engine| per token is {worst:.6g}, more than the recorded largest "
                   f"gap {top:.6g}")
    return out


def _updates_of(steps: pd.DataFrame) -> dict[int, list[int]]:
    """{update step: the steps whose questions it took} (dynamic sampling's filtered ones left out)."""
    out, current = {}, []
    for step, action in zip(steps["step"].astype(int), steps["action"]):
        if action == "filtered":
            continue
        current.append(step)
        if action != "accumulated":
            out[step], current = current, []
    return out


def run_problems(run_dir, config: dict, steps: pd.DataFrame, rollouts: pd.DataFrame) -> list[str]:
    """One run's bookkeeping problems (see the module's docstring)."""
    o = _objective(config)
    kind, built_in = _kind(o["name"])
    steps = steps.sort_values("step")
    updates = _updates_of(steps)
    by_step = dict(iter(rollouts.groupby("step"))) if len(rollouts) and "step" in rollouts.columns else {}
    problems = []
    for row in steps.itertuples(index=False):
        updated = row.action not in NO_UPDATE
        v = _numbers(row, (*RATIO, *GAP))
        found = _row_problems(v, updated, kind, built_in, o["one_step"])
        if updated:
            taken = [by_step[s] for s in updates.get(int(row.step), []) if s in by_step]
            found += _gap_problems(v, pd.concat(taken) if taken else pd.DataFrame(), o["mask_truncated"])
        problems += [f"{run_dir} step {row.step} ({o['name']}): {p}" for p in found]
    for column in ("logp_engine", "logp_behaviour"):
        if column in rollouts.columns:
            sums = pd.to_numeric(rollouts[column], errors="coerce")
            positive = rollouts[sums > PER_TOKEN * rollouts["length"].clip(lower=1)]
            problems += [f"{run_dir} step {r.step} rollout {r.index}: {column} = {getattr(r, column)} is a log-prob "
                         "sum above 0" for r in positive.head(5).itertuples(index=False)]
    return problems


def check_bookkeeping(steps: pd.DataFrame, rollouts: pd.DataFrame, runs: pd.DataFrame, configs: dict) -> dict:
    """{"updates": update steps checked, "runs": runs checked, "problems": [...]} over a sweep's collated tables
    (`configs`: {run_dir: its config.yaml as a dict}); runs made before the steps held health signals are left out."""
    out = {"updates": 0, "runs": 0, "problems": []}
    if not len(steps) or not len(runs) or "ratio_mean" not in steps.columns:
        return out
    steps_of = dict(iter(steps.groupby("run_hash")))
    rollouts_of = dict(iter(rollouts.groupby("run_hash"))) if len(rollouts) else {}
    for run in runs.to_dict("records"):
        mine = steps_of.get(run["run_hash"])
        if mine is None:
            continue
        try:
            problems = run_problems(run["run_dir"], configs.get(run["run_dir"]) or {}, mine,
                                    rollouts_of.get(run["run_hash"], pd.DataFrame()))
        except (ValueError, TypeError, KeyError, AttributeError) as err:  # a crafted or damaged ledger value
            problems = [f"{run['run_dir']}: its health signals cannot be checked ({type(err).__name__}: "
                        f"{str(err).splitlines()[0][:200] if str(err) else ''})"]
        out["updates"] += int((~mine["action"].isin(NO_UPDATE)).sum())
        out["runs"] += 1
        out["problems"] += problems
    return out

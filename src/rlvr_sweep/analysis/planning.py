"""`analysis plan`: how many seeds, hours and bytes a study's contrasts need, from a pilot's finished runs
(docs/planning.md).

For each contrast Table 2B would report (the declared rows of the sweep's profile and every arm row against the
baseline, `report.table2b_contrasts`) with at least 2 seeds: its variance components and the two-level interval's
half-width now, at its floor and at the seeds a target needs (`power`): a half-width of `halfwidth` pp, and an
effect of `effect` pp detected at `power`, the latter at the Bonferroni level of its family (the contrasts planned
on its benchmark: Holm's first step, `multiplicity`). Each arm row is then planned at the most seeds any of its
contrasts needs; its cost is its own pilot runs' measured seconds (training and read-outs: tree and
counterfactual arms cost more) and bytes, per new run. Runs with the pilot's seeds exist and are skipped on
relaunch (same identity); the launch line of each arm row is its pilot's own (from the launch record,
`.sweeps/`), its seeds the pilot's and the new ones, so `status -- <that line>` lists the same runs to start.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rlvr_sweep.analysis.contrasts import _profile_of, _rows, _shown_name, contrast_grid
from rlvr_sweep.analysis.power import (
    MAX_SEEDS, components, floor, half_width, power, seeds_for_effect, seeds_for_halfwidth,
)
from rlvr_sweep.analysis.report import table2b_contrasts
from rlvr_sweep.analysis.source import Sweep, seed_order

LAUNCH_RECORDS = ".sweeps"  # `sweep.records.SWEEPS`, named here: the sweep stage comes after analysis (tested equal)


def plan(sweep: Sweep, root, halfwidth: float = 1.0, effect: float = 3.0, target_power: float = 0.8,
         items: int | None = None, contrasts=None, baseline: str | None = None) -> dict:
    """{"contrasts": [...], "left_out": [...], "arms": [...], "total": {...}, "targets": {...}} (module docstring);
    `halfwidth`, `effect` in percentage points; `items`: plan on this many items (default: the pilot's)."""
    profiles = sorted(sweep.runs["profile"].unique())
    found, left_out = [], []
    for c in table2b_contrasts(sweep, contrasts, baseline):
        for profile in profiles if c.profile is None else [c.profile]:
            got = contrast_grid(sweep, c, profile)
            if isinstance(got, str) or len(got[0]) < 2 or not np.any(got[1]):
                why = got if isinstance(got, str) else "one seed: no two-level interval to plan" if len(got[0]) < 2 \
                    else ("the arms' outcomes are the same on every item and seed: no variance to plan from (train "
                          "longer, or read out more items)")
                left_out.append(f"row {c.row} ({_shown_name(sweep, c)}, {c.benchmark}): {why}")
                continue
            units = [_rows(sweep, ref, c.benchmark, profile)[0] for ref in c.arms]
            found.append((c, profile, got[1], units))
    family = {}
    for c, profile, _, _ in found:
        family[(profile, c.benchmark)] = family.get((profile, c.benchmark), 0) + 1
    rows, wanted = [], {}
    for c, profile, d, units in found:
        comp = components(d)
        n = items or comp.items
        m = family[(profile, c.benchmark)]
        need_hw = seeds_for_halfwidth(comp, halfwidth / 100, n)
        need_eff = seeds_for_effect(comp, effect / 100, target_power, n, family=m)
        rows.append({"row": c.row, "title": c.title, "contrast": _shown_name(sweep, c), "profile": profile,
                     "benchmark": c.benchmark,
                     "metric": c.metric, "items": n, "seeds": comp.seeds, "mean_pp": 100 * comp.mean,
                     "components": comp.as_dict(), "halfwidth_now_pp": 100 * half_width(comp, comp.seeds, n),
                     "floor_pp": 100 * floor(comp, n), "family": m, "seeds_for_halfwidth": need_hw,
                     "seeds_for_effect": need_eff,
                     "power_now": power(comp, effect / 100, comp.seeds, n, family=m), "arms": units})
        need = [s for s in (need_hw, need_eff) if s is not None]
        for unit in units:
            wanted[unit] = max(wanted.get(unit, 0), max(need, default=comp.seeds))
    arms = [_arm_plan(sweep, Path(root), unit, seeds) for unit, seeds in wanted.items()]
    total = {"new_runs": sum(a["new_runs"] for a in arms), "hours": sum(a["hours"] for a in arms),
             "bytes": sum(a["bytes"] for a in arms)}
    return {"targets": {"halfwidth_pp": halfwidth, "effect_pp": effect, "power": target_power, "items": items,
                        "max_seeds": MAX_SEEDS},
            "contrasts": rows, "left_out": left_out, "arms": arms, "total": total}


def _arm_plan(sweep: Sweep, root: Path, unit: str, seeds: int) -> dict:
    runs = sweep.runs_of(unit)
    have = sorted({int(s) for s in runs["seed"]}, key=seed_order)
    new = []
    candidate = 1
    while len(have) + len(new) < seeds:
        if candidate not in have:
            new.append(candidate)
        candidate += 1
    seconds = float(np.nanmean(runs["wall_seconds"].astype(float))) if len(runs) else float("nan")
    folders = [Path(d) if Path(d).is_dir() else root / d for d in runs["run_dir"] if d]
    size = float(np.mean([_folder_bytes(f) for f in folders])) if folders else 0.0
    return {"arm": sweep.label(unit), "unit": unit, "profile": _profile_of(sweep, unit), "seeds_now": have,
            "seeds_planned": seeds, "new_seeds": new, "new_runs": len(new), "seconds_per_run": seconds,
            "hours": len(new) * seconds / 3600, "bytes_per_run": size, "bytes": len(new) * size,
            "line": _launch_line(root, runs, [*have, *new])}


def _folder_bytes(folder: Path) -> int:
    total = 0
    for top, _, names in os.walk(folder):
        for name in names:
            try:
                total += (Path(top) / name).stat().st_size
            except OSError:
                pass
    return total


def _launch_line(root: Path, runs, seeds: list) -> str:
    """The pilot's own line for this arm row (its launch record's overrides, matched by run hash), its seed sweep
    the planned seeds; else the arm's preset, said so."""
    hashes = set(runs["run_hash"].astype(str))
    jobs = [job for record in _launch_records(root) for job in record
            if isinstance(job, dict) and str(job.get("run_hash")) in hashes and isinstance(job.get("overrides"), list)]
    sweep_seeds = ",".join(str(s) for s in seeds)
    if jobs:
        kept = [str(o) for o in jobs[-1]["overrides"] if not str(o).startswith("seed=")]
        return f"python -m rlvr_sweep {' '.join(kept)} -m seed={sweep_seeds}"
    arm, profile = runs["arm"].iloc[0], runs["profile"].iloc[0]
    return (f"python -m rlvr_sweep +arm={arm} profile={profile} -m seed={sweep_seeds}  "
            "# no launch record of the pilot: add the overrides it used")


def _launch_records(root: Path) -> list[list]:
    """The jobs of each launch record under `root/.sweeps` (untrusted JSON: what cannot be read is skipped)."""
    import json

    out = []
    for path in sorted((root / LAUNCH_RECORDS).glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError):
            continue
        jobs = record.get("jobs") if isinstance(record, dict) else None
        out.append(jobs if isinstance(jobs, list) else [])
    return out


def plan_lines(result: dict) -> list[str]:
    """The plan as printed: one line per contrast, per arm row, the total and the launch lines."""
    t = result["targets"]
    out = [f"Plan: two-level 95% half-width <= {t['halfwidth_pp']:g} pp, and an effect of {t['effect_pp']:g} pp "
           f"detected with power {t['power']:g} at the Bonferroni level of its benchmark's family (Holm's first step)",
           "", "| Row | Contrast | Benchmark (N) | Seeds | var seed / item / interaction (pp^2) | ±now (pp) | "
           "floor (pp) | seeds for ±h | seeds for effect (family) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in result["contrasts"]:
        c = r["components"]
        comps = " / ".join(f"{1e4 * c[k]:.2f}" for k in ("seed", "item", "interaction"))
        need = lambda s: str(s) if s is not None else f"> {t['max_seeds']}"  # noqa: E731
        what = "AllCap" if r["metric"] == "capped" else "acc"
        title = f"{r['title']}: " if r["title"] else ""
        out.append(f"| {r['row']} | {title}{r['contrast']} ({what}) | {r['benchmark']} ({r['items']}) | {r['seeds']} |"
                   f" {comps} | {r['halfwidth_now_pp']:.2f} | {r['floor_pp']:.2f} | "
                   f"{need(r['seeds_for_halfwidth'])} | {need(r['seeds_for_effect'])} ({r['family']}) |")
    out += ["", "| Arm row | Seeds now | Seeds planned | New runs | Hours per run | Hours | MB per run | MB |",
            "|---|---|---|---|---|---|---|---|"]
    for a in result["arms"]:
        out.append(f"| {a['arm']} | {'/'.join(map(str, a['seeds_now']))} | {a['seeds_planned']} | {a['new_runs']} | "
                   f"{a['seconds_per_run'] / 3600:.4f} | {a['hours']:.3f} | {a['bytes_per_run'] / 1e6:.1f} | "
                   f"{a['bytes'] / 1e6:.1f} |")
    total = result["total"]
    out += ["", f"total: {total['new_runs']} new runs, {total['hours']:.3f} hours on the pilot's machine, "
                f"{total['bytes'] / 1e6:.1f} MB; the pilot's runs are reused (same identity: skipped)"]
    out += [f"left out: {line}" for line in result["left_out"]]
    out += ["", "launch (check first with `python -m rlvr_sweep status ROOT -- <the same overrides>`):"]
    out += [f"  {a['line']}" for a in result["arms"] if a["new_runs"]] or ["  nothing to add"]
    return out

"""`analysis plan` (`analysis.planning`) on the hand-made sweep: every contrast Table 2B reports with its
components, half-widths and seed counts as `analysis.power` gives them, each arm row planned at the most seeds its
contrasts need, and a launch line whose seeds are the pilot's and the new ones."""

from __future__ import annotations

import json

import pytest

from rlvr_sweep.analysis import Sweep
from rlvr_sweep.analysis.contrasts import contrast_grid, parse_contrasts
from rlvr_sweep.analysis.planning import plan, plan_lines
from rlvr_sweep.analysis.power import components, half_width, seeds_for_effect, seeds_for_halfwidth
from tests.analysis import handmade

ROW = parse_contrasts([{"row": 1, "title": "tree vs flat", "a": "5", "b": "1", "benchmark": "toy_heldout"}])


def test_each_contrast_is_planned_as_the_power_module_predicts_and_each_arm_at_its_most_needed_seeds(tmp_path):
    sweep = Sweep.from_tables(handmade.tables())
    result = plan(sweep, tmp_path, halfwidth=20.0, effect=30.0, contrasts=ROW)
    rows = {r["row"]: r for r in result["contrasts"]}
    assert 1 in rows and all(r["seeds"] == 3 for r in rows.values())
    seeds, d = contrast_grid(sweep, ROW[0], "smoke")
    c = components(d)
    family = rows[1]["family"]
    assert family == sum(r["benchmark"] == "toy_heldout" for r in rows.values())
    assert rows[1]["halfwidth_now_pp"] == pytest.approx(100 * half_width(c, 3))
    assert rows[1]["seeds_for_halfwidth"] == seeds_for_halfwidth(c, 0.20)
    assert rows[1]["seeds_for_effect"] == seeds_for_effect(c, 0.30, 0.8, family=family)
    for arm in result["arms"]:
        mine = [r for r in result["contrasts"] if arm["unit"] in r["arms"]]
        needed = max(max(s for s in (r["seeds_for_halfwidth"], r["seeds_for_effect"]) if s is not None)
                     for r in mine)
        assert arm["seeds_planned"] == needed and arm["new_runs"] == max(0, needed - 3)
        assert arm["seeds_now"] == [42, 101, 7] and len(set(arm["new_seeds"]) & {42, 101, 7}) == 0
        assert arm["line"].startswith(f"python -m rlvr_sweep +arm={arm['arm'].split('. ')[-1]} profile=smoke -m seed=42,101,7")
    assert result["total"]["new_runs"] == sum(a["new_runs"] for a in result["arms"])
    lines = plan_lines(result)
    assert lines[0].startswith("Plan: two-level 95% half-width <= 20 pp, and an effect of 30 pp detected with power 0.8")
    json.dumps(result, default=str)  # the --json form


def test_a_contrast_with_one_seed_is_left_out_saying_why(tmp_path):
    tables = handmade.tables()
    one = {name: t[t["seed"] == 42] if "seed" in t.columns else t for name, t in tables.items()}
    result = plan(Sweep.from_tables(one), tmp_path, contrasts=ROW)
    assert result["contrasts"] == [] and any("one seed: no two-level interval to plan" in x for x in result["left_out"])


def test_the_launch_line_is_the_pilot_s_own_from_its_launch_record(tmp_path):
    sweep = Sweep.from_tables(handmade.tables())
    runs = sweep.runs[sweep.runs["arm"] == "baseline"]
    (tmp_path / ".sweeps").mkdir()
    (tmp_path / ".sweeps" / "crafted.json").write_text("{not json")  # unreadable: skipped
    (tmp_path / ".sweeps" / "pilot.json").write_text(json.dumps({"jobs": [
        {"run_hash": str(h), "overrides": ["+arm=baseline", "profile=smoke", "train.steps=16", f"seed={s}"]}
        for h, s in zip(runs["run_hash"], runs["seed"])]}))
    result = plan(sweep, tmp_path, halfwidth=20.0, effect=30.0, contrasts=ROW)
    (base,) = [a for a in result["arms"] if a["arm"].endswith("baseline")]
    assert base["new_runs"] > 0
    seeds = ",".join(str(s) for s in [42, 101, 7, *base["new_seeds"]])
    assert base["line"] == f"python -m rlvr_sweep +arm=baseline profile=smoke train.steps=16 -m seed={seeds}"


def test_the_launch_records_folder_is_the_sweep_stage_s():
    from rlvr_sweep.analysis.planning import LAUNCH_RECORDS
    from rlvr_sweep.sweep.records import SWEEPS

    assert LAUNCH_RECORDS == SWEEPS

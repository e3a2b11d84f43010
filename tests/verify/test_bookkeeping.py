"""PASS 4's bookkeeping: each update's ratio, clip and engine-trainer gap signals held against its objective and
its rollouts' log-prob sums, on real smoke runs; a tampered signal or sum is named with its run and step."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from rlvr_sweep import store
from rlvr_sweep.run import run
from rlvr_sweep.verify.bookkeeping import check_bookkeeping
from rlvr_sweep.verify.regrade import run_config
from tests.helpers import compose_cfg

# the paper's objective, ppo_clip with one step per update (ratio exactly 1) and with 2 passes in 2 mini-batches
RUNS = {"paper": [], "one_step": ["objective=ppo_clip"],
        "passes": ["objective=ppo_clip", "objective.passes=2", "objective.mini_batches=2"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bookkeeping")
    return {name: Path(run(compose_cfg(["+arm=ra_flat", "profile=smoke", "train.steps=4", "eval.limit=2",
                                        "optimizer_step=full_backward", *extra, f"run.out_root={root}"]))["run_dir"])
            for name, extra in RUNS.items()}


def checked(run_dirs, change=None) -> dict:
    tables = {name: pd.concat([store.read_table(d, name) for d in run_dirs], ignore_index=True)
              for name in ("steps", "rollouts")}
    if change:
        change(tables)
    frame = pd.DataFrame([{"run_hash": store.read_run_json(d)["run_hash"], "run_dir": str(d)} for d in run_dirs])
    return check_bookkeeping(tables["steps"], tables["rollouts"], frame, {str(d): run_config(d) for d in run_dirs})


def test_every_update_of_every_objective_holds(runs):
    out = checked(list(runs.values()))
    assert out["problems"] == [] and out["runs"] == 3 and out["updates"] == 12
    one = store.read_table(runs["one_step"], "steps")
    assert (one["ratio_min"] == 1).all() and (one["clip_low"] == 0).all()  # one step: the ratio is exactly 1
    moved = store.read_table(runs["passes"], "steps")
    assert (moved["ratio_max"] > 1).any() or (moved["ratio_min"] < 1).any()  # later steps see a moved policy
    rollouts = store.read_table(runs["passes"], "rollouts")
    assert rollouts["logp_engine"].notna().all() and rollouts["logp_behaviour"].notna().all()
    assert (rollouts["logp_engine"] < 0).all()
    gap = (rollouts["logp_behaviour"] - rollouts["logp_engine"]).abs() / rollouts["length"]
    assert gap.max() < 1e-4  # float32 on the CPU: the engine and the trainer agree


@pytest.mark.parametrize("which, column, value, message", [
    ("one_step", "ratio_min", 0.97, "one optimizer step per update: the ratio is exactly 1"),
    ("passes", "clip_high", 1.5, "are not shares of the tokens"),
    ("passes", "ratio_min", 2.0, "are not 0 < min <= mean <= max"),
    ("paper", "ratio_mean", 1.0, "its objective has no importance ratio but the step records ['ratio_mean']"),
    ("passes", "logp_gap_max", 0.0, "more than the recorded largest gap"),
])
def test_a_tampered_signal_is_named(runs, which, column, value, message):
    h = store.read_run_json(runs[which])["run_hash"]

    def change(t):
        s = t["steps"]
        s.loc[(s["run_hash"] == h) & (s["step"] == 1), column] = value
        if column == "logp_gap_max":  # a gap the rollouts' sums exceed: their engine sum moved by 0.5
            r = t["rollouts"]
            r.loc[(r["run_hash"] == h) & (r["step"] == 1) & (r["index"] == 0), "logp_engine"] -= 0.5
    problems = checked(list(runs.values()), change)["problems"]
    assert problems and all(f"{runs[which]} step 1" in p for p in problems), problems
    assert any(message in p for p in problems), problems


def test_a_moved_engine_sum_is_more_than_the_recorded_mean_gap_allows(runs):
    h = store.read_run_json(runs["paper"])["run_hash"]

    def change(t):
        r = t["rollouts"]
        r.loc[(r["run_hash"] == h) & (r["step"] == 2) & (r["index"] == 3), "logp_engine"] -= 2.0
    problems = checked([runs["paper"]], change)["problems"]
    assert any(f"{runs['paper']} step 2 (reinforce): its rollouts' |trainer - engine| log-prob sums add to" in p
               for p in problems), problems


def test_a_crafted_value_is_one_named_line_and_older_runs_are_left_out(runs):
    h = store.read_run_json(runs["paper"])["run_hash"]

    def change(t):
        r = t["rollouts"]
        r["logp_engine"] = r["logp_engine"].astype(object)
        r.loc[(r["run_hash"] == h) & (r["step"] == 0) & (r["index"] == 0), "logp_engine"] = 0.25
    problems = checked([runs["paper"]], change)["problems"]
    assert any("step 0 rollout 0: logp_engine = 0.25 is a log-prob sum above 0" in p for p in problems), problems

    def older(t):  # a run made before the steps held health signals
        t["steps"] = t["steps"].drop(columns=["ratio_mean"])
    assert checked([runs["paper"]], older) == {"updates": 0, "runs": 0, "problems": []}

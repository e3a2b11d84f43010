"""PASS 4's credit replay: every stored advantage re-derived from the stored rewards with the run's estimator,
per group or per update (a batch estimator's, filtered groups left out), a tampered advantage named, a plugin
estimator's credit not re-derived without --plugins, and a run made before rollouts held their credit counted
apart."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from rlvr_sweep import store
from rlvr_sweep.run import run
from rlvr_sweep.verify.credit_replay import _updates, bound_estimator, replay_credit
from rlvr_sweep.verify.regrade import run_config
from tests.helpers import compose_cfg

TABLES = ("steps", "rollouts", "pairs")
# a leaf estimator, a batch estimator with dynamic sampling, and KL to the reference as a reward penalty


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("credit")
    leaf = run(compose_cfg(["+arm=ra_flat", "profile=smoke", "train.steps=4", "eval.limit=2", f"run.out_root={root}"]))
    batch = run(compose_cfg(["+arm=ra_flat", "profile=smoke", "estimator=grpo_batch_std", "train.accumulate_questions=2",
                             "train.dynamic_sampling=true", "train.steps=12", "eval.limit=2", f"run.out_root={root}"]))
    penalised = run(compose_cfg(["+arm=ra_flat", "profile=smoke", "objective.kl_beta=0.1", "objective.kl_in=reward",
                                 "train.steps=4", "eval.limit=2", f"run.out_root={root}"]))
    return [Path(leaf["run_dir"]), Path(batch["run_dir"]), Path(penalised["run_dir"])]


def replayed(run_dirs, change=None) -> dict:
    tables = {name: pd.concat([store.read_table(d, name) for d in run_dirs], ignore_index=True) for name in TABLES}
    if change:
        change(tables)
    runs = pd.DataFrame([{**{k: tables["steps"][tables["steps"]["run_hash"] == h][k].iloc[0] for k in
                             ("arm", "horizon", "seed")}, "run_hash": h, "run_dir": str(d)}
                         for d in run_dirs for h in [store.read_run_json(d)["run_hash"]]])
    return replay_credit(tables["steps"], tables["rollouts"], tables["pairs"], runs,
                         {str(d): run_config(d) for d in run_dirs})


def test_every_stored_advantage_re_derives(two_runs):
    out = replayed(two_runs)
    steps = sum(len(store.read_table(d, "steps")) for d in two_runs)
    assert out["problems"] == [] and out["unchecked"] == [] and out["runs"] == 3 and out["groups"] == steps
    batch = store.read_table(two_runs[1], "rollouts")
    assert (batch["adv_cont"] != 0).any()  # the batch estimator's credit was written in at its updates


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_tampered_advantage_is_named(two_runs, which):
    rollouts = store.read_table(two_runs[which], "rollouts")
    row = rollouts.index[rollouts["adv_cont"] != 0][0]
    step, index = int(rollouts.loc[row, "step"]), int(rollouts.loc[row, "index"])
    h = rollouts.loc[row, "run_hash"]

    def change(t):
        r = t["rollouts"]
        at = (r["run_hash"] == h) & (r["step"] == step) & (r["index"] == index)
        r.loc[at, "adv_cont"] = r.loc[at, "adv_cont"] * 1.01

    problems = replayed(two_runs, change)["problems"]
    assert len(problems) == 1 and f"step {step} rollout {index}: stored credit" in problems[0], problems


def test_an_update_of_a_batch_estimator_is_the_steps_it_credited():
    steps = pd.DataFrame({"step": range(7), "action": ["accumulated", "filtered", "backward_step", "filtered",
                                                        "accumulated", "zero_grad_step", "accumulated"]})
    assert _updates(steps) == [[0, 2], [4, 5]]  # step 6 never reached an update


def test_a_plugin_estimator_is_not_re_derived_without_its_code(tmp_path):
    estimator, why = bound_estimator(tmp_path, {"estimator": {"name": "my_own_credit"}})
    assert estimator is None and "plugin estimator 'my_own_credit'" in why and "--plugins" in why
    for config in (None, {}, {"estimator": "grpo"}, {"estimator": {"name": 3}}):  # never the default estimator
        assert bound_estimator(tmp_path, config)[0] is None


def test_a_run_made_before_rollouts_held_their_credit_is_counted_apart(two_runs):
    out = replayed(two_runs, lambda t: t.__setitem__("rollouts", t["rollouts"].drop(columns=["adv_prefix", "adv_cont"])))
    assert out["older"] == 3 and out["groups"] == 0 and out["problems"] == [] and out["unchecked"] == []


def test_a_kl_penalty_is_what_credit_and_activity_saw(two_runs):
    """kl_in=reward: the first step's penalty is 0 (the policy is the reference), later ones are not; credit and
    `active` follow the rewards less the penalty, and a penalty written wrong is named by the replay and PASS 3."""
    from rlvr_sweep.analysis.source import load_sweep
    from rlvr_sweep.verify.ledgers import step_problems

    penalised = two_runs[2]
    steps = store.read_table(penalised, "steps")
    assert steps["kl_penalty"].iloc[0].tolist() == [0.0] * 8 and any(max(p) > 0 for p in steps["kl_penalty"][1:])
    rollouts = store.read_table(penalised, "rollouts")
    assert rollouts["kl_penalty"].tolist() == [x for p in steps["kl_penalty"] for x in p]
    h = steps["run_hash"].iloc[0]

    def change(t):
        r = t["rollouts"]
        r.loc[(r["run_hash"] == h) & (r["step"] == 3) & (r["index"] == 0), "kl_penalty"] += 0.5

    assert any("step 3 rollout 0" in p for p in replayed(two_runs, change)["problems"])
    sweep = load_sweep(penalised.parent.parent.parent)
    assert step_problems(sweep.steps, sweep.rollouts, sweep.pairs, sweep.runs)[1] == []
    flat = sweep.steps.copy()
    flat["kl_penalty"] = [[0.0] * 8 for _ in range(len(flat))]  # as if no penalty: equal rewards, yet active
    assert (flat["active"] & flat["rewards"].map(lambda r: len(set(r)) == 1)).any()  # a step the penalty made active
    assert any("active disagrees with the rewards" in p
               for p in step_problems(flat, sweep.rollouts, sweep.pairs, sweep.runs)[1])
    crafted = sweep.steps.copy()
    crafted["kl_penalty"] = crafted["kl_penalty"].astype(object)
    crafted.at[crafted.index[1], "kl_penalty"] = ["x"]  # not one number per rollout: one line, no traceback
    problems = step_problems(crafted, sweep.rollouts, sweep.pairs, sweep.runs)[1]
    assert len(problems) == 1 and "step 1: kl_penalty is not one number per rollout" in problems[0], problems


@pytest.mark.parametrize("column,value", [("adv_cont", "lots"), ("kl_penalty", "none"), ("reward", None)])
def test_a_crafted_credit_column_is_named_never_a_traceback(two_runs, column, value):
    """A rollout row whose credit, penalty or reward is not a number: named with its run (a missing reward
    re-derives no finite credit for its step: named with the step), never a traceback."""
    h = store.read_table(two_runs[2], "steps")["run_hash"].iloc[0]

    def change(t):
        r = t["rollouts"]
        r[column] = r[column].astype(object)
        r.loc[(r["run_hash"] == h) & (r["step"] == 1) & (r["index"] == 0), column] = value

    problems = replayed(two_runs, change)["problems"]
    if value is None:
        assert len(problems) == 1 and f"{two_runs[2]} step 1: its credit does not re-derive" in problems[0] \
            and "(finite: False)" in problems[0], problems
    else:
        assert len(problems) == 1 and str(two_runs[2]) in problems[0] and "cannot be re-derived" in problems[0]

"""DAPO's pieces in a real run of the `dapo` arm: dynamic sampling keeps homogeneous groups out of every update,
the soft overlong punishment is in the stored rewards, and `verify` re-derives both (and names a reward or a
filtered step that was tampered with)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlvr_sweep import store
from rlvr_sweep.store.schema import TABLE_KEYS
from rlvr_sweep.analysis.source import load_sweep
from rlvr_sweep.reward import overlong_penalty
from rlvr_sweep.run import run
from rlvr_sweep.verify.ledgers import step_problems
from rlvr_sweep.verify.regrade import regrade_run
from tests.helpers import compose_cfg


@pytest.fixture(scope="module")
def dapo_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dapo")
    # a buffer of 400 paper tokens is 50 of the smoke cap's 64: most rollouts pay something
    info = run(compose_cfg(["+arm=dapo", "profile=smoke", "train.active_steps=4", "eval.limit=4",
                            "reward.overlong_buffer=400", f"run.out_root={root}"]))
    return Path(info["run_dir"])


def test_dynamic_sampling_updates_on_groups_whose_rewards_differ_only(dapo_run):
    steps = store.read_table(dapo_run, "steps")
    filtered = steps["action"] == "filtered"
    assert filtered.any() and (~filtered).sum() == 4  # 4 active groups, each its own update
    assert (steps.loc[filtered, "zero_variance"]).all() and not steps.loc[filtered, "active"].any()
    updates = steps[~filtered]
    assert (updates["action"] == "backward_step").all() and updates["active"].all()
    assert (updates["optimizer_steps"] == 2).all()  # two mini-batches each
    assert (steps.loc[filtered, "bwd_out_tokens"] == 0).all()
    assert updates["ratio_mean"].notna().all() and steps.loc[filtered, "ratio_mean"].isna().all()


def test_the_stored_rewards_carry_the_overlong_penalty(dapo_run):
    rollouts = store.read_table(dapo_run, "rollouts")
    expected = [np.float32(c + overlong_penalty(n, 64, 50)) for c, n in zip(rollouts["correct"], rollouts["length"])]
    assert rollouts["reward"].tolist() == [float(x) for x in expected]
    assert (rollouts["reward"] < rollouts["correct"]).any()  # the penalty bites on some rollouts


def test_verify_rederives_the_shaped_rewards_and_the_filtered_steps(dapo_run, tmp_path):
    assert regrade_run(dapo_run)["disagreements"] == []
    sweep = load_sweep(dapo_run.parent.parent.parent)
    assert step_problems(sweep.steps, sweep.rollouts, sweep.pairs, sweep.runs)[1] == []
    # an unshaped reward written in place of a shaped one is named
    rollouts = store.read_table(dapo_run, "rollouts")
    shaped_row = int(np.flatnonzero((rollouts["reward"] != rollouts["correct"]).to_numpy())[0])
    tampered = rollouts.assign(reward=rollouts["reward"].where(rollouts.index != shaped_row, rollouts["correct"]))
    copy = tmp_path / dapo_run.name
    shutil.copytree(dapo_run, copy)
    keys = {k: rollouts[k].iloc[0] for k in TABLE_KEYS}
    store.write_table(copy, "rollouts", tampered.drop(columns=list(TABLE_KEYS)).to_dict("records"), keys)
    found = regrade_run(copy)["disagreements"]
    assert [d["diffs"]["reward"]["recomputed"] for d in found] == [float(rollouts["reward"].iloc[shaped_row])]
    # a filtered step that claims backward tokens is named
    steps = sweep.steps.copy()
    row = steps.index[steps["action"] == "filtered"][0]
    steps.loc[row, "bwd_out_tokens"] = 5
    assert any("backward tokens differ" in p for p in step_problems(steps, sweep.rollouts, sweep.pairs, sweep.runs)[1])


def test_a_tree_of_filtered_and_accumulated_questions_counts_each_update_once():
    """accumulate 2 with dynamic sampling: active, filtered, active -> one update of the two active questions."""
    from rlvr_sweep.verify.ledgers import _expected_backward
    steps = pd.DataFrame({"step": range(3), "rewards": [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]],
                          "active": [True, False, True], "leaf_tokens": [10, 20, 30], "prompt_tokens": 3,
                          "action": ["accumulated", "filtered", "backward_step"]})
    assert list(_expected_backward(steps, "full_backward")["exp_out"]) == [0, 0, 40]


def test_a_crafted_overlong_record_is_one_line(dapo_run, tmp_path):
    import json

    from rlvr_sweep.verify.compare import BadInput

    copy = tmp_path / dapo_run.name
    shutil.copytree(dapo_run, copy)
    info = json.loads((copy / "run.json").read_text())
    info["lengths"]["overlong_buffer"] = "x"
    (copy / "run.json").write_text(json.dumps(info))
    with pytest.raises(BadInput, match=r"lengths.overlong_buffer, horizon_tokens and overlong_penalty must be numbers "
                                       r"\(got 'x', 64, 1.0\)"):
        regrade_run(copy)

"""Every plugin output is checked where it enters the run (issue 47 item 6): a reward's rewards and verdicts,
one finite number and one true / false per rollout, refused in one line naming the reward and its function; a
keyword a plugin function requires but never declares is named before launch, not at its first call."""

from __future__ import annotations

import math

import pytest

from rlvr_sweep.config import ConfigError
from rlvr_sweep.reward import REWARDS
from rlvr_sweep.run.train import checked_reward
from tests.helpers import compose_cfg


@REWARDS.register("t_output_reward")
def output_reward(texts, gold, *, grade):
    return [1.0] * len(texts), [True] * len(texts)


OPTION = REWARDS["t_output_reward"]


@pytest.mark.parametrize("returned, message", [
    (([1.0, math.nan], [True, False]), r"returned reward nan for rollout 1: a reward is a finite number"),
    ((["1", 0.0], [True, False]), r"returned reward '1' for rollout 0: a reward is a finite number"),
    (([1.0], [True, False]), r"returned 1 rewards for 2 rollouts: one per rollout"),
    (([1.0, 0.0, 1.0], [True, False]), r"returned 3 rewards for 2 rollouts: one per rollout"),
    (([1.0, 0.0], [True]), r"returned 1 correct for 2 rollouts: one per rollout"),
    (("10", [True, False]), r"returned str as its rewards: one value per rollout"),
    (([1.0, 0.0], b"\x01\x00"), r"returned bytes as its correct: one value per rollout"),
    (([1.0, 0.0], [True, None]), r"returned correct=None for rollout 1: a verdict is true or false"),
    (([1.0, 0.0], [True, "yes"]), r"returned correct='yes' for rollout 1: a verdict is true or false"),
    (([1.0, 0.0], [True, 0.5]), r"returned correct=0.5 for rollout 1"),
    ([1.0, 0.0], r"returned float as its rewards: one value per rollout"),
    ((1.0, 0.0, 1.0), r"returned tuple: a reward returns \(rewards, correct\)"),
    (None, r"returned NoneType: a reward returns \(rewards, correct\)"),
])
def test_a_reward_output_that_is_not_one_number_and_one_verdict_per_rollout_is_named(returned, message):
    with pytest.raises(ValueError, match=r"reward 't_output_reward' \(tests.run.test_plugin_outputs.output_reward\) "
                                         + message):
        checked_reward(OPTION, returned, 2)


def test_a_good_output_passes_as_it_is():
    import numpy as np

    rewards, correct = [1, 0.5], [np.bool_(True), 0]
    assert checked_reward(OPTION, (rewards, correct), 2) == (rewards, correct)


def test_a_keyword_a_plugin_requires_but_never_declares_is_named_before_launch():
    @REWARDS.register("t_needs_coef")
    def needs_coef(texts, gold, *, grade, coef):
        return [coef] * len(texts), [True] * len(texts)

    with pytest.raises(ConfigError, match=r"reward.name='t_needs_coef': 't_needs_coef' \(.*needs_coef\) requires "
                                          r"\['coef'\], which it is never called with"):
        compose_cfg(["+arm=ra_flat", "profile=smoke", "reward.name=t_needs_coef", "reward.gate_chars=null"])

"""The objective's settings: checked before any run folder exists, in the identity only where they differ from
the paper's (so every run made before the objective group keeps its hash), and DAPO's pieces as settings."""

from __future__ import annotations

import pytest

from rlvr_sweep.config import ConfigError, identity_dict
from rlvr_sweep.reward import overlong_penalty, shaped
from tests.helpers import compose_cfg


def refused(overrides) -> str:
    with pytest.raises(ConfigError) as err:
        compose_cfg(overrides)
    return str(err.value)


def test_the_paper_objective_leaves_the_identity_as_it_was():
    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke"])
    assert "objective" not in identity_dict(cfg)
    assert "overlong_buffer" not in identity_dict(cfg)["reward"] and "dynamic_sampling" not in identity_dict(cfg)["train"]
    measured = compose_cfg(["+arm=ra_flat", "profile=smoke", "objective.measure_kl=true"])
    assert identity_dict(measured) == identity_dict(cfg)  # a measurement, not a change to what the run computes
    clipped = compose_cfg(["+arm=ra_flat", "profile=smoke", "objective=ppo_clip"])
    assert identity_dict(clipped)["objective"]["name"] == "ppo_clip"
    assert "measure_kl" not in identity_dict(clipped)["objective"]
    shaped_cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "reward.overlong_buffer=100"])
    assert identity_dict(shaped_cfg)["reward"]["overlong_buffer"] == 100


@pytest.mark.parametrize("overrides,words", [
    (["objective.passes=2"], "objective.passes=2, objective.mini_batches=1 with objective.name='reinforce': an "
                             "on-policy objective has no importance ratio"),
    (["objective.mini_batches=2"], "choose one of ['cispo', 'gspo', 'ppo_clip']"),
    (["objective=gspo", "objective.mini_batches=3"], "objective.mini_batches=3 does not divide an update's 8 rollouts"),
    (["objective=ppo_clip", "objective.kl_beta=0.04"], "objective.kl_beta=0.04 in the loss with optimizer_step=zero_grad: "
                                                       "that step takes a homogeneous group's gradient to be zero"),
    (["objective.kl_estimator=k1"], "objective.kl_estimator='k1': no KL term is made with objective.kl_beta=0"),
    (["objective.kl_in=reward"], "objective.kl_in='reward': no KL term is made with objective.kl_beta=0"),
    (["objective.clip_high=0.28"], "objective.clip_high=0.28: no chosen option reads it (objective 'reinforce'"),
    (["objective=gspo", "objective.clip_dual=3.0"], "objective.clip_dual=3.0: no chosen option reads it (objective "
                                                    "'gspo' reads ['clip_low', 'clip_high'])"),
    (["objective.aggregation=mean"], "objective.aggregation='mean': must be one of"),
    (["objective.name=trpo"], "objective.name='trpo': unknown objective; valid: ['cispo', 'gspo', 'ppo_clip', "
                              "'reinforce']"),
    (["objective.clip_low=1.5"], "objective.clip_low=1.5: must lie in [0, 1]"),
    (["objective=ppo_clip", "objective.clip_dual=0.5"], "objective.clip_dual=0.5: must be > 1"),
    (["objective.kl_estimator=k4"], "objective.kl_estimator='k4': must be one of ['k1', 'k2', 'k3']"),
    (["reward.overlong_penalty=0.5"], "reward.overlong_penalty=0.5: no overlong shaping without reward.overlong_buffer"),
    (["reward.overlong_buffer=600"], "reward.overlong_buffer=600 is longer than the rollout cap (horizon 512"),
])
def test_an_objective_setting_that_cannot_be_is_refused_by_name(overrides, words):
    assert words in refused(["+arm=ra_flat", "profile=smoke", *overrides])


def test_a_kl_penalty_on_the_reward_goes_with_any_optimizer_step():
    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "objective.kl_beta=0.05", "objective.kl_in=reward"])
    assert cfg.optimizer_step.name == "zero_grad" and identity_dict(cfg)["objective"]["kl_in"] == "reward"
    compose_cfg(["+arm=baseline", "objective.kl_beta=0.05", "objective.kl_in=reward"])  # the paper's loss, Arm 1's recipe


def test_arm_1s_loss_recipe_goes_with_the_papers_objective_only():
    assert "train.loss_recipe=sum_then_scale (Arm 1's rounding of the paper's loss) goes with objective reinforce" in \
        refused(["+arm=baseline", "objective=ppo_clip"])
    compose_cfg(["+arm=baseline", "objective=ppo_clip", "train.loss_recipe=scale_then_sum"])
    compose_cfg(["+arm=baseline", "objective.kl_beta=0.1", "train.loss_recipe=scale_then_sum"])  # full_backward


def test_a_fork_arm_keeps_its_pairs_in_one_mini_batch():
    compose_cfg(["+arm=cf_grpo", "objective=ppo_clip", "objective.mini_batches=4"])  # 2 rollouts each: whole pairs
    assert "objective.mini_batches=8 splits a fork pair" in refused(
        ["+arm=cf_grpo", "objective=ppo_clip", "objective.mini_batches=8"])


def test_the_soft_overlong_punishment_by_hand():
    """DAPO eq. 13 with L_max = 100, L_cache = 20: no penalty up to 80 tokens, then linear to -1 at the cap."""
    assert [overlong_penalty(n, 100, 20) for n in (1, 80, 81, 90, 100)] == [0.0, 0.0, -0.05, -0.5, -1.0]
    assert overlong_penalty(90, 100, 20, factor=0.5) == -0.25
    assert shaped([1.0, 0.0, 1.0], [10, 95, 100], 100, 20, 1.0) == [1.0, -0.75, 0.0]
    assert shaped([1.0, 0.0], [100, 100], 100, None, 1.0) == [1.0, 0.0]
    with pytest.raises(ValueError, match="overlong buffer"):
        overlong_penalty(5, 10, 20)

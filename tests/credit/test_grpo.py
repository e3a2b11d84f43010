import math

import pytest
import torch

from rlvr_sweep.credit import ESTIMATORS
from rlvr_sweep.credit.grpo import grpo_advantages, is_homogeneous


def rewards(k: int, g: int = 8) -> torch.Tensor:
    return torch.tensor([1.0] * k + [0.0] * (g - k))


@pytest.mark.parametrize(
    "k, pos, neg",
    [(1, 2.474, -0.354), (2, 1.620, -0.540), (4, 0.935, -0.935), (7, 0.354, -2.474)],
)
def test_grpo_hand_values_g8(k, pos, neg):
    adv = grpo_advantages(rewards(k))
    assert adv[:k].tolist() == pytest.approx([pos] * k, abs=1e-3)  # hand values are rounded to 3 places
    assert adv[k:].tolist() == pytest.approx([neg] * (8 - k), abs=1e-3)


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_homogeneous_group_is_exactly_zero(value):
    adv = grpo_advantages(torch.full((8,), value))
    assert adv.tolist() == [0.0] * 8
    assert not torch.isnan(adv).any()
    assert is_homogeneous(torch.full((8,), value))


def test_population_std_option():
    adv = grpo_advantages(rewards(1), std="population")
    # population std of one 1 among eight: sqrt(7/64)
    assert adv[0].item() == pytest.approx(0.875 / (math.sqrt(7 / 64) + 1e-4), rel=1e-6)


def test_unknown_names_list_valid_ones():
    with pytest.raises(ValueError, match="population"):
        grpo_advantages(rewards(1), std="bessel")
    with pytest.raises(ValueError, match="unknown estimator 'tree_sum'; valid: .*'grpo'"):
        ESTIMATORS["tree_sum"]


def test_dr_grpo_is_the_centred_reward_without_the_std_by_hand():
    """Dr. GRPO: A_i = R_i - Rbar. For R = (1, 0, 0, 0, 1, 1, 0, 0), Rbar = 3/8: winners +0.625, losers -0.375
    (GRPO divides those by sigma + 1e-4 = 0.5175 + 1e-4)."""
    import torch

    from rlvr_sweep.credit import ESTIMATORS, GroupShape, bind_estimator
    from tests.helpers import compose_cfg

    option = ESTIMATORS["dr_grpo"]
    assert option.kind == "leaf" and option.reads == ()
    r = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    shape = GroupShape(torch.zeros(4, dtype=torch.long), torch.zeros(4, 2, dtype=torch.long), torch.ones(4, 2))
    assert option.fn(r, shape).tolist() == [[0.625, -0.375], [-0.375, -0.375], [0.625, 0.625], [-0.375, -0.375]]
    cfg = compose_cfg(["+arm=ra_flat", "estimator=dr_grpo"])
    credit = bind_estimator(option, cfg.estimator).group(r, shape)  # the framework: the same on every token, active
    assert credit.active and torch.equal(credit.prefix, credit.cont) and torch.equal(credit.cont, option.fn(r, shape))
    inactive = bind_estimator(option, cfg.estimator).group(torch.ones(4, 2), shape)
    assert not inactive.active and inactive.cont.abs().sum() == 0
    assert cfg.estimator.name == "dr_grpo" and cfg.arm == "ra_flat"  # an option beside the arm, not a new arm
    with pytest.raises(Exception, match=r"estimator.eps=0.1: no chosen option reads it \(estimator 'dr_grpo'"):
        compose_cfg(["+arm=ra_flat", "estimator=dr_grpo", "estimator.eps=0.1"])

"""Each estimator kind's calling convention, in one place (`credit.kinds`): what an option returns, what the
framework makes of it, and what it refuses, naming the estimator."""

from __future__ import annotations

import pytest
import torch

from rlvr_sweep.credit import ESTIMATORS, KINDS, BoundEstimator, Credit, GroupShape, TreeCredit, bind_estimator
from tests.helpers import compose_cfg

REWARDS = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
FLAT = GroupShape(torch.zeros(2, dtype=torch.long), torch.zeros(2, 2, dtype=torch.long), torch.full((2, 2), 4))


def leaf(fn) -> BoundEstimator:
    return BoundEstimator("t_leaf", KINDS["leaf"], fn)


def test_a_leaf_estimator_returns_bare_advantages_and_the_framework_decides_activity():
    credit = leaf(lambda r, shape: r * 2 - 0.5).group(REWARDS, FLAT)
    assert credit.cont.tolist() == [[1.5, -0.5], [-0.5, -0.5]] and torch.equal(credit.prefix, credit.cont)
    assert credit.active and credit.cf is None
    assert not leaf(lambda r, shape: r * 0).group(torch.ones(2, 2), FLAT).active  # equal rewards: inactive
    assert leaf(lambda r, shape: [[1.0, -1.0], [0.0, 0.0]]).group(REWARDS, FLAT).cont.dtype == torch.float32


def test_a_leaf_estimator_written_as_before_still_runs_when_its_activity_is_the_frameworks():
    old = leaf(lambda r, shape: Credit(r - 0.25, r - 0.25, True)).group(REWARDS, FLAT)
    assert old.active and old.cont.tolist() == [[0.75, -0.25], [-0.25, -0.25]]
    with pytest.raises(ValueError, match=r"estimator 't_leaf' called a group inactive whose rewards differ"):
        leaf(lambda r, shape: Credit(r, r, False)).group(REWARDS, FLAT)


def test_what_a_leaf_estimator_returns_is_made_float_and_an_old_flat_credit_is_shaped():
    ints = leaf(lambda r, shape: (r * 2).to(torch.int64)).group(REWARDS, FLAT)
    assert ints.cont.dtype == torch.float32 and ints.cont.tolist() == [[2.0, 0.0], [0.0, 0.0]]
    exact = torch.tensor([[0.1, -0.1], [0.0, 0.0]], dtype=torch.float64)
    assert leaf(lambda r, shape: exact).group(REWARDS, FLAT).cont is exact  # a float tensor goes on as it is
    flat = leaf(lambda r, shape: Credit(r.flatten() - 0.25, r.flatten() - 0.25, True)).group(REWARDS, FLAT)
    assert flat.cont.shape == (2, 2) and flat.cont[0, 0].item() == 0.75  # as the loop took it before


@pytest.mark.parametrize("result, error, message", [
    (lambda r, s: None, TypeError, r"estimator 't_leaf' returned NoneType as its advantages: it returns numbers"),
    (lambda r, s: "lots", TypeError, r"returned str as its advantages"),
    (lambda r, s: [[1.0, None], [0.0, 0.0]], TypeError, r"returned list as its advantages, not numbers"),
    (lambda r, s: r.flatten(), ValueError, r"estimator 't_leaf' returned advantages of shape \(4,\) \(finite: True\) "
                                           r"for a group of shape \(2, 2\)"),
    (lambda r, s: r / 0, ValueError, r"\(finite: False\)"),
    (lambda r, s: TreeCredit(r, r), TypeError, r"registered as kind 'leaf' but returned a TreeCredit.*kind 'tree'"),
])
def test_a_leaf_estimator_that_returns_the_wrong_thing_is_named(result, error, message):
    with pytest.raises(error, match=message):
        leaf(result).group(REWARDS, FLAT)


def test_a_tree_estimator_returns_prefix_and_continuation_and_a_fork_one_its_own_gates():
    tree = BoundEstimator("t_tree", KINDS["tree"], lambda r, s: TreeCredit(r * 0 + 0.5, r - 0.25))
    credit = tree.group(REWARDS, FLAT)
    assert credit.prefix.tolist() == [[0.5, 0.5], [0.5, 0.5]] and credit.cont[0, 0].item() == 0.75 and credit.active
    with pytest.raises(TypeError, match=r"estimator 't_tree' \(kind 'tree'\) returned Tensor: it returns a TreeCredit"):
        BoundEstimator("t_tree", KINDS["tree"], lambda r, s: r).group(REWARDS, FLAT)
    own = Credit(REWARDS, REWARDS, False)  # a fork estimator's gate is its own, even where rewards differ
    assert BoundEstimator("t_fork", KINDS["fork"], lambda r, s: own).group(REWARDS, FLAT) is own
    with pytest.raises(TypeError, match=r"estimator 't_fork' \(kind 'fork'\) returned Tensor"):
        BoundEstimator("t_fork", KINDS["fork"], lambda r, s: r).group(REWARDS, FLAT)
    with pytest.raises(ValueError, match=r"estimator 't_fork' returned continuation credit of shape \(2, 2\) \(finite: "
                                         r"False\)"):
        BoundEstimator("t_fork", KINDS["fork"], lambda r, s: Credit(r, r / 0, True)).group(REWARDS, FLAT)


def test_the_framework_shifts_the_continuation_mass_on_the_options_behalf():
    """grpo with estimator.zero_cont_token_mass on a two-stage group: pair 0 shares 2 prefix tokens (leaves of 4
    and 2 tokens), pair 1 none (two leaves of 4). GRPO gives A = (0.75, -0.25, -0.25, -0.25) / (0.5 + 1e-4); the
    framework subtracts c = (sum_i A_i L_i) / (continuation tokens, 2 + 0 + 4 + 4) from the continuation credit
    of every leaf that has continuation tokens (not leaf 1, all prefix), and leaves the prefix credit as it is."""
    cfg = compose_cfg(["+arm=stopped_tree", "profile=smoke", "estimator=grpo", "estimator.zero_cont_token_mass=true"])
    bound = bind_estimator(ESTIMATORS["grpo"], cfg.estimator)
    assert bound.zero_mass
    shape = GroupShape(torch.tensor([2, 0]), torch.tensor([[2, 2], [0, 0]]), torch.tensor([[4, 2], [4, 4]]))
    credit = bound.group(REWARDS, shape)
    a = torch.tensor([0.75, -0.25, -0.25, -0.25]) / (0.5 + 1e-4)
    c = (a[0] * 4 + a[1] * 2 + a[2] * 4 + a[3] * 4) / (2 + 0 + 4 + 4)  # continuation tokens: 2, 0, 4, 4
    torch.testing.assert_close(credit.prefix.flatten(), a)
    torch.testing.assert_close(credit.cont.flatten(), torch.stack([a[0] - c, a[1], a[2] - c, a[3] - c]))
    plain = bind_estimator(ESTIMATORS["grpo"], compose_cfg(["+arm=stopped_tree", "profile=smoke",
                                                            "estimator=grpo"]).estimator)
    assert not plain.zero_mass and torch.equal(plain.group(REWARDS, shape).cont.flatten(), a)


def test_an_option_that_takes_the_zero_mass_setting_itself_is_not_shifted_twice():
    """An estimator written before `credit.kinds` that reads zero_cont_token_mass as an argument and shifts its own
    credit: the framework leaves the shift to it (only an option that hands the setting over is shifted)."""
    from rlvr_sweep.credit import grpo_advantages, zero_cont_token_mass

    @ESTIMATORS.register("t_own_zero_mass", kind="leaf", reads=("eps", "zero_cont_token_mass"))
    def own(rewards, shape, *, eps, zero_cont_token_mass):
        adv = grpo_advantages(rewards.flatten(), eps=eps).view(rewards.shape)
        credit = TreeCredit(adv.clone(), adv)
        if zero_cont_token_mass:
            credit = shift(credit, shape.prefix_len, shape.length)
        return Credit(credit.prefix, credit.cont, True)

    shift = zero_cont_token_mass
    cfg = compose_cfg(["+arm=stopped_tree", "profile=smoke", "estimator=t_own_zero_mass",
                       "estimator.zero_cont_token_mass=true"])
    bound = bind_estimator(ESTIMATORS["t_own_zero_mass"], cfg.estimator)
    shape = GroupShape(torch.tensor([2, 0]), torch.tensor([[2, 2], [0, 0]]), torch.tensor([[4, 2], [4, 4]]))
    grpo = bind_estimator(ESTIMATORS["grpo"], compose_cfg(["+arm=stopped_tree", "profile=smoke", "estimator=grpo",
                                                           "estimator.zero_cont_token_mass=true"]).estimator)
    assert not bound.zero_mass and torch.equal(bound.group(REWARDS, shape).cont, grpo.group(REWARDS, shape).cont)


def test_a_batch_estimator_gives_no_credit_until_its_update():
    bound = BoundEstimator("t_batch", KINDS["batch"], lambda rewards, shapes: [r * 3 for r in rewards])
    waiting = bound.group(REWARDS, FLAT)
    assert waiting.active and waiting.cont.abs().sum() == 0
    given = bound.update([REWARDS, torch.ones(2, 2)], [FLAT, FLAT], [waiting, bound.group(torch.ones(2, 2), FLAT)])
    assert given[0].cont.tolist() == [[3.0, 0.0], [0.0, 0.0]] and [c.active for c in given] == [True, False]
    per_group = leaf(lambda r, s: r)
    credits = [per_group.group(REWARDS, FLAT)]
    assert per_group.update([REWARDS], [FLAT], credits)[0] is credits[0]  # a leaf estimator's credit stands


def test_an_estimator_of_a_kind_nobody_knows_is_refused_before_launch():
    from rlvr_sweep.config import ConfigError

    @ESTIMATORS.register("t_kind_unknown", kind="leaves")
    def unknown(rewards, shape):
        return rewards

    with pytest.raises(ConfigError, match=r"estimator.name='t_kind_unknown' is registered with kind='leaves'; an "
                                          r"estimator's kind is one of \['batch', 'fork', 'leaf', 'tree'\]"):
        compose_cfg(["+arm=ra_flat", "profile=smoke", "estimator=t_kind_unknown"])
    with pytest.raises(ValueError, match="is of kind 'leaves'"):
        bind_estimator(ESTIMATORS["t_kind_unknown"], None)

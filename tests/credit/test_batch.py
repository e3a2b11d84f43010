"""Batch-level credit: an estimator that sees every group of one optimizer update (by hand, in the loop)."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_sweep.config import ConfigError
from rlvr_sweep.credit import ESTIMATORS, KINDS, BoundEstimator, grpo_batch_std
from rlvr_sweep.update import credit_update
from rlvr_sweep.update.question import ScoredGroup
from tests.helpers import compose_cfg


def test_grpo_batch_std_by_hand():
    """Groups (1, 0, 0, 0) and (1, 1, 1, 1): the batch's eight rewards have mean 5/8 and unbiased variance
    (5 * (3/8)^2 + 3 * (5/8)^2) / 7 = 15/56; the first group's centred rewards (3/4, -1/4, -1/4, -1/4) are divided
    by sqrt(15/56) + 1e-4; the homogeneous group stays 0 (its rewards equal their own mean)."""
    sigma = math.sqrt(15 / 56)
    a, b = grpo_batch_std([torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.ones(2, 2)], [None, None])
    torch.testing.assert_close(a, torch.tensor([[0.75, -0.25], [-0.25, -0.25]]) / (sigma + 1e-4))
    assert a[0, 0].item() == pytest.approx(1.44891, abs=1e-4)
    assert torch.equal(b, torch.zeros(2, 2))
    population = grpo_batch_std([torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.ones(2, 2)], [None, None],
                                std="population")[0]
    torch.testing.assert_close(population[0, 0], torch.tensor(0.75 / (math.sqrt(15 / 64) + 1e-4)))
    # one group alone: GRPO's baseline with that group's std, as the paper's single-question updates give
    alone = grpo_batch_std([torch.tensor([[1.0, 0.0], [0.0, 0.0]])], [None])[0]
    torch.testing.assert_close(alone.flatten(), torch.tensor([0.75, -0.25, -0.25, -0.25]) / (0.5 + 1e-4))


def _batch(fn, name: str) -> BoundEstimator:
    return BoundEstimator(name, KINDS["batch"], fn)


def _scored(rewards) -> ScoredGroup:
    r = torch.tensor(rewards)
    return ScoredGroup(group=_Group(r.shape), texts=[""] * r.numel(), rewards=r, correct=r.clone(),
                       credit=_batch(None, "none").group(r, None))


class _Group:
    """What `GroupShape.of` reads of a flat group."""

    def __init__(self, shape):
        leaf = type("Leaf", (), {"prefix_len": 0, "tokens": [1, 2]})
        self.pairs = [type("Pair", (), {"tau": 0, "leaves": [leaf] * shape[1]}) for _ in range(shape[0])]


def test_the_update_credits_its_groups_together_and_activity_stays_the_rewards():
    pending = [_scored([[1.0, 0.0], [0.0, 0.0]]), _scored([[1.0, 1.0], [1.0, 1.0]])]
    assert pending[0].active and not pending[1].active and pending[0].credit.cont.abs().sum() == 0
    seen = []

    def estimator(rewards, shapes):
        seen.append(([r.tolist() for r in rewards], [s.length.tolist() for s in shapes]))
        return [r * 10 for r in rewards]

    out = credit_update(pending, _batch(estimator, "x10"))
    assert seen == [([[[1.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]], [[[2, 2], [2, 2]], [[2, 2], [2, 2]]])]
    assert torch.equal(out[0].credit.cont, torch.tensor([[10.0, 0.0], [0.0, 0.0]]))
    assert torch.equal(out[1].credit.prefix, torch.full((2, 2), 10.0))  # given, though the group is inactive
    assert [s.active for s in out] == [True, False]


@pytest.mark.parametrize("result, message", [
    (lambda rewards: rewards[:1], "returned list of 1 items for 2 groups"),
    (lambda rewards: [r.flatten() for r in rewards], r"returned advantages of shape \(4,\) \(finite: True\) for a "
                                                     r"group of shape \(2, 2\)"),
    (lambda rewards: [r / 0 for r in rewards], r"returned advantages of shape \(2, 2\) \(finite: False\)"),
])
def test_a_batch_estimator_that_returns_the_wrong_thing_is_named(result, message):
    pending = [_scored([[1.0, 0.0], [0.0, 0.0]]), _scored([[0.0, 1.0], [1.0, 1.0]])]
    with pytest.raises(ValueError, match=f"batch estimator 'bad' {message}"):
        credit_update(pending, _batch(lambda rewards, shapes: result(rewards), "bad"))


def test_a_batch_estimator_credits_leaves_so_it_goes_where_leaf_credit_goes():
    assert ESTIMATORS["grpo_batch_std"].kind == "batch"
    cfg = compose_cfg(["+arm=stopped_tree", "profile=smoke", "estimator=grpo_batch_std",
                       "train.accumulate_questions=4", "train.steps=8"])
    assert cfg.estimator.name == "grpo_batch_std"
    with pytest.raises(ConfigError, match=r"estimator.name='grpo_batch_std' \(batch credit\) with sampler.name='cf_fork'"):
        compose_cfg(["+arm=cf_grpo", "profile=smoke", "estimator=grpo_batch_std"])
    with pytest.raises(ConfigError, match=r"estimator.beta=0.25: no chosen option reads it"):
        compose_cfg(["+arm=ra_flat", "profile=smoke", "estimator=grpo_batch_std", "estimator.beta=0.25"])


def test_a_run_calls_the_batch_estimator_once_per_update_with_all_its_groups(tmp_path):
    """A batch plugin that records what it is given: 8 steps in updates of 4 questions are 2 calls of 4 groups,
    each group the (K, B) rewards its step's ledger row holds."""
    from rlvr_sweep.run import run
    from rlvr_sweep.store import read_table

    calls = []

    @ESTIMATORS.register("t_batch_recorder", kind="batch")
    def recorder(rewards, shapes):
        calls.append([r.flatten().tolist() for r in rewards])
        return [r.to(torch.float32) - r.to(torch.float32).mean() for r in rewards]

    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "estimator=t_batch_recorder", "train.accumulate_questions=4",
                       "train.steps=8", "eval.limit=4", f"run.out_root={tmp_path}"])
    info = run(cfg)
    assert info["status"] == "finished" and info["totals"]["steps"] == 8
    steps = read_table(info["run_dir"], "steps").sort_values("step")
    assert [len(c) for c in calls] == [4, 4]
    assert [r for c in calls for r in c] == [list(r) for r in steps["rewards"]]
    assert steps["update"].tolist() == [False, False, False, True] * 2

"""The estimator registry: every credit rule, by kind (`estimator.name`; the kinds' conventions: `credit.kinds`).

    leaf / tree / fork   estimator(rewards (K, B), shape: GroupShape, **settings) -> advantages | TreeCredit | Credit
    batch                estimator([rewards (K, B)], [GroupShape], **settings) -> [advantages (K, B)]

`rewards` are a drawn group's (possibly gated) rewards, `shape` what credit needs of the group's
structure (each pair's shared prefix length tau, each leaf's prefix and total length, which pairs of a
fork group forked), `settings` the `estimator.*` settings the option declares it reads. A leaf estimator
gives one advantage per leaf (every token of the leaf gets it; any sampler), a tree estimator a pair's
shared prefix and its continuations apart (`TreeCredit`; the two-stage trees), a fork estimator the
counterfactual fork pairs' `Credit` with its ledger (`cf`: gates, coefficients, hinge pairs), and a batch
estimator every group of one optimizer update together (the `train.accumulate_questions` questions of an
update), as leaf credit. The framework makes each result a `Credit` (`kinds.BoundEstimator`): a leaf, tree or
batch group is active exactly when its rewards differ. A sampler lists the kinds that can credit its groups
(`rollout.SAMPLERS`). Register a new rule with `@ESTIMATORS.register(name, kind=..., reads=...)`
(`rlvr_sweep.extend`, docs/extending.md).

Built in: `grpo` (paper §1, baseline spec §7), `dr_grpo` (Dr. GRPO, the paper's reference [3]: R - Rbar,
no division by sigma; an option, not a paper arm), `tree_mean`, `clamped_prefix` (§4.3), the
counterfactual `cf_uncond`, `cf_rg`, `cf_pb` (§5.6 item 4), which credit the flat warmup groups of
their arms with leaf GRPO, and the batch estimator `grpo_batch_std` (not a paper arm).
"""

from __future__ import annotations

import torch

from rlvr_sweep.config.options import Registry
from rlvr_sweep.credit.counterfactual import cf_credit, loss_credit
from rlvr_sweep.credit.grpo import grpo_advantages, is_homogeneous
from rlvr_sweep.credit.kinds import ZERO_MASS, Credit, GroupShape
from rlvr_sweep.credit.tree import (
    TreeCredit,
    clamped_prefix_advantages,
    tree_mean_credit,
)

ESTIMATORS = Registry("estimator", group="estimator")


ON_ITS_BEHALF = {ZERO_MASS: None}  # read, and applied by the framework (`credit.kinds`)


@ESTIMATORS.register("grpo", kind="leaf", reads=("std", "eps", ZERO_MASS), arguments=ON_ITS_BEHALF)
def grpo(rewards, shape: GroupShape, *, std: str = "unbiased", eps: float = 1e-4) -> torch.Tensor:
    """Leaf GRPO: A_i = (R_i - Rbar) / (sigma_R + eps) on every token of leaf i."""
    return grpo_advantages(rewards.flatten(), eps=eps, std=std).view(rewards.shape)


@ESTIMATORS.register("dr_grpo", kind="leaf")
def dr_grpo(rewards, shape: GroupShape) -> torch.Tensor:
    """Dr. GRPO: A_i = R_i - Rbar, not divided by sigma_R (with the sequence-summed loss, the whole change).

    >>> dr_grpo(torch.tensor([[1., 0], [0, 0]]), None)   # Rbar = 0.25
    tensor([[ 0.7500, -0.2500],
            [-0.2500, -0.2500]])
    """
    r = rewards.to(torch.float32)
    return r - r.mean()


TREE_READS = ("beta", "alpha", "eps", "std", "zero_cont_token_mass")


@ESTIMATORS.register("tree_mean", kind="tree", per_token=True, reads=TREE_READS, arguments=ON_ITS_BEHALF)
def tree_mean(rewards, shape: GroupShape, *, beta: float, alpha: float = 0.5, eps: float = 1e-4,
              std: str = "unbiased") -> TreeCredit:
    """TreeRL prefix credit (§4.3): the pair's value V~ = (1 - beta) Vhat + beta M on its shared prefix."""
    return tree_mean_credit(rewards, shape.tau > 0, beta=beta, alpha=alpha, eps=eps, std=std)


@ESTIMATORS.register("clamped_prefix", kind="tree", per_token=True, reads=TREE_READS, arguments=ON_ITS_BEHALF)
def clamped_prefix(rewards, shape: GroupShape, *, beta: float, alpha: float = 0.5, eps: float = 1e-4,
                   std: str = "unbiased") -> TreeCredit:
    """One-sided prefix clamping (ablate_selective, §4.3 Proposition 3)."""
    return clamped_prefix_advantages(rewards, shape.tau > 0, beta=beta, alpha=alpha, eps=eps, std=std)


def _counterfactual(variant: str):
    def estimator(rewards, shape: GroupShape, *, alpha: float = 0.5, eps: float = 1e-4,
                  hinge_weight: float = 0.0, pb_loser: str = "balanced") -> Credit:
        if shape.forked is None:  # the flat warmup of a fork arm: leaf GRPO (unbiased std, as cf credit)
            adv = grpo(rewards, shape, eps=eps)
            return Credit(adv.clone(), adv, not is_homogeneous(rewards.flatten()))
        cf = cf_credit(rewards, shape.tau, shape.length, variant=variant, forked=shape.forked,
                       hinge_weight=hinge_weight, alpha=alpha, eps=eps, pb_loser=pb_loser)
        credit = loss_credit(cf)
        return Credit(credit.prefix, credit.cont, cf.metrics["active"], cf)

    estimator.__name__ = variant
    estimator.__doc__ = f"Counterfactual fork-pair credit {variant} (§5.6 item 4; credit.counterfactual)."
    return estimator


for _variant, _extra in (("cf_uncond", ()), ("cf_rg", ()), ("cf_pb", ("pb_loser",))):
    ESTIMATORS.register(_variant, kind="fork", per_token=True, reads=("alpha", "eps", "hinge_weight", *_extra))(
        _counterfactual(_variant))


@ESTIMATORS.register("grpo_batch_std", kind="batch", reads=("std", "eps"))
def grpo_batch_std(rewards: list[torch.Tensor], shapes: list[GroupShape], *, std: str = "unbiased",
                   eps: float = 1e-4) -> list[torch.Tensor]:
    """Group-mean baseline, batch-level scale: A_ij = (R_ij - mean_j R_i) / (sigma_batch + eps), sigma_batch the
    std of every reward of the update (TRL's GRPOTrainer with `scale_rewards="batch"`, after REINFORCE++'s
    batch normalisation; unbiased std and eps 1e-4 as there). A homogeneous group still gets 0.

    E.g. groups (1, 0) and (1, 1): sigma_batch = std(1, 0, 1, 1) = 0.5, so A = (+-0.5) / 0.5001 = +-0.9998
    for the first and (0, 0) for the second.
    """
    if std not in ("unbiased", "population"):
        raise ValueError(f"unknown estimator.std {std!r}")
    flat = torch.cat([r.flatten().to(torch.float32) for r in rewards])
    sigma = flat.std(correction=1 if std == "unbiased" else 0) if flat.numel() > 1 else flat.new_zeros(())
    return [(r.to(torch.float32) - r.to(torch.float32).mean()) / (sigma + eps) for r in rewards]

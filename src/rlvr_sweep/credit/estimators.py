"""The estimator registry: every credit rule behind one calling convention (`estimator.name`).

    estimator(rewards (K, B), shape: GroupShape, **settings) -> Credit

`rewards` are a drawn group's (possibly gated) rewards, `shape` what credit needs of the group's
structure (each pair's shared prefix length tau, each leaf's prefix and total length, which pairs of a
fork group forked), `settings` the `estimator.*` settings the option declares it reads. A `Credit`
is per-leaf prefix / continuation advantages on the sampled leaves (what the loss spreads over
tokens), whether the group is active (takes a gradient), and, for fork groups, the counterfactual
credit's ledger (`cf`: gates, coefficients, hinge pairs). Options declare their kind: `leaf` credit
(any group: every token of a leaf gets its leaf's advantage), `tree` (two-stage trees: prefix and
continuation apart) and `fork` (counterfactual fork pairs); a sampler lists the kinds that can credit
its groups (`rollout.SAMPLERS`). Register a new rule with `@ESTIMATORS.register(name, kind=..., reads=...)`.

A `batch` estimator credits every group of one optimizer update together (the `train.accumulate_questions`
questions of an update; with the paper's single-question updates, each group alone):

    estimator(rewards: [(K, B) per group], shapes: [GroupShape per group], **settings) -> [(K, B) advantages]

one advantage per leaf, as leaf credit (it goes with any sampler leaf credit goes with); a group is active
exactly when its rewards differ, as for leaf credit. The update calls it (`update.batch_credit`) once all
of its questions are scored.

Built in: `grpo` (paper §1, baseline spec §7), `dr_grpo` (Dr. GRPO, the paper's reference [3]: R - Rbar,
no division by sigma; an option, not a paper arm), `tree_mean`, `clamped_prefix` (§4.3), the
counterfactual `cf_uncond`, `cf_rg`, `cf_pb` (§5.6 item 4), which credit the flat warmup groups of
their arms with leaf GRPO, and the batch estimator `grpo_batch_std` (not a paper arm).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from rlvr_sweep.config.options import Registry
from rlvr_sweep.credit.counterfactual import CfCredit, cf_credit, loss_credit
from rlvr_sweep.credit.grpo import grpo_advantages, is_homogeneous
from rlvr_sweep.credit.tree import TreeCredit, clamped_prefix_advantages, tree_mean_credit, zero_cont_token_mass

ESTIMATORS = Registry("estimator", group="estimator")
KINDS = ("leaf", "tree", "fork", "batch")
CREDITED_AS = {"batch": "leaf"}  # the kind of credit a kind gives, for the samplers' `credits`


class GroupShape(NamedTuple):
    """What credit needs of a drawn group (K pairs of B leaves, row-major leaves)."""

    tau: torch.Tensor  # (K,) long: the pair's shared prefix length (0: none)
    prefix_len: torch.Tensor  # (K, B) long: each leaf's prefix tokens
    length: torch.Tensor  # (K, B) long: each leaf's completion tokens
    forked: torch.Tensor | None = None  # (K,) bool for a fork group (pairs that forked), else None

    @classmethod
    def of(cls, group) -> "GroupShape":
        """The shape of a `rollout.RolloutGroup` (a `ForkGroup` carries `forked`)."""
        pairs = group.pairs
        tau = torch.tensor([p.tau for p in pairs], dtype=torch.long)
        prefix = torch.tensor([[leaf.prefix_len for leaf in p.leaves] for p in pairs], dtype=torch.long)
        length = torch.tensor([[len(leaf.tokens) for leaf in p.leaves] for p in pairs], dtype=torch.long)
        forked = None
        if all(hasattr(p, "v0") for p in pairs) and pairs:
            forked = torch.tensor([p.category != "cf_no_fork" for p in pairs])
        return cls(tau, prefix, length, forked)


class Credit(NamedTuple):
    """One group's credit on its sampled leaves, (K, B) each."""

    prefix: torch.Tensor  # advantage on each leaf's prefix tokens [0, prefix_len)
    cont: torch.Tensor  # advantage on its continuation tokens [prefix_len, L)
    active: bool  # the group takes a gradient (fork groups: their own gates)
    cf: CfCredit | None = None  # a fork group's counterfactual credit: gates, coefficients, hinge pairs


def _tree_credit(credit: TreeCredit, rewards, shape: GroupShape, zero_mass: bool) -> Credit:
    if zero_mass:
        credit = zero_cont_token_mass(credit, shape.prefix_len, shape.length)
    return Credit(credit.prefix, credit.cont, not is_homogeneous(rewards.flatten()))


@ESTIMATORS.register("grpo", kind="leaf", reads=("std", "eps", "zero_cont_token_mass"))
def grpo(rewards, shape: GroupShape, *, std: str = "unbiased", eps: float = 1e-4,
         zero_cont_token_mass: bool = False) -> Credit:
    """Leaf GRPO: A_i = (R_i - Rbar) / (sigma_R + eps) on every token of leaf i."""
    adv = grpo_advantages(rewards.flatten(), eps=eps, std=std).view(rewards.shape)
    return _tree_credit(TreeCredit(adv.clone(), adv), rewards, shape, zero_cont_token_mass)


@ESTIMATORS.register("dr_grpo", kind="leaf")
def dr_grpo(rewards, shape: GroupShape) -> Credit:
    """Dr. GRPO: A_i = R_i - Rbar, not divided by sigma_R (with the sequence-summed loss, the whole change).

    >>> dr_grpo(torch.tensor([[1., 0], [0, 0]]), None).cont   # Rbar = 0.25
    tensor([[ 0.7500, -0.2500],
            [-0.2500, -0.2500]])
    """
    r = rewards.to(torch.float32)
    adv = r - r.mean()
    return Credit(adv.clone(), adv, not is_homogeneous(r.flatten()))


TREE_READS = ("beta", "alpha", "eps", "std", "zero_cont_token_mass")


@ESTIMATORS.register("tree_mean", kind="tree", per_token=True, reads=TREE_READS)
def tree_mean(rewards, shape: GroupShape, *, beta: float, alpha: float = 0.5, eps: float = 1e-4,
              std: str = "unbiased", zero_cont_token_mass: bool = False) -> Credit:
    """TreeRL prefix credit (§4.3): the pair's value V~ = (1 - beta) Vhat + beta M on its shared prefix."""
    credit = tree_mean_credit(rewards, shape.tau > 0, beta=beta, alpha=alpha, eps=eps, std=std)
    return _tree_credit(credit, rewards, shape, zero_cont_token_mass)


@ESTIMATORS.register("clamped_prefix", kind="tree", per_token=True, reads=TREE_READS)
def clamped_prefix(rewards, shape: GroupShape, *, beta: float, alpha: float = 0.5, eps: float = 1e-4,
                   std: str = "unbiased", zero_cont_token_mass: bool = False) -> Credit:
    """One-sided prefix clamping (ablate_selective, §4.3 Proposition 3)."""
    credit = clamped_prefix_advantages(rewards, shape.tau > 0, beta=beta, alpha=alpha, eps=eps, std=std)
    return _tree_credit(credit, rewards, shape, zero_cont_token_mass)


def _counterfactual(variant: str):
    def estimator(rewards, shape: GroupShape, *, alpha: float = 0.5, eps: float = 1e-4,
                  hinge_weight: float = 0.0, pb_loser: str = "balanced") -> Credit:
        if shape.forked is None:  # the flat warmup of a fork arm: leaf GRPO (unbiased std, as cf credit)
            return grpo(rewards, shape, eps=eps)
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

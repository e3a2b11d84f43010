"""Each estimator kind's calling convention, owned here: how an option of the kind is called and what the
framework makes of what it returns (CONVENTIONS #23).

    leaf   fn(rewards (K, B), shape, **settings) -> advantages (K, B)            one value on every token of a leaf
    tree   fn(rewards (K, B), shape, **settings) -> TreeCredit(prefix, cont)     a pair's shared prefix apart
    fork   fn(rewards (K, B), shape, **settings) -> Credit (with its `cf`)       counterfactual fork pairs
    batch  fn([rewards (K, B)], [shape], **settings) -> [advantages (K, B)]      every group of an update together

The framework, not the estimator, decides a leaf, tree or batch group's activity (its rewards differ) and
applies `estimator.zero_cont_token_mass` for a leaf or tree option that hands it over (reads it, with
`arguments={"zero_cont_token_mass": None}`, as the built-in ones do; an option that takes it as an argument
shifts its own credit). A fork estimator gates its own groups. A result of the wrong
type, shape, or with a non-finite value is refused, naming the estimator. A leaf or tree estimator written
before this convention, returning a `Credit`, is still taken, provided its activity is the framework's.

`bind_estimator(option, group_cfg)` is the run's estimator as one `BoundEstimator`: `group(rewards, shape)`
credits a group when it is scored (a batch estimator's groups get none until their update: zeros) and
`update(groups)` credits an update's groups (a batch estimator's work; the others' credit stands). The
training loop, `verify`'s replay and a plugin test call these two and never look at the kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch

from rlvr_sweep.credit.counterfactual import CfCredit
from rlvr_sweep.credit.grpo import is_homogeneous
from rlvr_sweep.credit.tree import TreeCredit, zero_cont_token_mass
from rlvr_sweep.plugins.errors import PluginOutputError


class EstimatorOutputError(PluginOutputError):
    """What an estimator returned is not what its kind returns (the wrong shape, a non-finite value, an activity
    the rewards contradict): the run stops, naming the estimator, and is recorded as failed."""


class EstimatorOutputTypeError(EstimatorOutputError, TypeError):
    """An estimator returned the wrong kind of thing (not numbers, not its kind's record)."""


ZERO_MASS = "zero_cont_token_mass"  # the setting the framework applies on a leaf or tree option's behalf


class GroupShape(NamedTuple):
    """What credit needs of a drawn group (K pairs of B leaves, row-major leaves)."""

    tau: torch.Tensor  # (K,) long: the pair's shared prefix length (0: none)
    prefix_len: torch.Tensor  # (K, B) long: each leaf's prefix tokens
    length: torch.Tensor  # (K, B) long: each leaf's completion tokens
    forked: torch.Tensor | None = None  # (K,) bool for a fork group (pairs that forked), else None

    @classmethod
    def of(cls, group) -> GroupShape:
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


class Kind:
    """One kind's convention; `credited_as`: the credit a sampler must accept for it (`sampler.credits`)."""

    name = ""
    credited_as = ""
    per_update = False  # credits every group of an update together, at the update
    returns = ""  # what the estimator returns, in words (errors and docs)

    def credit(self, result, rewards: torch.Tensor, shape, name: str):
        """The group's `Credit` from what the estimator returned."""
        raise NotImplementedError


def _advantages(value, rewards: torch.Tensor, name: str, what: str, who: str = "estimator",
                flat_ok: bool = False) -> torch.Tensor:
    """`value` as the group's (K, B) tensor: a float tensor kept as it is (bit for bit), numbers or an integer
    tensor made float32; the wrong type, shape or a non-finite value refused, naming the estimator. `flat_ok`: a
    flat (K * B,) tensor is viewed as (K, B) (an estimator written before `credit.kinds`, as the loop then took)."""
    if value is None or isinstance(value, (str, bytes, dict)):
        raise EstimatorOutputTypeError(f"{who} {name!r} returned {type(value).__name__} as its {what}: it returns "
                                       "numbers, one per rollout")
    try:
        adv = value if isinstance(value, torch.Tensor) else torch.as_tensor(value, dtype=torch.float32)
    except (TypeError, ValueError, RuntimeError) as err:
        raise EstimatorOutputTypeError(f"{who} {name!r} returned {type(value).__name__} as its {what}, not numbers "
                                       f"({err})") from None
    if not adv.is_floating_point():
        adv = adv.to(torch.float32)
    if flat_ok and adv.shape != rewards.shape and adv.numel() == rewards.numel():
        adv = adv.view(rewards.shape)
    if adv.shape != rewards.shape or not torch.isfinite(adv).all():
        raise EstimatorOutputError(f"{who} {name!r} returned {what} of shape {tuple(adv.shape)} (finite: "
                                   f"{bool(torch.isfinite(adv).all())}) for a group of shape {tuple(rewards.shape)}")
    return adv


def _legacy(result, rewards: torch.Tensor, name: str):
    """A `Credit` from a leaf or tree estimator written before this convention: taken if its activity agrees."""
    differ = not is_homogeneous(rewards.flatten())
    if bool(result.active) != differ:
        said = "active" if result.active else "inactive"
        raise EstimatorOutputError(f"estimator {name!r} called a group {said} whose rewards "
                                   f"{'differ' if differ else 'are all equal'} ({rewards.flatten().tolist()}): a leaf "
                                   "or tree group is active exactly when its rewards differ (return bare advantages "
                                   "and the framework decides)")
    return Credit(_advantages(result.prefix, rewards, name, "prefix credit", flat_ok=True),
                  _advantages(result.cont, rewards, name, "continuation credit", flat_ok=True), differ)


class Leaf(Kind):
    name, credited_as, returns = "leaf", "leaf", "a (K, B) tensor of advantages"

    def credit(self, result, rewards, shape, name):
        if isinstance(result, Credit):
            return _legacy(result, rewards, name)
        if isinstance(result, TreeCredit):
            raise EstimatorOutputTypeError(f"estimator {name!r} is registered as kind 'leaf' but returned a "
                                           f"TreeCredit: a leaf estimator returns {self.returns}; register it as kind "
                                           "'tree' to credit prefixes apart")
        adv = _advantages(result, rewards, name, "advantages")
        return Credit(adv.clone(), adv, not is_homogeneous(rewards.flatten()))


class Tree(Kind):
    name, credited_as, returns = "tree", "tree", "a TreeCredit(prefix (K, B), cont (K, B))"

    def credit(self, result, rewards, shape, name):
        if isinstance(result, Credit):
            return _legacy(result, rewards, name)
        if not isinstance(result, TreeCredit):
            raise EstimatorOutputTypeError(f"estimator {name!r} (kind 'tree') returned {type(result).__name__}: "
                                           f"it returns {self.returns}")
        return Credit(_advantages(result.prefix, rewards, name, "prefix credit"),
                      _advantages(result.cont, rewards, name, "continuation credit"), not is_homogeneous(rewards.flatten()))


class Fork(Kind):
    name, credited_as, returns = "fork", "fork", "a Credit with its counterfactual ledger (cf)"

    def credit(self, result, rewards, shape, name):
        if not isinstance(result, Credit):
            raise EstimatorOutputTypeError(f"estimator {name!r} (kind 'fork') returned {type(result).__name__}: "
                                           f"it returns {self.returns}")
        for what, value in (("prefix credit", result.prefix), ("continuation credit", result.cont)):
            _advantages(value, rewards, name, what)  # checked; the estimator's own tensors go on as they are
        return result


class Batch(Kind):
    name, credited_as, per_update, returns = "batch", "leaf", True, "one (K, B) tensor of advantages per group"


KINDS: dict[str, Kind] = {k.name: k for k in (Leaf(), Tree(), Fork(), Batch())}


def _until_the_update(rewards: torch.Tensor):
    """A batch-credited group's credit before its update: none yet; active exactly when its rewards differ."""
    zeros = torch.zeros_like(rewards, dtype=torch.float32)
    return Credit(zeros, zeros.clone(), not is_homogeneous(rewards.flatten()))


@dataclass(frozen=True)
class BoundEstimator:
    """The run's estimator with its settings: the one thing the loop and `verify` call to credit groups."""

    name: str
    kind: Kind
    fn: Callable  # the option's function with its settings filled in (`Option.bind`)
    zero_mass: bool = False  # estimator.zero_cont_token_mass, applied on the option's behalf

    @property
    def per_update(self) -> bool:
        return self.kind.per_update

    def group(self, rewards: torch.Tensor, shape):
        """One group's `Credit` when it is scored (a batch estimator's: zeros until its update)."""
        if self.kind.per_update:
            return _until_the_update(rewards)
        credit = self.kind.credit(self.fn(rewards, shape), rewards, shape, self.name)
        if self.zero_mass:
            shifted = zero_cont_token_mass(TreeCredit(credit.prefix, credit.cont), shape.prefix_len, shape.length)
            credit = credit._replace(prefix=shifted.prefix, cont=shifted.cont)
        return credit

    def update(self, rewards: list[torch.Tensor], shapes: list, credits: list) -> list:
        """The credit of an update's groups (`credits`: as `group` gave them): a batch estimator's, else as given."""
        if not self.kind.per_update:
            return list(credits)
        advantages = self.fn(rewards, shapes)
        if not isinstance(advantages, (list, tuple)) or len(advantages) != len(rewards):
            count = len(advantages) if hasattr(advantages, "__len__") else "?"
            raise EstimatorOutputError(f"batch estimator {self.name!r} returned {type(advantages).__name__} of {count} "
                                       f"items for {len(rewards)} groups: it must return {self.kind.returns}")
        out = []
        for r, adv in zip(rewards, advantages):
            adv = _advantages(adv, r, self.name, "advantages", "batch estimator").to(torch.float32)
            out.append(Credit(adv.clone(), adv, not is_homogeneous(r.flatten())))
        return out


def bind_estimator(option, group_cfg) -> BoundEstimator:
    """`option` (an `ESTIMATORS` entry) bound with the settings of `group_cfg` (the run's `estimator` group)."""
    if option.kind not in KINDS:
        raise ValueError(f"estimator {option.name!r} is of kind {option.kind!r}; the kinds are {sorted(KINDS)}")
    # applied on the option's behalf only where it hands the setting over (`arguments` maps it to None): an
    # option that takes it as an argument shifts its own credit
    hands_over = ZERO_MASS in option.arguments and option.arguments[ZERO_MASS] is None and option.kind in ("leaf", "tree")
    zero_mass = hands_over and ZERO_MASS in option.reads_of(group_cfg) and bool(getattr(group_cfg, ZERO_MASS, False))
    return BoundEstimator(option.name, KINDS[option.kind], option.bind(group_cfg), zero_mass)

"""What one training question contributes: rollouts, rewards, per-token credit, ledger rows.

The sampler draws a K x B `RolloutGroup` (flat: K*B independent leaves; trees: paper §4.2), the
run's reward (`reward.REWARDS`) scores every leaf, and its estimator (`credit.bind_estimator`) turns the
rewards into per-leaf prefix / continuation advantages (leaf GRPO: one advantage on every token;
tree credit: the shared prefix and the continuation apart, paper §4.3). `update.backward` then
accumulates this question's loss.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from rlvr_sweep.credit import BoundEstimator, Credit, GroupShape, cf_pair_rows
from rlvr_sweep.rollout import RolloutGroup


@dataclass
class ScoredGroup:
    group: RolloutGroup
    texts: list[str]  # one per leaf, (k, b) order, EOS kept
    rewards: torch.Tensor  # (K, B) possibly gated
    correct: torch.Tensor  # (K, B) ungated correctness
    credit: Credit  # per-leaf prefix / continuation advantages, (K, B) each; activity; a fork group's cf
    penalty: torch.Tensor | None = None  # (K, B) KL to the reference as a reward penalty (objective.kl_in=reward)

    @property
    def credited_rewards(self) -> torch.Tensor:
        """The rewards credit is computed from: the rewards, less the KL penalty where there is one."""
        return self.rewards if self.penalty is None else self.rewards - self.penalty

    @property
    def leaves(self):
        return self.group.leaves()

    @property
    def active(self) -> bool:
        """Rewards not all equal (fork groups: the counterfactual credit's own gates)."""
        return self.credit.active

    @property
    def cf(self):
        """A fork group's counterfactual credit (hinge pairs, ledger, metrics), else None."""
        return self.credit.cf


def score_group(group: RolloutGroup, decode, gold: str, *, reward, estimator: BoundEstimator,
                penalty=None) -> ScoredGroup:
    """Rewards and credit of one drawn group: `reward(texts, gold, tokens) -> (rewards, correct)` (`tokens`:
    each leaf's completion token ids) and the run's estimator (`credit.bind_estimator`; a batch estimator's
    groups wait for their update: `credit_update`), both bound from the run's config.
    `penalty(group) -> (K, B)`: KL to the reference as a reward penalty, taken from the rewards credit sees."""
    leaves = group.leaves()
    texts = [decode(leaf.tokens) for leaf in leaves]
    rewards, correct = reward(texts, gold, [list(leaf.tokens) for leaf in leaves])
    shape = (len(group.pairs), len(leaves) // len(group.pairs))
    r = torch.tensor(rewards).view(shape)
    if not torch.isfinite(r).all():
        raise ValueError(f"the run's reward gave this group rewards that are not all finite ({r.flatten().tolist()}): "
                         "a reward is a number for every rollout")
    kl = penalty(group).view(shape) if penalty is not None else None
    if kl is not None and not torch.isfinite(kl).all():
        raise ValueError(f"the KL penalty (objective.kl_in=reward) of this group is not finite ({kl.flatten().tolist()})")
    credited = r if kl is None else r - kl
    return ScoredGroup(group, texts, r, torch.tensor(correct).view(shape), estimator.group(credited, GroupShape.of(group)), kl)


def credit_update(scored: list[ScoredGroup], estimator: BoundEstimator) -> list[ScoredGroup]:
    """The groups of one update with the credit the run's estimator gives them there (a batch estimator credits
    them together, `credit.kinds`; the others' credit, given when each was scored, stands)."""
    credits = estimator.update([s.credited_rewards for s in scored], [GroupShape.of(s.group) for s in scored],
                               [s.credit for s in scored])
    return [dataclasses.replace(s, credit=c) for s, c in zip(scored, credits)]


def ledger_rows(step: int, scored: ScoredGroup) -> list[dict]:
    """One row per pair: prefix lengths, leaf lengths, rewards, category and token counts."""
    rows = []
    for pair, r, c in zip(scored.group.pairs, scored.rewards.tolist(), scored.correct.tolist()):
        l0, l1 = (len(leaf.tokens) for leaf in pair.leaves)
        rows.append({
            "step": step, "k": pair.k, "category": pair.category, "tau": pair.tau,
            "pl0": pair.leaves[0].prefix_len, "pl1": pair.leaves[1].prefix_len, "l0": l0, "l1": l1,
            "r0": r[0], "r1": r[1], "correct0": c[0], "correct1": c[1],
            "finished0": pair.leaves[0].finished, "finished1": pair.leaves[1].finished,
            "stage1_leaf_tokens": pair.stage1_leaf_tokens, "stage2_generated": pair.stage2_generated,
        })
    if scored.cf is not None:  # the fork (t*, v0 / v1, margins), raw and effective rewards, coefficients
        for row, fork in zip(rows, cf_pair_rows(scored.group.pairs, scored.cf)):
            row.update({key: value for key, value in fork.items() if key not in row})
    return rows

"""What one training question contributes: rollouts, rewards, per-token credit, ledger rows.

The sampler draws a K x B `RolloutGroup` (flat: K*B independent leaves; trees: paper §4.2), the
run's reward (`reward.REWARDS`) scores every leaf, and its estimator (`credit.ESTIMATORS`) turns the
rewards into per-leaf prefix / continuation advantages (leaf GRPO: one advantage on every token;
tree credit: the shared prefix and the continuation apart, paper §4.3). `backward` then accumulates
this question's policy-gradient loss.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from rlvr_sweep.credit import Credit, GroupShape, cf_pair_rows, fork_hinge_loss, is_homogeneous, token_advantages
from rlvr_sweep.rollout import RolloutGroup
from rlvr_sweep.update.losses import pack_sequences, policy_loss, token_logprobs


@dataclass
class ScoredGroup:
    group: RolloutGroup
    texts: list[str]  # one per leaf, (k, b) order, EOS kept
    rewards: torch.Tensor  # (K, B) possibly gated
    correct: torch.Tensor  # (K, B) ungated correctness
    credit: Credit  # per-leaf prefix / continuation advantages, (K, B) each; activity; a fork group's cf

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


def score_group(group: RolloutGroup, decode, gold: str, *, reward, estimator) -> ScoredGroup:
    """Rewards and credit of one drawn group: `reward(texts, gold, tokens) -> (rewards, correct)` (`tokens`:
    each leaf's completion token ids) and `estimator(rewards (K, B), GroupShape) -> Credit`, both bound from
    the run's config; `estimator=None` leaves the credit to the update (a batch estimator: `batch_credit`)."""
    leaves = group.leaves()
    texts = [decode(leaf.tokens) for leaf in leaves]
    rewards, correct = reward(texts, gold, [list(leaf.tokens) for leaf in leaves])
    shape = (len(group.pairs), len(leaves) // len(group.pairs))
    r = torch.tensor(rewards).view(shape)
    credit = estimator(r, GroupShape.of(group)) if estimator is not None else _until_the_update(r)
    return ScoredGroup(group, texts, r, torch.tensor(correct).view(shape), credit)


def _until_the_update(rewards: torch.Tensor) -> Credit:
    """A batch-credited group's credit before its update: none yet; active exactly when its rewards differ."""
    zeros = torch.zeros_like(rewards, dtype=torch.float32)
    return Credit(zeros, zeros.clone(), not is_homogeneous(rewards.flatten()))


def batch_credit(scored: list[ScoredGroup], estimator, name: str) -> list[ScoredGroup]:
    """Every group of one update credited together by a batch estimator (`credit.estimators`):
    `estimator([rewards (K, B)], [GroupShape]) -> [advantages (K, B)]`, one advantage per leaf; each group
    stays active exactly when its rewards differ. A result of the wrong number, shape or a non-finite value is
    refused, naming the estimator."""
    advantages = estimator([s.rewards for s in scored], [GroupShape.of(s.group) for s in scored])
    if not isinstance(advantages, (list, tuple)) or len(advantages) != len(scored):
        raise ValueError(f"batch estimator {name!r} returned {type(advantages).__name__} of "
                         f"{len(advantages) if hasattr(advantages, '__len__') else '?'} items for {len(scored)} groups: "
                         "it must return one (K, B) tensor of advantages per group")
    out = []
    for s, adv in zip(scored, advantages):
        adv = torch.as_tensor(adv, dtype=torch.float32)
        if adv.shape != s.rewards.shape or not torch.isfinite(adv).all():
            raise ValueError(f"batch estimator {name!r} returned advantages of shape {tuple(adv.shape)} (finite: "
                             f"{bool(torch.isfinite(adv).all())}) for a group of shape {tuple(s.rewards.shape)}")
        out.append(dataclasses.replace(s, credit=Credit(adv.clone(), adv, not is_homogeneous(s.rewards.flatten()))))
    return out


def backward(model, prompt: list[int], scored: ScoredGroup, *, pad_id: int, recipe: str, micro_batch: int | None,
             device, hinge_margin: float = 0.0) -> tuple[float, int, int]:
    """Accumulate d(loss)/d(theta) of one question into `.grad`. Returns (loss, bwd_out, bwd_full) tokens.

    A fork group's hinge pairs add `credit.fork_hinge_loss` (margin `hinge_margin`, the fork threshold)
    on the log-probs of their two fork tokens, computed in the chunk that holds both leaves."""
    leaves = scored.leaves
    n = len(leaves)
    pl = torch.tensor([leaf.prefix_len for leaf in leaves])
    lengths = torch.tensor([len(leaf.tokens) for leaf in leaves])
    width = int(lengths.max())
    token_adv = token_advantages(scored.credit, pl, lengths, width)  # (N, width): completion token j of leaf i
    per_sequence = recipe == "sum_then_scale"
    if per_sequence and not torch.equal(scored.credit.prefix, scored.credit.cont):
        raise ValueError("loss recipe sum_then_scale needs one advantage per sequence; tree credit needs scale_then_sum")
    start = len(prompt) - 1  # completion token j is predicted at position len(prompt) + j - 1
    total = 0.0
    chunk = micro_batch or n
    for lo in range(0, n, chunk):
        part = leaves[lo : lo + chunk]
        ids, attn, cmask = pack_sequences([prompt] * len(part), [leaf.tokens for leaf in part], pad_id)
        logps = token_logprobs(model, ids.to(device), attn.to(device), start)  # (n, L - 1 - start)
        mask = cmask[:, start:].to(device)
        if per_sequence:
            adv = scored.credit.cont.flatten()[lo : lo + chunk]  # (n,)
        else:
            adv = token_adv[lo : lo + chunk, : logps.shape[1]]  # the chunk's own width
        loss = policy_loss(logps, mask, adv, recipe, n)
        if scored.cf is not None and scored.cf.hinge:
            pairs = [h.leaves() + (h.position,) for h in scored.cf.hinge if lo <= h.leaves()[0] < lo + chunk]
            if any(not lo <= lose < lo + chunk for _, lose, _ in pairs):
                raise ValueError("a fork pair's two leaves fell into different backward chunks: use an even "
                                 "train.backward_micro_batch")
            win = torch.stack([logps[w - lo, t] for w, _, t in pairs]) if pairs else logps.new_zeros(0)
            lose = torch.stack([logps[x - lo, t] for _, x, t in pairs]) if pairs else logps.new_zeros(0)
            loss = loss + fork_hinge_loss(win, lose, weight=scored.cf.hinge_weight, margin=hinge_margin, group_size=n)
        loss.backward()
        total += float(loss.detach())
    out_tokens = int(lengths.sum())
    return total, out_tokens, out_tokens + len(prompt) * n


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

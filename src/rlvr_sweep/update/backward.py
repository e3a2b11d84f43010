"""One question's loss, backpropagated in chunks of rollouts (seed paper §1, §3.2; the objective issue).

`backward` accumulates d(loss)/d(theta) of one question's rollouts (all of them, or the ones a mini-batch
holds) into `.grad`. Under the paper's objective (`Objective.paper_loss`: `reinforce`, the paper's
aggregation, no KL term, nothing masked) it is `losses.policy_loss`, unchanged; otherwise each chunk's
per-token loss is the run's objective (`objectives`), plus beta * KL to the reference (`kl`) when that is
a loss term, masked and aggregated over the mini-batch (`aggregation`). A fork group's hinge pairs add
`credit.fork_hinge_loss` on the current policy's fork-token log-probs, in every pass (an auxiliary loss,
as verl applies its KL loss in every mini-batch). `sampled_logps` gives the behaviour policy's (or the
reference's) log-probs of a question's sampled tokens without gradient, and `Signals` gathers the health
signals that the passes see (entropy, KL to the reference, ratio and clip statistics).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields

import torch

from rlvr_sweep.credit import fork_hinge_loss, token_advantages
from rlvr_sweep.update.aggregation import PAPER_AGGREGATION, Normaliser, aggregate
from rlvr_sweep.update.kl import kl_estimate
from rlvr_sweep.update.losses import pack_sequences, policy_loss, token_logprobs
from rlvr_sweep.update.objectives import reinforce


@dataclass(frozen=True)
class Objective:
    """The run's objective, bound from its config once (`run.train`)."""

    name: str = "reinforce"
    surrogate: Callable = reinforce  # `objectives.OBJECTIVES[name]` with its settings
    kind: str = "on_policy"  # objectives.KINDS
    passes: int = 1  # mu: passes over the update's rollouts
    mini_batches: int = 1  # optimizer steps per pass
    aggregation: str = PAPER_AGGREGATION
    kl_beta: float = 0.0
    kl_estimator: str = "k3"
    kl_in: str = "loss"  # or "reward": a penalty on each rollout's reward, taken when its group is scored
    measure_kl: bool = False  # measure KL to the reference when it is not in the objective
    mask_truncated: bool = False  # DAPO's overlong filtering: rollouts that hit the cap leave the loss
    max_len: int = 0  # the rollout cap in this profile's tokens (`seq_mean_token_sum_norm`)

    @property
    def paper_loss(self) -> bool:
        """The paper's loss exactly: `losses.policy_loss`, with either loss recipe."""
        return (self.name == "reinforce" and self.aggregation == PAPER_AGGREGATION and not self.kl_in_loss
                and not self.mask_truncated)

    @property
    def kl_in_loss(self) -> bool:
        return self.kl_beta > 0 and self.kl_in == "loss"

    @property
    def kl_in_reward(self) -> bool:
        return self.kl_beta > 0 and self.kl_in == "reward"

    @property
    def needs_reference(self) -> bool:  # the rule of `run.memory.needs_reference`, on the bound objective
        return self.kl_beta > 0 or self.measure_kl

    @property
    def needs_behaviour(self) -> bool:
        """The behaviour log-probs differ from the current policy's in some optimizer step: more than one."""
        return self.kind == "ratio" and self.passes * self.mini_batches > 1


PAPER_OBJECTIVE = Objective()
KL_SIGNAL = "k3"  # the KL to the reference a run records, whichever estimator its loss uses
GAP_BAND = 0.1  # an engine-trainer ratio outside [0.9, 1.1] is counted (what TRL's and verl's guards flag)


@dataclass
class Signals:
    """Health signals over one update: entropy and KL to the reference in its first pass (the behaviour
    policy, on every token its backward saw), ratio and clip statistics over all its passes."""

    tokens: int = 0
    entropy_sum: float = 0.0
    kl_tokens: int = 0
    kl_sum: float = 0.0
    ratio_tokens: int = 0
    ratio_sum: float = 0.0
    ratio_min: float = math.inf
    ratio_max: float = -math.inf
    clipped_low: int = 0
    clipped_high: int = 0
    gap_tokens: int = 0  # the engine's log-probs against the trainer's (first pass, flat groups)
    gap_abs_sum: float = 0.0
    gap_max: float = 0.0
    gap_outside: int = 0
    first_pass: bool = field(default=True, repr=False)

    def observe(self, mask, entropy=None, kl=None, ratio=None, low=None, high=None) -> None:
        n = int(mask.sum())
        if self.first_pass and entropy is not None:
            self.tokens += n
            self.entropy_sum += float((entropy * mask).sum())
        if self.first_pass and kl is not None:
            self.kl_tokens += n
            self.kl_sum += float((kl * mask).sum())
        if ratio is not None and n:
            self.ratio_tokens += n
            self.ratio_sum += float((ratio * mask).sum())
            self.ratio_min = min(self.ratio_min, float(ratio[mask].min()))
            self.ratio_max = max(self.ratio_max, float(ratio[mask].max()))
            self.clipped_low += int((low & mask).sum()) if low is not None else 0  # an objective without a clip
            self.clipped_high += int((high & mask).sum()) if high is not None else 0

    def observe_gap(self, mask, trainer: torch.Tensor, engine: torch.Tensor) -> None:
        """The engine's raw log-prob of each sampled token against the trainer's recompute of the same policy
        (the behaviour log-probs, taken before the update's first optimizer step; first pass only): |gap|, and
        the tokens whose ratio exp(trainer - engine) leaves [1 - GAP_BAND, 1 + GAP_BAND]."""
        if not self.first_pass:
            return
        gap = (trainer - engine)[mask]
        if not gap.numel():
            return
        self.gap_tokens += gap.numel()
        self.gap_abs_sum += float(gap.abs().sum())
        self.gap_max = max(self.gap_max, float(gap.abs().max()))
        self.gap_outside += int(((gap.exp() - 1).abs() > GAP_BAND).sum())

    def merge(self, parts: list[dict]) -> None:
        """These signals become the sum of several ranks' (each a dict of this class's fields)."""
        for f in fields(self):
            if f.name == "first_pass":
                continue
            values = [p[f.name] for p in parts]
            pick = min if f.name == "ratio_min" else max if f.name in ("ratio_max", "gap_max") else sum
            setattr(self, f.name, pick(values))

    def row(self) -> dict:
        """The step ledger's columns (NaN where nothing was measured)."""
        nan = math.nan
        r = self.ratio_tokens
        return {"entropy": self.entropy_sum / self.tokens if self.tokens else nan,
                "kl_ref": self.kl_sum / self.kl_tokens if self.kl_tokens else nan,
                "ratio_mean": self.ratio_sum / r if r else nan, "ratio_min": self.ratio_min if r else nan,
                "ratio_max": self.ratio_max if r else nan, "clip_low": self.clipped_low / r if r else nan,
                "clip_high": self.clipped_high / r if r else nan,
                "logp_gap_mean": self.gap_abs_sum / self.gap_tokens if self.gap_tokens else nan,
                "logp_gap_max": self.gap_max if self.gap_tokens else nan,
                "logp_gap_outside": self.gap_outside / self.gap_tokens if self.gap_tokens else nan}


def in_loss(scored, objective: Objective) -> list[bool]:
    """Per leaf: whether its tokens enter the loss (DAPO's overlong filtering drops those cut at the cap)."""
    return [leaf.finished or not objective.mask_truncated for leaf in scored.leaves]


def sampled_logps(model, prompt: list[int], scored, *, pad_id: int, micro_batch: int | None, device,
                  rows: Sequence[int] | None = None) -> torch.Tensor:
    """(N, width) float32 log-probs of every leaf's sampled completion tokens under `model`, no gradient
    (0 past a leaf's end): the behaviour policy's before an update's first pass, or the reference's. `rows`: only
    these leaves (a rank's share, in the chunks its backward takes, so the two forwards round alike); the rest 0."""
    leaves = scored.leaves
    index = list(range(len(leaves))) if rows is None else list(rows)
    width = max(len(leaf.tokens) for leaf in leaves)
    out = torch.zeros(len(leaves), width)
    start, chunk = len(prompt) - 1, micro_batch or max(len(index), 1)
    with torch.no_grad():
        for lo in range(0, len(index), chunk):
            part = index[lo : lo + chunk]
            ids, attn, cmask = pack_sequences([prompt] * len(part), [leaves[i].tokens for i in part], pad_id)
            logps = token_logprobs(model, ids.to(device), attn.to(device), start).float().cpu()
            logps = logps * cmask[:, start:]
            out[part, : logps.shape[1]] = logps
    return out


def backward(model, prompt: list[int], scored, *, pad_id: int, recipe: str, micro_batch: int | None, device,
             hinge_margin: float = 0.0, objective: Objective = PAPER_OBJECTIVE, leaves: Sequence[int] | None = None,
             norm: Normaliser | None = None, old: torch.Tensor | None = None, ref: torch.Tensor | None = None,
             signals: Signals | None = None, sums: dict[int, float] | None = None,
             rounds: int | None = None) -> tuple[float, int, int]:
    """Accumulate d(loss)/d(theta) of one question into `.grad`. Returns (loss, bwd_out, bwd_full) tokens.

    `leaves`: the indices of the rollouts to backpropagate (a mini-batch's share; all by default); `norm`: the
    mini-batch's normaliser (objectives other than the paper's); `old` / `ref`: (N, width) behaviour and
    reference log-probs (`sampled_logps`; None: the current policy's, detached, and no KL); `sums`: filled with
    {rollout: the sum of its sampled tokens' log-probs under the current policy} (the behaviour policy's, on
    an update's first pass when `old` is None); `rounds`: over several ranks, the chunks every rank runs for this
    question: after its own, a rank runs zero-weight ones on the group's first rollout (their forward and backward
    join the ranks' weight gathers and gradient reductions, and add 0)."""
    every = scored.leaves
    n = len(every)
    index = list(range(n)) if leaves is None else list(leaves)
    pl = torch.tensor([leaf.prefix_len for leaf in every])
    lengths = torch.tensor([len(leaf.tokens) for leaf in every])
    token_adv = token_advantages(scored.credit, pl, lengths, int(lengths.max()))  # (N, width): token j of leaf i
    per_sequence = recipe == "sum_then_scale"
    if per_sequence and not torch.equal(scored.credit.prefix, scored.credit.cont):
        raise ValueError("loss recipe sum_then_scale needs one advantage per sequence; tree credit needs scale_then_sum")
    kept = in_loss(scored, objective)
    keep = torch.tensor(kept)
    if not objective.paper_loss and norm is None:
        norm = Normaliser.of(objective.aggregation, [len(every[i].tokens) for i in index], [kept[i] for i in index],
                             objective.max_len)
    start = len(prompt) - 1  # completion token j is predicted at position len(prompt) + j - 1
    total = 0.0
    chunk = micro_batch or max(len(index), 1)
    for lo in range(0, len(index), chunk):
        rows = index[lo : lo + chunk]
        ids, attn, cmask = pack_sequences([prompt] * len(rows), [every[i].tokens for i in rows], pad_id)
        measured = signals is not None and signals.first_pass  # entropy is the first pass's, where it is gathered
        out = token_logprobs(model, ids.to(device), attn.to(device), start, with_entropy=measured)
        logps, entropy = out if measured else (out, None)
        mask = cmask[:, start:].to(device)
        width = logps.shape[1]  # the chunk's own width
        kl = None
        if objective.paper_loss:
            adv = scored.credit.cont.flatten()[rows] if per_sequence else token_adv[rows, :width]
            loss = policy_loss(logps, mask, adv, recipe, n)
            surrogate = None
        else:
            mask = mask & keep[rows].to(device)[:, None]
            adv = token_adv[rows, :width].to(device=device, dtype=logps.dtype)
            behaviour = old[rows, :width].to(device) if old is not None else logps.detach()
            surrogate = objective.surrogate(logps, behaviour, adv, mask)
            token_loss = surrogate.loss
            if ref is not None:
                reference = ref[rows, :width].to(device)
                if objective.kl_in_loss:
                    token_loss = token_loss + objective.kl_beta * kl_estimate(logps, reference, objective.kl_estimator)
                kl = kl_estimate(logps.detach(), reference, KL_SIGNAL)
            loss = aggregate(token_loss, mask, n, norm)
        if objective.paper_loss and ref is not None:  # measured only
            kl = kl_estimate(logps.detach(), ref[rows, :width].to(device), KL_SIGNAL)
        if scored.cf is not None and scored.cf.hinge:
            loss = loss + _hinge(scored, logps, rows, hinge_margin, n)
        if sums is not None:
            sums.update(zip(rows, (logps.detach().float() * cmask[:, start:].to(device)).sum(1).tolist()))
        engine = [every[i].logprobs for i in rows]
        if signals is not None and all(e is not None for e in engine):  # the policy that sampled them, as trained
            trainer = old[rows, :width].to(device=device, dtype=logps.dtype) if old is not None else logps.detach()
            signals.observe_gap(mask, trainer, _padded(engine, width, logps))
        if signals is not None:
            s = surrogate
            signals.observe(mask, entropy, kl, *((s.ratio, s.clipped_low, s.clipped_high)
                                                  if s is not None and s.ratio is not None else ()))
        loss.backward()
        total += float(loss.detach())
    ran = -(-len(index) // chunk)  # the chunks above
    for _ in range(max(0, (rounds or 0) - ran)):
        ids, attn, _ = pack_sequences([prompt], [every[0].tokens], pad_id)
        (token_logprobs(model, ids.to(device), attn.to(device), start).sum() * 0).backward()
    out_tokens = int(lengths[index].sum())
    return total, out_tokens, out_tokens + len(prompt) * len(index)


def _padded(rows: list[list[float]], width: int, like: torch.Tensor) -> torch.Tensor:
    """(N, width) from ragged per-token values (0 past each row's end)."""
    out = torch.zeros(len(rows), width, dtype=like.dtype)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row[:width], dtype=like.dtype)
    return out.to(like.device)


def _hinge(scored, logps: torch.Tensor, rows: list[int], margin: float, group_size: int) -> torch.Tensor:
    """The fork hinge of the pairs whose two leaves this chunk holds (both, or neither: refused otherwise)."""
    at = {leaf: row for row, leaf in enumerate(rows)}
    pairs = [h.leaves() + (h.position,) for h in scored.cf.hinge if h.leaves()[0] in at]
    if any(lose not in at for _, lose, _ in pairs) or any(
            h.leaves()[1] in at and h.leaves()[0] not in at for h in scored.cf.hinge):
        raise ValueError("a fork pair's two leaves fell into different backward chunks or mini-batches: use an even "
                         "train.backward_micro_batch and an even number of rollouts per mini-batch")
    win = torch.stack([logps[at[w], t] for w, _, t in pairs]) if pairs else logps.new_zeros(0)
    lose = torch.stack([logps[at[x], t] for _, x, t in pairs]) if pairs else logps.new_zeros(0)
    return fork_hinge_loss(win, lose, weight=scored.cf.hinge_weight, margin=margin, group_size=group_size)

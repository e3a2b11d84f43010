"""The objective registry: what the sampled tokens' log-probs and advantages become, token by token.

    objective(logp (N, T), old (N, T), advantages (N, T), mask (N, T) bool, **settings) -> Surrogate

`logp` are the current policy's log-probs of the sampled completion tokens (with gradient), `old` the
behaviour policy's (the policy that sampled them, taken once before the update's first pass; with one
pass over one mini-batch, `logp.detach()`), `advantages` the credit on each token (a leaf's advantage
on every token of it, or tree / fork credit per token). A `Surrogate` is the per-token loss, before
aggregation (`update.aggregation`: which tokens and sequences it is averaged over), plus what the
health signals read: the importance ratio and which tokens the clip held at its low / high bound.

- `reinforce` (seed paper §1, the default of all nineteen arms): -A log pi. No ratio, so one on-policy pass.
- `ppo_clip` (Schulman et al. 2017, "Proximal Policy Optimization Algorithms", eq. 7; GRPO as DeepSeekMath
  publishes it, Shao et al. 2024 eq. 3): -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A), r = pi / pi_old
  per token (TRL's `loss_type` grpo / dapo, verl's `vanilla`); eps_low != eps_high is DAPO's clip-higher
  (Yu et al. 2025 §3.1); `clip_dual` c > 1 caps a negative-advantage token's loss at -c A (the dual clip of
  Ye et al. 2020, "Mastering Complex Control in MOBA Games with Deep RL"; verl's `clip_ratio_c`).
  Unlike verl, the log-ratio is not clamped to [-20, 20] (TRL does not clamp either).
- `gspo` (Zheng et al. 2025, "Group Sequence Policy Optimization", eqs. 5, 7 and the GSPO-token form of
  eqs. 13-14): one ratio per sequence, s_i = exp(mean_t log(pi_t / old_t)), clipped at [1 - eps_low,
  1 + eps_high]; on each token its value is s_i and its gradient s_i grad log pi_t (verl's `gspo`), so with
  the mean over a sequence's tokens (`aggregation=seq_mean_token_mean`, what verl always uses for it) the
  gradient is GSPO's, and per-token advantages (tree credit) are allowed. verl's clamp of the log-ratio at
  10 is not applied.
- `cispo` (MiniMax 2025, "MiniMax-M1", eqs. 4-5): -sg(clip(r, 1 - eps_low, 1 + eps_high)) A log pi: every
  token keeps a gradient, its importance weight clipped and held constant (verl's `cispo`; TRL's caps r at
  an absolute `epsilon_high` from above only, which is clip_low = 1, clip_high = epsilon_high - 1 here).

Register another with `@OBJECTIVES.register(name, kind="ratio", reads=(...))` (`kind="on_policy"`: an
objective with no importance ratio, which takes one pass only).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from rlvr_sweep.config.options import Registry

OBJECTIVES = Registry("objective", group="objective")
KINDS = ("on_policy", "ratio")  # on_policy: no importance ratio, one pass; ratio: pi / pi_old, any passes
CLIP_READS = ("clip_low", "clip_high")


class Surrogate(NamedTuple):
    """One chunk's per-token objective, (N, T) each."""

    loss: torch.Tensor  # per-token loss, to be masked and aggregated (with gradient)
    ratio: torch.Tensor | None = None  # pi / pi_old (detached); None for an on-policy objective
    clipped_low: torch.Tensor | None = None  # bool: the clip held the token at its low bound (no gradient there)
    clipped_high: torch.Tensor | None = None  # bool: ... at its high bound


@OBJECTIVES.register("reinforce", kind="on_policy")
def reinforce(logp, old, advantages, mask) -> Surrogate:
    """The paper's policy gradient: -A log pi on every completion token (seed paper §1).

    >>> reinforce(torch.log(torch.tensor([[0.5]])), None, torch.tensor([[2.0]]), None).loss
    tensor([[1.3863]])
    """
    return Surrogate((-logp) * advantages)


@OBJECTIVES.register("ppo_clip", kind="ratio", reads=(*CLIP_READS, "clip_dual"))
def ppo_clip(logp, old, advantages, mask, *, clip_low: float = 0.2, clip_high: float = 0.2,
             clip_dual: float | None = None) -> Surrogate:
    """-min(r A, clip(r, 1 - clip_low, 1 + clip_high) A) per token; with `clip_dual` c, a negative-advantage
    token's loss is at most -c A.

    E.g. r = 1.5, A = +1, eps = 0.2: -min(1.5, 1.2) = -1.2, clipped high (no gradient); r = 0.5, A = -1:
    -min(-0.5, -0.8) = 0.8, clipped low; with c = 3 and r = 4, A = -1: min(max(4, 1.2), 3) = 3."""
    ratio = torch.exp(logp - old)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    if clip_dual is not None:
        loss = torch.where(advantages < 0, torch.minimum(loss, -advantages * clip_dual), loss)
    r = ratio.detach()
    return Surrogate(loss, r, (r < 1 - clip_low) & (advantages < 0), (r > 1 + clip_high) & (advantages > 0))


@OBJECTIVES.register("gspo", kind="ratio", reads=CLIP_READS)
def gspo(logp, old, advantages, mask, *, clip_low: float = 3e-4, clip_high: float = 4e-4) -> Surrogate:
    """GSPO-token: s_i,t = sg(s_i) pi_t / sg(pi_t), s_i = exp(sum_t mask (log pi_t - log old_t) / |y_i|);
    -min(s A, clip(s, 1 -+ eps) A) per token. E.g. token log-ratios (0.2, 0.4) give s = exp(0.3) = 1.3499."""
    maskf = mask.to(logp.dtype)
    seq_log_ratio = ((logp.detach() - old) * maskf).sum(-1) / maskf.sum(-1).clamp(min=1)  # (N,)
    ratio = torch.exp(logp - logp.detach() + seq_log_ratio.unsqueeze(-1))  # value s_i, gradient s_i grad log pi_t
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    r = ratio.detach()
    return Surrogate(torch.maximum(unclipped, clipped), r, (r < 1 - clip_low) & (advantages < 0),
                     (r > 1 + clip_high) & (advantages > 0))


@OBJECTIVES.register("cispo", kind="ratio", reads=CLIP_READS)
def cispo(logp, old, advantages, mask, *, clip_low: float = 1.0, clip_high: float = 4.0) -> Surrogate:
    """-sg(clip(r, 1 - clip_low, 1 + clip_high)) A log pi per token: the weight is clipped, the gradient kept.
    clip_low = 1 (a bound of 0) leaves the weight unbounded below, as MiniMax-M1 does.
    E.g. r = 2, A = 1, eps_high = 0.28: weight 1.28, loss -1.28 log pi."""
    r = torch.exp(logp.detach() - old)
    weight = torch.clamp(r, 1 - clip_low, 1 + clip_high)
    return Surrogate(-weight * advantages * logp, r, r < 1 - clip_low, r > 1 + clip_high)

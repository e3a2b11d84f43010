"""Two credit rules of one's own: GRPO with clipped advantages, and REINFORCE++-baseline's batch credit."""

from __future__ import annotations

import torch

from rlvr_sweep.extend import ESTIMATORS, above, grpo_advantages, param


@ESTIMATORS.register("grpo_clip", kind="leaf", reads=("eps",),
                     params={"clip": param(1.0, above(0), doc="the largest |advantage| kept")})
def grpo_clip(rewards: torch.Tensor, shape, *, eps: float, clip: float) -> torch.Tensor:
    """GRPO's (R - mean) / (std + eps), clipped to [-clip, clip]: one rare success no longer outweighs its group."""
    return grpo_advantages(rewards.flatten(), eps=eps).clamp(-clip, clip).view(rewards.shape)


@ESTIMATORS.register("reinforce_pp_baseline", kind="batch", reads=("eps",))
def reinforce_pp_baseline(rewards: list[torch.Tensor], shapes, *, eps: float) -> list[torch.Tensor]:
    """REINFORCE++-baseline (Hu et al. 2025): each reward minus its group's mean, then the update's advantages
    whitened together (divided by their std over every group of the update)."""
    centred = [r.to(torch.float32) - r.to(torch.float32).mean() for r in rewards]
    flat = torch.cat([c.flatten() for c in centred])
    sigma = flat.std() if flat.numel() > 1 else flat.new_zeros(())
    return [c / (sigma + eps) for c in centred]

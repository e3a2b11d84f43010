"""Leaf GRPO advantages: a pure function from a group's rewards to one advantage per rollout.

`grpo` is leaf-level GRPO (seed paper §1, baseline spec §7): A_i = (r_i - mean(r)) / (std(r) + eps)
with the unbiased (N-1) std by default. A homogeneous group (all rewards equal) gets exactly 0.

>>> grpo_advantages(torch.tensor([1., 0, 0, 0, 0, 0, 0, 0]))[:2]   # k=1 of G=8
tensor([ 2.4742, -0.3535])
"""

from __future__ import annotations

import torch

from rlvr_sweep.config import STD_KINDS


def is_homogeneous(rewards: torch.Tensor) -> bool:
    """True when every reward in the group is equal (sigma_R = 0, so every A_i = 0)."""
    return bool((rewards == rewards[0]).all())


def grpo_advantages(rewards: torch.Tensor, eps: float = 1e-4, std: str = "unbiased") -> torch.Tensor:
    """(G,) rewards -> (G,) float32 advantages (r - mean) / (std + eps)."""
    if std not in STD_KINDS:
        raise ValueError(f"unknown estimator.std {std!r}; valid: {list(STD_KINDS)}")
    r = rewards.to(torch.float32)
    if is_homogeneous(r):
        return torch.zeros_like(r)
    sigma = r.std(correction=1 if std == "unbiased" else 0)
    return (r - r.mean()) / (sigma + eps)


"""AdamW and what a step does on a homogeneous group (seed paper §3.2).

- `full_backward`: run the (zero-weighted) backward anyway, clip, then step (Arm 1).
- `skip`: no backward and no step (`--skip-zero-var`, Arm 3); AdamW's moments, bias correction and
  weight decay then miss that step.
- `zero_grad`: `param.grad = zeros_like(param)`, then `optimizer.step()`: the exact AdamW state
  update in O(P) elementwise work, with no transformer backward (Arms 2, 4+). On a fixed trajectory
  it is bitwise identical to `full_backward`.
Active groups always backward, clip (the pre-clip norm is logged) and step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

HOMOGENEOUS_STEPS = ("full_backward", "skip", "zero_grad")


@dataclass
class UpdateOutcome:
    action: str  # "backward_step" | "zero_grad_step" | "skipped"
    grad_norm: float  # pre-clip global norm; 0.0 for a zero-grad step, NaN when skipped
    backward_ran: bool


def make_adamw(params, lr: float, betas, eps: float, weight_decay: float) -> torch.optim.AdamW:
    return torch.optim.AdamW(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)


def apply_update(
    params: list[torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
    *,
    active: bool,
    homogeneous_step: str,
    backward: Callable[[], None],
    grad_clip: float,
) -> UpdateOutcome:
    """One optimizer update; `backward` accumulates the group's gradient into `.grad`."""
    if homogeneous_step not in HOMOGENEOUS_STEPS:
        raise ValueError(f"unknown optimizer_step {homogeneous_step!r}; valid: {list(HOMOGENEOUS_STEPS)}")
    if active or homogeneous_step == "full_backward":
        optimizer.zero_grad(set_to_none=True)
        backward()
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm=grad_clip)
        optimizer.step()
        return UpdateOutcome("backward_step", float(norm), True)
    if homogeneous_step == "zero_grad":
        for p in params:
            p.grad = torch.zeros_like(p)
        optimizer.step()
        return UpdateOutcome("zero_grad_step", 0.0, False)  # the gradient is exactly zero
    return UpdateOutcome("skipped", math.nan, False)

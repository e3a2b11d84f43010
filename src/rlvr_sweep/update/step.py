"""One optimizer update over the questions accumulated since the last one (seed paper §1, §3.2).

Each question's loss is backpropagated into `.grad` (`question.backward`; on a homogeneous group only
under `full_backward`); with `unit_question_grad` each question's gradient is scaled to unit norm
before they are summed (Arm 11); `optim.apply_update` then clips and steps, or does what the
homogeneous-group rule says.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr_sweep.update.optim import UpdateOutcome, apply_update
from rlvr_sweep.update.question import ScoredGroup, backward


@dataclass(frozen=True)
class UpdateSettings:
    homogeneous_step: str  # optimizer_step.name
    recipe: str  # train.loss_recipe
    micro_batch: int | None  # train.backward_micro_batch
    unit_question_grad: bool
    grad_clip: float
    hinge_margin: float  # the fork threshold: the hinge's margin on fork groups
    pad_id: int
    device: object


@dataclass
class Update:
    outcome: UpdateOutcome
    loss: float  # NaN when no backward ran
    bwd_out: int  # completion tokens backpropagated
    bwd_full: int  # completion + prompt tokens backpropagated


def update_step(model, params: list, optimizer, pending: list[tuple[list[int], ScoredGroup]],
                s: UpdateSettings) -> Update:
    """The update of `pending` ((prompt, scored group) per accumulated question)."""
    model.train()
    totals = {"loss": 0.0, "out": 0, "full": 0}

    def accumulate() -> None:
        summed = [torch.zeros_like(p) for p in params] if s.unit_question_grad else None
        for prompt, scored in pending:
            if not scored.active and s.homogeneous_step != "full_backward":
                continue  # all-zero advantages: only full_backward pays for that backward
            if summed is not None:
                for p in params:
                    p.grad = None
            loss, out, full = backward(model, prompt, scored, pad_id=s.pad_id, recipe=s.recipe,
                                       micro_batch=s.micro_batch, device=s.device, hinge_margin=s.hinge_margin)
            totals["loss"] += loss
            totals["out"] += out
            totals["full"] += full
            if summed is not None:  # this question's gradient, scaled to unit norm, into the sum
                norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
                scale = 1.0 / float(norm) if norm > 0 else 0.0
                for acc, p in zip(summed, params):
                    if p.grad is not None:
                        acc.add_(p.grad, alpha=scale)
        if summed is not None:
            for acc, p in zip(summed, params):
                p.grad = acc

    outcome = apply_update(params, optimizer, active=any(scored.active for _, scored in pending),
                           homogeneous_step=s.homogeneous_step, backward=accumulate, grad_clip=s.grad_clip)
    return Update(outcome, totals["loss"] if outcome.backward_ran else float("nan"), totals["out"], totals["full"])

"""One optimizer update over the questions accumulated since the last one (seed paper §1, §3.2).

Each question's loss is backpropagated into `.grad` (`backward.backward`; on a homogeneous group only
under `full_backward`); with `unit_question_grad` each question's gradient is scaled to unit norm
before they are summed (Arm 11); `optim.apply_update` then clips and steps, or does what the
homogeneous-group rule says. The paper makes one such step per update. A ratio objective may make
`passes` (mu) passes over the update's rollouts in `mini_batches` contiguous mini-batches each, one
optimizer step per mini-batch, with the behaviour policy's log-probs taken once before the first pass
(as TRL's `num_iterations` and verl's `ppo_epochs` do; the mini-batches keep the rollouts' order in every
pass, as TRL reuses its buffered batches). The reference policy's log-probs, for KL, are taken once too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch

from rlvr_sweep.update.aggregation import Normaliser
from rlvr_sweep.update.backward import PAPER_OBJECTIVE, Objective, Signals, backward, in_loss, sampled_logps
from rlvr_sweep.rollout.seeding import share
from rlvr_sweep.update.optim import UpdateOutcome, apply_update
from rlvr_sweep.update.question import ScoredGroup


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
    objective: Objective = PAPER_OBJECTIVE
    reference: object = None  # the frozen initial policy, when the objective needs one
    peers: object = None  # the run's ranks (`run.ranks.World`) when it has several: each backpropagates its share


@dataclass
class Update:
    outcome: UpdateOutcome  # the first optimizer step's (the on-policy gradient's norm)
    loss: float  # the first pass's loss; NaN when no backward ran
    bwd_out: int  # completion tokens backpropagated, over every pass
    bwd_full: int  # completion + prompt tokens backpropagated, over every pass
    optimizer_steps: int = 1  # steps the optimizer took (passes x mini-batches that stepped)
    signals: dict = field(default_factory=dict)  # `backward.Signals.row()`
    behaviour: list = field(default_factory=list)  # per question, per rollout: its sampled tokens' log-prob sum
    # under the behaviour policy as the objective's ratio saw it (None: no backward saw the rollout)


def mini_batches(pending: list[tuple[list[int], ScoredGroup]], count: int) -> list[list[tuple[int, list[int]]]]:
    """The update's rollouts, question after question, in `count` contiguous mini-batches of equal size:
    [[(question, [its leaves in this mini-batch])]]."""
    flat = [(q, i) for q, (_, scored) in enumerate(pending) for i in range(len(scored.leaves))]
    if len(flat) % count:
        raise ValueError(f"objective.mini_batches={count} does not divide the update's {len(flat)} rollouts")
    size = len(flat) // count
    out = []
    for lo in range(0, len(flat), size):
        batch: dict[int, list[int]] = {}
        for q, i in flat[lo : lo + size]:
            batch.setdefault(q, []).append(i)
        out.append(list(batch.items()))
    return out


def shared(rows: list[int], micro_batch: int | None, peers) -> tuple[list[int], int | None]:
    """This rank's share of a question's `rows` in a mini-batch (a contiguous block, pairs kept together), and the
    backward chunks every rank runs for it (the most any rank needs: a rank with fewer runs zero-weight ones, as
    each chunk's forward and backward gather and reduce across the ranks); (rows, None) on one process."""
    if peers is None:
        return rows, None
    blocks = [[rows[i] for i in share(len(rows), r, peers.size, multiple=2)] for r in range(peers.size)]
    rounds = max((-(-len(b) // (micro_batch or len(b))) if b else 0) for b in blocks)
    return blocks[peers.rank], rounds


def gathered(peers, totals: dict, signals: Signals, behaviour: list[dict]) -> tuple[dict, list[dict]]:
    """The update's loss, token counts, health signals and behaviour log-prob sums over every rank's share
    (`signals` merged in place)."""
    mine = {"totals": totals, "signals": {f.name: getattr(signals, f.name) for f in fields(Signals)},
            "behaviour": [{str(k): v for k, v in b.items()} for b in behaviour]}
    every = peers.exchange(mine)
    signals.merge([e["signals"] for e in every])
    merged = [{} for _ in behaviour]
    for e in every:
        for into, got in zip(merged, e["behaviour"]):
            into.update({int(k): v for k, v in got.items()})
    return {k: sum(e["totals"][k] for e in every) for k in totals}, merged


def _sums_of(logps: torch.Tensor, rows: list[int]) -> dict[int, float]:
    """{rollout: the sum of its sampled tokens' log-probs} of `rows`, from (N, width) log-probs."""
    sums = logps.sum(1).tolist()
    return {i: sums[i] for i in rows}


def update_step(model, params: list, optimizer, pending: list[tuple[list[int], ScoredGroup]],
                s: UpdateSettings) -> Update:
    """The update of `pending` ((prompt, scored group) per accumulated question)."""
    model.train()
    obj = s.objective
    counted = [scored.active or s.homogeneous_step == "full_backward" for _, scored in pending]  # backpropagated
    logps = dict(pad_id=s.pad_id, micro_batch=s.micro_batch, device=s.device)
    mine = [[] for _ in pending]  # the rollouts this rank backpropagates, over every mini-batch (one process: all)
    for batch in mini_batches(pending, obj.mini_batches):
        for q, rows in batch:
            mine[q].extend(shared(rows, s.micro_batch, s.peers)[0])
    old = [sampled_logps(model, prompt, scored, rows=rows, **logps) if c and obj.needs_behaviour else None
           for (prompt, scored), c, rows in zip(pending, counted, mine)]
    ref = [sampled_logps(s.reference, prompt, scored, rows=rows, **logps) if c and obj.needs_reference else None
           for (prompt, scored), c, rows in zip(pending, counted, mine)]
    kept = [in_loss(scored, obj) for _, scored in pending]
    # else: the first pass's, filled by its backward
    behaviour = [_sums_of(o, rows) if o is not None else {} for o, rows in zip(old, mine)]
    signals = Signals()
    totals = {"loss": 0.0, "out": 0, "full": 0}
    outcomes = []
    for step_pass in range(obj.passes):
        signals.first_pass = step_pass == 0
        for batch in mini_batches(pending, obj.mini_batches):
            norm = Normaliser.of(obj.aggregation, [len(pending[q][1].leaves[i].tokens) for q, rows in batch for i in rows],
                                 [kept[q][i] for q, rows in batch for i in rows], obj.max_len)

            def accumulate(batch=batch, norm=norm, first=step_pass == 0) -> None:
                summed = [torch.zeros_like(p) for p in params] if s.unit_question_grad else None
                for q, rows in batch:
                    prompt, scored = pending[q]
                    if not counted[q]:
                        continue  # all-zero advantages: only full_backward pays for that backward
                    if summed is not None:
                        for p in params:
                            p.grad = None
                    mine, rounds = shared(rows, s.micro_batch, s.peers)
                    loss, out, full = backward(
                        model, prompt, scored, pad_id=s.pad_id, recipe=s.recipe, micro_batch=s.micro_batch,
                        device=s.device, hinge_margin=s.hinge_margin, objective=obj,
                        leaves=None if len(mine) == len(scored.leaves) else mine, norm=norm, old=old[q], ref=ref[q],
                        signals=signals, sums=behaviour[q] if first and old[q] is None else None, rounds=rounds)
                    totals["loss"] += loss if first else 0.0
                    totals["out"] += out
                    totals["full"] += full
                    if summed is not None:  # this question's gradient, scaled to unit norm, into the sum
                        norm_q = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
                        scale = 1.0 / float(norm_q) if norm_q > 0 else 0.0
                        for acc, p in zip(summed, params):
                            if p.grad is not None:
                                acc.add_(p.grad, alpha=scale)
                if summed is not None:
                    for acc, p in zip(summed, params):
                        p.grad = acc

            outcomes.append(apply_update(params, optimizer, active=any(pending[q][1].active for q, _ in batch),
                                         homogeneous_step=s.homogeneous_step, backward=accumulate,
                                         grad_clip=s.grad_clip))
    if s.peers is not None:  # each rank saw its share: the update's sums are the ranks' together
        totals, behaviour = gathered(s.peers, totals, signals, behaviour)
    first = outcomes[0]
    ran = any(o.backward_ran for o in outcomes)
    return Update(first, totals["loss"] if ran else float("nan"), totals["out"], totals["full"],
                  sum(o.action != "skipped" for o in outcomes), signals.row(),
                  [[b.get(i) for i in range(len(scored.leaves))] for b, (_, scored) in zip(behaviour, pending)])

"""Single-checkpoint sampled read-out, k draws per item (seed paper §5.5, Table 4 "Single-Seed").

`evaluate_sampled` draws ``settings.draws`` (3) responses per item at temperature 0.6 and top-p 0.9
(the rollout kernel's nucleus rule, `rollout.engine`) at the read-out cap, in the read-out's batches.
The draws come from one generator seeded ``sample_seed_offset + seed`` (``1000 + seed``): the paper's
``torch.manual_seed(1000 + seed)``; a fresh generator with that seed yields the same stream as the
seeded default one, without touching the process's global RNG (a training run reads out its base
policy before it trains). Draw ``d`` decodes every item before draw ``d + 1`` starts.

One `grades` row per item and draw, with ``readout`` (the `eval.name`), ``draw``, ``draws``,
``sample_seed``, ``temperature`` and ``top_p`` columns; ``index`` is the item's position, so the k rows
of an item share it. Voting over the draws
(Rand / MaxLen / MDL-Maj@3, Pass@3) is analysis' job (`analysis.table4`).
"""

from __future__ import annotations

import torch

from rlvr_sweep.data import encode_prompts
from rlvr_sweep.evaluation.greedy import grade_row
from rlvr_sweep.evaluation.readout import ReadoutSettings
from rlvr_sweep.evaluation.schedule import decode_readout
from rlvr_sweep.reward import grading

__all__ = ["evaluate_sampled"]


def evaluate_sampled(policy, rows: list[dict], *, benchmark: str, phase: str, settings: ReadoutSettings,
                     grade=grading.grade, on_batch=None, readout: str = "sampled_k3") -> list[dict]:
    """Grade ``settings.draws`` sampled responses per item; rows item-major within each draw."""
    prompts = encode_prompts(policy.tokenizer, [r["problem"] for r in rows], settings.prompt)
    seed = settings.sample_seed_offset + settings.seed
    generator = torch.Generator(device=policy.device).manual_seed(seed)
    report = _whole_items(on_batch, settings.draws) if on_batch else None
    graded = []
    for draw in range(settings.draws):
        gen = decode_readout(policy.model, prompts, schedule=settings.schedule, engine=settings.engine,
                             batch_size=settings.batch_size, max_new_tokens=settings.max_new_tokens,
                             eos_id=policy.eos_id, pad_id=policy.pad_id, temperature=settings.temperature,
                             top_p=settings.top_p, generator=generator, slots=settings.slots, on_batch=report)
        for i, (row, tokens, length, finished) in enumerate(zip(rows, gen.tokens, gen.lengths, gen.finished)):
            graded.append({**grade_row(policy, row, tokens, length, finished, benchmark=benchmark, phase=phase,
                                       index=i, grade=grade, settings=settings),
                           "readout": readout, "draw": draw, "draws": settings.draws, "sample_seed": seed,
                           "temperature": settings.temperature, "top_p": settings.top_p})
    return graded


def _whole_items(on_batch, draws: int):
    """Progress in whole items: each draw covers every item once, so `draws` responses are one item
    (reported when its last response is decoded, never as a fraction such as 199.99999999999994/200)."""
    responses = reported = 0

    def report(decoded: int, tokens: int) -> None:
        nonlocal responses, reported
        responses += decoded
        whole = responses // draws
        on_batch(whole - reported, tokens)
        reported = whole

    return report

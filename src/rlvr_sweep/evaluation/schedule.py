"""Read-out scheduling: which items decode together (the `eval.schedule` config option).

The paper reads out in left-padded batches of 32 in dataset order, and batch composition changes bf16
rounding (it flips 4.7% of grades), so that stays the default and any other schedule is part of a
run's identity. Schedules:

- ``fixed``: consecutive batches of ``batch_size`` in dataset order (the paper's).
- ``length_sorted``: batches of ``batch_size`` over items sorted by prompt length, longest first
  (less prefill padding; each batch still runs until its longest response ends).
- ``refill``: ``slots`` rows decode together and a finished row takes the next item at once
  (`rollout.refill.generate_refill`; with the vllm engine, vLLM's own continuous batching), so the
  2,048-token tail is paid about once instead of once per batch. Items are admitted longest prompt
  first.

`decode_readout` runs a schedule with a named engine and returns one `Generation` whose rows are in
the items' order, so the caller grades row ``i`` against item ``i`` whatever the schedule.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlvr_sweep.config.options import Option, Registry
from rlvr_sweep.rollout import Generation
from rlvr_sweep.rollout.engines import ENGINES
from rlvr_sweep.rollout.refill import generate_refill

__all__ = ["SCHEDULES", "fixed_batches", "length_sorted_batches", "merge_generations", "decode_readout"]

SCHEDULES = Registry("read-out schedule", group="eval", key="schedule")


def _refill_engine(cfg) -> list[str]:
    if cfg.model.engine in ("static", "vllm"):
        return []
    return [f"eval.schedule=refill needs model.engine=static or vllm (model.engine={cfg.model.engine!r} decodes "
            "fixed batches only)"]


def fixed_batches(n_items: int, batch_size: int) -> list[list[int]]:
    """Consecutive item indices, ``batch_size`` at a time: ``fixed_batches(5, 2) == [[0, 1], [2, 3], [4]]``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return [list(range(lo, min(lo + batch_size, n_items))) for lo in range(0, n_items, batch_size)]


def length_sorted_order(prompt_lens: list[int]) -> list[int]:
    """Item indices by prompt length, longest first; equal lengths keep dataset order."""
    return sorted(range(len(prompt_lens)), key=lambda i: (-prompt_lens[i], i))


def length_sorted_batches(prompt_lens: list[int], batch_size: int) -> list[list[int]]:
    """Batches of ``batch_size`` over items sorted by prompt length, longest first.

    >>> length_sorted_batches([3, 9, 5, 9], 2)
    [[1, 3], [2, 0]]
    """
    order = length_sorted_order(prompt_lens)
    return [[order[i] for i in batch] for batch in fixed_batches(len(order), batch_size)]


def merge_generations(parts: list[tuple[list[int], Generation]], n_items: int) -> Generation:
    """One `Generation` in item order from ``(item indices, generation of those items)`` parts.

    Per-row fields are placed at their items' indices; token counts add up.
    """
    tokens: list = [None] * n_items
    lengths: list = [None] * n_items
    finished: list = [None] * n_items
    with_margins = all(g.margins is not None for _, g in parts) and bool(parts)
    margins: list | None = [None] * n_items if with_margins else None
    top1: list | None = [None] * n_items if with_margins and all(g.top1 is not None for _, g in parts) else None
    top2: list | None = [None] * n_items if top1 is not None else None
    for items, gen in parts:
        for j, i in enumerate(items):
            tokens[i], lengths[i], finished[i] = gen.tokens[j], gen.lengths[j], gen.finished[j]
            if margins is not None:
                margins[i] = gen.margins[j]
            if top1 is not None:
                top1[i], top2[i] = gen.top1[j], gen.top2[j]
    if any(t is None for t in tokens):
        raise ValueError("the parts do not cover every item")
    return Generation(
        tokens=tokens, lengths=lengths, finished=finished, margins=margins,
        prefill_tokens=sum(g.prefill_tokens for _, g in parts),
        padded_prefill_tokens=sum(g.padded_prefill_tokens for _, g in parts),
        generated_tokens=sum(g.generated_tokens for _, g in parts),
        untrimmed_steps=sum(g.untrimmed_steps for _, g in parts),
        top1=top1, top2=top2,
    )


def decode_readout(
    model: torch.nn.Module,
    prompts: list[list[int]],
    *,
    schedule: str,
    engine: str,
    batch_size: int,
    max_new_tokens: int,
    eos_id: int | None,
    pad_id: int,
    temperature: float | None = 0.0,
    top_p: float | None = 1.0,
    generator: torch.Generator | None = None,
    record_margins: bool = False,
    slots: int | None = None,
    on_batch: Callable[[int, int], None] | None = None,
) -> Generation:
    """Decode every prompt under ``schedule`` with the engine named ``engine``; rows in item order.

    ``batch_size`` is the batch of ``fixed`` / ``length_sorted``; ``slots`` the number of rows of
    ``refill`` (default ``batch_size``). ``refill`` runs on the static engine's decode step (engine
    ``static``) or on vLLM's scheduler (engine ``vllm``); the reference engine has no refill.
    ``on_batch(items, generated_tokens)`` is called after every decoded batch (progress reports).
    """
    report = on_batch or (lambda items, tokens: None)
    SCHEDULES[schedule]  # an unknown name fails here, with the valid ones
    generate = ENGINES[engine].fn
    kwargs = dict(max_new_tokens=max_new_tokens, eos_id=eos_id, pad_id=pad_id, temperature=temperature,
                  top_p=top_p, generator=generator, record_margins=record_margins)
    n = len(prompts)
    if schedule == "refill":
        order = length_sorted_order([len(p) for p in prompts])
        ordered = [prompts[i] for i in order]
        if engine == "vllm":  # vLLM refills its own batch; hand it everything at once
            gen = generate(model, ordered, **kwargs)
        elif engine == "static":
            gen = generate_refill(model, ordered, slots=slots or batch_size, **kwargs)
        else:
            raise ValueError(f"eval schedule 'refill' needs engine 'static' or 'vllm', got {engine!r}")
        report(n, gen.generated_tokens)
        return merge_generations([(order, gen)], n)
    batches = fixed_batches(n, batch_size) if schedule == "fixed" else length_sorted_batches(
        [len(p) for p in prompts], batch_size)
    parts = []
    for items in batches:
        parts.append((items, generate(model, [prompts[i] for i in items], **kwargs)))
        report(len(items), parts[-1][1].generated_tokens)
    return merge_generations(parts, n)


SCHEDULES.add(Option("fixed", fixed_batches, doc="batches of batch_size in dataset order (the paper's)"))
SCHEDULES.add(Option("length_sorted", length_sorted_batches, doc="batches over items sorted by prompt length"))
SCHEDULES.add(Option("refill", generate_refill, reads=("slots",), check=_refill_engine,
                     doc="slots rows decoding at once, a finished row refilled at once"))

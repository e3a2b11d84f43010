"""Greedy continuations of spliced prefixes in length-sorted batches (seed paper §5.6 items 2-3).

The paper's `run_batched_prefixes`: rows are sorted by prompt + prefix length and decoded in batches
(64), and every row of a batch runs the same ``max_gen = max(min_new, cap - max_j K_j)`` greedy steps,
so row ``i`` with a prefix of ``K_i`` tokens stops at its *effective cap*

    eff_cap_i = K_i + max_gen = cap - max_j K_j + K_i  (<= cap while the floor does not bind)

tokens of response (prefix + continuation). Every row records its ``eff_cap`` and batch; MDL counts a
branch as completed when ``15 <= L < eff_cap``. A prefix that already ends with EOS is a complete
response and decodes nothing (it still belongs to its batch, as in the paper's batches).
`plan_batches` is the pure part (tested by hand); `continue_prefixes` decodes with a named engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rlvr_sweep.evaluation.schedule import length_sorted_batches
from rlvr_sweep.rollout.engines import ENGINES

__all__ = ["Batch", "Continuations", "plan_batches", "continue_prefixes"]


@dataclass(frozen=True)
class Batch:
    items: list[int]  # row indices, longest prompt + prefix first
    max_new: int  # continuation steps every row of the batch runs
    eff_caps: list[int]  # per row of `items`: K_i + max_new


def plan_batches(total_lens: list[int], prefix_lens: list[int], *, batch_size: int, cap: int,
                 min_new: int) -> list[Batch]:
    """Batches over rows sorted by prompt + prefix length (longest first) and each row's effective cap.

    >>> plan = plan_batches([10, 30, 20], [0, 20, 5], batch_size=2, cap=100, min_new=8)
    >>> [(b.items, b.max_new, b.eff_caps) for b in plan]
    [([1, 2], 80, [100, 85]), ([0], 100, [100])]
    """
    batches = []
    for items in length_sorted_batches(total_lens, batch_size):
        max_new = max(min_new, cap - max(prefix_lens[i] for i in items))
        batches.append(Batch(items, max_new, [prefix_lens[i] + max_new for i in items]))
    return batches


@dataclass
class Continuations:
    tokens: list[list[int]]  # prefix + continuation (EOS kept when finished)
    lengths: list[int]  # response tokens, EOS not counted
    finished: list[bool]  # stopped on EOS within eff_cap
    eff_cap: list[int]
    batch: list[int]  # index of the batch the row was decoded in
    generated_tokens: int  # continuation tokens decoded (the test-time cost)


def continue_prefixes(model: torch.nn.Module, prompts: list[list[int]], prefixes: list[list[int]], *, cap: int,
                      batch_size: int, min_new: int, engine: str, eos_id: int, pad_id: int,
                      on_batch: Callable[[int, int], None] | None = None) -> Continuations:
    """Greedy continuation of ``prompts[i] + prefixes[i]`` for every row, in rows' order."""
    n = len(prompts)
    generate = ENGINES[engine].fn
    report = on_batch or (lambda items, tokens: None)
    tokens: list = [None] * n
    finished: list = [None] * n
    eff_cap: list = [None] * n
    batch_of: list = [None] * n
    generated = 0
    plan = plan_batches([len(p) + len(q) for p, q in zip(prompts, prefixes)], [len(q) for q in prefixes],
                        batch_size=batch_size, cap=cap, min_new=min_new)
    for b, batch in enumerate(plan):
        done = [i for i in batch.items if prefixes[i] and prefixes[i][-1] == eos_id]
        todo = [i for i in batch.items if i not in done]
        for i in done:
            tokens[i], finished[i] = list(prefixes[i]), True
        if todo:
            gen = generate(model, [prompts[i] + prefixes[i] for i in todo], max_new_tokens=batch.max_new,
                           eos_id=eos_id, pad_id=pad_id, temperature=0.0, top_p=1.0)
            generated += gen.generated_tokens
            for i, toks, fin in zip(todo, gen.tokens, gen.finished):
                tokens[i], finished[i] = list(prefixes[i]) + list(toks), bool(fin)
        for i, limit in zip(batch.items, batch.eff_caps):
            eff_cap[i], batch_of[i] = limit, b
        report(len(batch.items), gen.generated_tokens if todo else 0)
    lengths = [len(t) - int(f) for t, f in zip(tokens, finished)]
    return Continuations(tokens, lengths, finished, eff_cap, batch_of, generated)

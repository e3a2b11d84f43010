"""Continuous refill: decode many prompts through a fixed number of slots, refilling freed slots.

A read-out of 950 items at 2,048 tokens in fixed batches of 32 pays the longest row of every batch
(~2,048 steps each when one item hits the cap); here ``slots`` rows decode together and a row that
finishes (EOS or the cap) is replaced by the next waiting prompt, so the 2,048-step tail is paid
about once (performance_anchors.md, "Custom loop" row of the read-out table).

Mechanics, on the fast engine's pieces (`prefill`, `KVCache`, `StepRunner`):
- admission: the waiting prompts for the free slots are prefilled together (left-padded among
  themselves) and their keys/values copied into those cache rows at positions ``[0, P)``; each row
  then writes at its own column (``write_pos``) with its own RoPE position.
- each iteration samples one token for every row (`engine.sample_next_token`, the same rules as
  every engine), runs one decode step, and every `harvest_every` iterations (or at once when a row
  reaches the cap, which the host knows without asking) reads the finished flags back and collects
  the finished rows; new prompts are admitted on those every-`harvest_every` boundaries only, so
  they are prefilled in groups. A finished row waits at most ``harvest_every - 1`` steps.
- idle slots (nothing left to admit) attend to one cache position so their logits stay finite.

Results are per prompt, in the input order; tokens, EOS handling and margins follow `Generation`.
What differs from fixed batches is only the batch composition each token is computed in, which
changes bf16 rounding (the paper: batch composition flips 4.7% of bf16 grades); in float32 on a CPU
the tokens equal the reference engine's. ``untrimmed_steps`` counts slot-steps (``slots`` per
iteration, busy or not), the analogue of the reference's ``batch x steps``, so ``generated_tokens /
untrimmed_steps`` is again the decode utilisation; ``padded_prefill_tokens`` sums ``rows x width``
over admissions.
"""

from __future__ import annotations

import torch

from rlvr_sweep.rollout.engine import Generation, nothing_to_decode, sample_next_token
from rlvr_sweep.rollout.prefill import prefill
from rlvr_sweep.rollout.static_engine import session_for

__all__ = ["generate_refill", "HARVEST_EVERY"]

HARVEST_EVERY = 16


class _Slots:
    """Host and device state of the decode rows."""

    def __init__(self, rows: int, max_new_tokens: int, device, pad_id: int, record: bool):
        self.item = [-1] * rows  # prompt index held by each row, -1 when idle
        self.width = [0] * rows  # padded prompt width at admission (first generated token's column)
        self.sampled = [0] * rows  # tokens sampled since admission (host count, no sync needed)
        self.tokens = torch.full((rows,), pad_id, dtype=torch.long, device=device)  # fed to the next step
        self.rope_pos = torch.zeros(rows, dtype=torch.long, device=device)
        self.write_pos = torch.zeros(rows, dtype=torch.long, device=device)
        self.advance = torch.zeros(rows, dtype=torch.long, device=device)  # 1 on admitted rows
        self.live = torch.zeros(rows, dtype=torch.bool, device=device)  # admitted and no EOS yet
        self.count = torch.zeros(rows, dtype=torch.long, device=device)  # tokens recorded (EOS included)
        self.out = torch.full((rows, max_new_tokens), pad_id, dtype=torch.long, device=device)
        self.margins = torch.zeros((rows, max_new_tokens), dtype=torch.float32, device=device) if record else None
        self.top = torch.zeros((rows, max_new_tokens, 2), dtype=torch.long, device=device) if record else None

    def active(self) -> list[int]:
        return [s for s, i in enumerate(self.item) if i >= 0]


def generate_refill(
    model: torch.nn.Module,
    prompts: list[list[int]],
    *,
    slots: int,
    max_new_tokens: int | list[int],
    eos_id: int | None,
    pad_id: int,
    temperature: float | None,
    top_p: float | None,
    generator: torch.Generator | None = None,
    record_margins: bool = False,
    harvest_every: int = HARVEST_EVERY,
) -> Generation:
    """Decode every prompt (admitted in the given order) through ``slots`` refilled rows.

    Same per-prompt results as :func:`rlvr_sweep.rollout.engine.generate` (see the module docstring
    for what differs); needs a Qwen3-shaped model (`qwen3_step.UnsupportedModel` otherwise).
    ``max_new_tokens`` may be one cap per prompt (e.g. the paper's per-row ``eff_cap`` of prefix probes).
    """
    if slots < 1 or harvest_every < 1:
        raise ValueError(f"slots and harvest_every must be >= 1, got {slots} and {harvest_every}")
    n_items = len(prompts)
    caps = [max_new_tokens] * n_items if isinstance(max_new_tokens, int) else list(max_new_tokens)
    if len(caps) != n_items:
        raise ValueError(f"{len(caps)} caps for {n_items} prompts")
    done = nothing_to_decode(prompts, max(caps, default=0), record_margins)
    if done is not None:
        return done
    prompt_lens = [len(p) for p in prompts]
    if min(caps) <= 0:
        raise ValueError("per-prompt caps must all be >= 1 (or all <= 0)")
    widest = max(caps)

    session = session_for(model)
    device = session.weights.device
    used = min(slots, n_items)
    rows = session.rows_for(used)
    check_eos = eos_id is not None and eos_id >= 0
    results: list[tuple | None] = [None] * n_items
    waiting = iter(range(n_items))
    pending = n_items
    padded_prefill = 0
    row_steps = 0

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            session.refresh()
            runner = session.runner(rows, max(prompt_lens) + widest)
            cache = runner.cache
            st = _Slots(rows, widest, device, pad_id, record_margins)

            def admit(free: list[int], logits: torch.Tensor | None, fill: bool = True) -> torch.Tensor:
                """Fill ``free`` rows with waiting prompts (none when not ``fill``) and make the rest
                inert; returns the logits with the new rows' prefill logits in place."""
                nonlocal pending, padded_prefill
                take = min(len(free), pending) if fill else 0
                if take:
                    items = [next(waiting) for _ in range(take)]
                    pending -= take
                    idx_list = free[:take]
                    idx = torch.tensor(idx_list, device=device)
                    pre = prefill(model, [prompts[i] for i in items], pad_id, device)
                    padded_prefill += take * pre.width
                    cache.load_prefill(pre.layer_kv, idx, pre.prompt_mask)
                    st.rope_pos.index_copy_(0, idx, pre.next_pos)
                    st.write_pos.index_fill_(0, idx, pre.width)
                    st.advance.index_fill_(0, idx, 1)
                    st.live.index_fill_(0, idx, True)
                    st.count.index_fill_(0, idx, 0)
                    for s, i in zip(idx_list, items):
                        st.item[s], st.width[s], st.sampled[s] = i, pre.width, 0
                    if logits is None:
                        logits = torch.zeros((rows, pre.logits.shape[-1]), dtype=pre.logits.dtype, device=device)
                    else:
                        logits = logits.clone()  # the step's output buffer is reused by the next replay
                    logits.index_copy_(0, idx, pre.logits)
                idle = free[take:]
                if idle:  # inert: attend to column 0 only, write there, never advance
                    idx = torch.tensor(idle, device=device)
                    cache.bias.index_fill_(0, idx, float("-inf"))
                    cache.open_position(idx, 0)
                    for t in (st.rope_pos, st.write_pos, st.advance, st.count):
                        t.index_fill_(0, idx, 0)
                    st.live.index_fill_(0, idx, False)
                return logits

            def harvest(done: list[int]) -> None:
                idx = torch.tensor(done, device=device)
                counts = st.count[idx].tolist()
                live = st.live[idx].tolist()
                toks = st.out[idx].tolist()
                margins = st.margins[idx].tolist() if st.margins is not None else None
                tops = st.top[idx].tolist() if st.top is not None else None
                for j, s in enumerate(done):
                    n = counts[j]
                    results[st.item[s]] = (
                        toks[j][:n], not live[j],
                        margins[j][:n] if margins is not None else None,
                        [a for a, _ in tops[j][:n]] if tops is not None else None,
                        [b for _, b in tops[j][:n]] if tops is not None else None,
                    )
                    st.item[s] = -1

            logits = admit(list(range(rows)), None)
            iteration = 0
            while True:
                active = st.active()
                if not active:
                    break
                # Sample every row; record the token (and margins) of live rows at their own column.
                col = st.count.clamp(max=widest - 1)[:, None]  # (rows, 1); collected rows never reach it
                if st.margins is not None:
                    top2 = logits.float().topk(2, dim=-1)  # values, indices: (rows, 2)
                    st.margins.scatter_(1, col, (top2.values[:, 0] - top2.values[:, 1])[:, None])
                    st.top.scatter_(1, col[:, :, None].expand(rows, 1, 2), top2.indices[:, None, :])
                nxt = sample_next_token(logits, temperature, top_p, generator)
                st.out.scatter_(1, col, nxt.masked_fill(~st.live, pad_id)[:, None])
                st.count += st.live
                if check_eos:
                    st.live &= nxt != eos_id
                for s in active:
                    st.sampled[s] += 1
                row_steps += used
                iteration += 1

                # Rows stepping now write at width + sampled - 1; the window must cover every one of
                # them (also rows collected below), or a row could see no open position (NaN logits).
                needed = max(st.width[s] + st.sampled[s] for s in active)
                capped = [s for s in active if st.sampled[s] == caps[st.item[s]]]
                boundary = iteration % harvest_every == 0
                collected = False
                if capped or boundary:
                    done = set(capped)
                    if boundary:  # the one host sync: which rows ended on EOS
                        live = st.live.tolist()
                        done |= {s for s in active if not live[s]}
                    done = sorted(done)
                    if done:
                        harvest(done)
                        collected = True
                        if not st.active() and pending == 0:
                            break
                # One decode step for every row; finished-but-uncollected rows compute and are ignored.
                logits = runner.step(nxt, st.rope_pos, st.write_pos, needed)
                st.rope_pos += st.advance
                st.write_pos += st.advance
                # Rows collected off a boundary (they hit their cap) go inert until the next boundary,
                # so prompts are prefilled in groups, not one by one.
                if collected or (boundary and pending):
                    fill = boundary or not st.active()
                    logits = admit([s for s, i in enumerate(st.item) if i < 0], logits, fill)
    finally:
        if was_training:
            model.train()

    tokens = [r[0] for r in results]
    lengths = [len(t) for t in tokens]
    return Generation(
        tokens=tokens,
        lengths=lengths,
        finished=[r[1] for r in results],
        margins=[r[2] for r in results] if record_margins else None,
        prefill_tokens=sum(prompt_lens),
        padded_prefill_tokens=padded_prefill,
        generated_tokens=sum(lengths),
        untrimmed_steps=row_steps,
        top1=[r[3] for r in results] if record_margins else None,
        top2=[r[4] for r in results] if record_margins else None,
    )

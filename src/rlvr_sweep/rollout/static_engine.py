"""The fast engine: `engine.generate`'s contract on a preallocated KV cache and a fixed decode step.

`generate` here is a drop-in for `rlvr_sweep.rollout.engine.generate` (same arguments, same
`Generation`, same sampling functions; on a CPU the same generator consumption): it prefills with the model's own
forward exactly as the reference engine does, copies the prefill's keys/values into a preallocated
`KVCache`, then runs `qwen3_step.decode_step` once per token through a `StepRunner` (replayed CUDA
graphs on a GPU, eager on a CPU). Sampling is `engine.sample_next_token` on the step's logits.

Equality with the reference engine:
- CPU float32: identical tokens, margins and accounting (bitwise equal logits: the step mirrors the
  model's kernels and reads exactly the reference's cache length).
- GPU: bf16 kernels over a bucketed window differ in rounding from transformers', so tokens agree
  except at near-ties; the benchmark reports the greedy agreement rate.

Per model, the weights view, caches (one per row bucket, grown on demand) and captured graphs are
kept between calls in a weak-keyed table; `release(model)` frees them.

Host syncs: on a GPU the loop reads the all-finished flag only every `CHECK_EVERY` steps, so the
host never waits for the device inside a stretch of steps. The extra steps after the last EOS emit
pads and are trimmed, and the accounting is that of the reference loop (which stops at once); with
sampling they also draw up to ``CHECK_EVERY - 1`` extra rows of random numbers. On a CPU (no
asynchrony to protect) it checks every step, so the generator advances exactly as in the reference.
"""

from __future__ import annotations

import weakref

import torch

from rlvr_sweep.rollout.engine import Generation, sample_next_token
from rlvr_sweep.rollout.prefill import prefill
from rlvr_sweep.rollout.qwen3_step import KVCache, Qwen3StepWeights, rope_tables
from rlvr_sweep.rollout.step_graphs import StepRunner, row_bucket

__all__ = ["generate", "release", "CHECK_EVERY", "CUDA_GRAPHS", "Session", "session_for"]

CHECK_EVERY = 16  # on CUDA: decode steps between reads of the all-finished flag
CUDA_GRAPHS = True  # capture decode steps on CUDA; False runs them eagerly (read when a cache is built)
CPU_CAPACITY_QUANTUM = 64
CUDA_CAPACITY_QUANTUM = 256


class Session:
    """What the fast engine keeps for one model between calls: the weights view and, per row count,
    a cache with its RoPE tables and step runner (graphs).

    ``gpu_like`` (default: the model is on CUDA) selects the GPU loop's shapes and rhythm: batches
    padded to a row bucket, attention windows rounded up to a bucket, the finished flag read every
    `CHECK_EVERY` steps. Graphs are captured only on CUDA (and when `CUDA_GRAPHS`); a CPU session
    made ``gpu_like`` runs the same shapes eagerly, which is how tests exercise the GPU path.
    """

    def __init__(self, model: torch.nn.Module, gpu_like: bool | None = None):
        self.weights = Qwen3StepWeights(model)
        self.gpu_like = self.weights.device.type == "cuda" if gpu_like is None else gpu_like
        self.check_every = CHECK_EVERY if self.gpu_like else 1
        self.slots: dict[int, tuple[KVCache, StepRunner]] = {}

    def rows_for(self, batch: int) -> int:
        """Cache rows for a batch: its row bucket on the GPU path (the extra rows are inert)."""
        return row_bucket(batch) if self.gpu_like else batch

    def refresh(self) -> None:
        """Copy the current weights in; drop everything tied to memory that was reallocated."""
        if self.weights.refresh():
            self.slots.clear()

    def runner(self, rows: int, capacity: int) -> StepRunner:
        """A step runner over a cache of exactly ``rows`` rows and at least ``capacity`` positions."""
        w = self.weights
        quantum = CUDA_CAPACITY_QUANTUM if self.gpu_like else CPU_CAPACITY_QUANTUM
        held = self.slots.get(rows)
        if held is not None and held[0].capacity >= capacity:
            return held[1]
        self.slots.pop(rows, None)  # free the smaller cache before allocating the larger one
        capacity = -(-capacity // quantum) * quantum
        cache = KVCache(w.shape, rows, capacity, w.dtype, w.device)
        cos, sin = rope_tables(w.model, capacity, w.device, w.dtype)
        runner = StepRunner(w, cache, cos, sin, use_graphs=w.device.type == "cuda" and CUDA_GRAPHS,
                            bucket_windows=self.gpu_like)
        self.slots[rows] = (cache, runner)
        return runner


_SESSIONS: "weakref.WeakKeyDictionary[torch.nn.Module, Session]" = weakref.WeakKeyDictionary()


def session_for(model: torch.nn.Module, gpu_like: bool | None = None) -> Session:
    """The model's session (created on first use, with ``gpu_like``; see `Session`); raises
    `UnsupportedModel` for a model that is not Qwen3-shaped."""
    session = _SESSIONS.get(model)
    if session is None:
        session = _SESSIONS[model] = Session(model, gpu_like)
    return session


def release(model: torch.nn.Module) -> None:
    """Free the caches, graphs and weight copies kept for ``model``."""
    _SESSIONS.pop(model, None)


def generate(
    model: torch.nn.Module,
    prompts: list[list[int]],
    *,
    max_new_tokens: int,
    eos_id: int | None,
    pad_id: int,
    temperature: float | None,
    top_p: float | None,
    generator: torch.Generator | None = None,
    record_margins: bool = False,
) -> Generation:
    """Same contract as :func:`rlvr_sweep.rollout.engine.generate` (read its docstring); faster.

    Raises `qwen3_step.UnsupportedModel` for a model that is not Qwen3-shaped.
    """
    batch = len(prompts)
    if batch == 0:
        empty = [] if record_margins else None
        return Generation([], [], [], empty, 0, 0, 0, 0, empty, empty)
    prompt_lens = [len(p) for p in prompts]
    if min(prompt_lens) == 0:
        raise ValueError("every prompt needs at least one token")
    max_len = max(prompt_lens)
    prefill_tokens = sum(prompt_lens)
    padded_prefill_tokens = batch * max_len
    if max_new_tokens <= 0:
        rows = [[] for _ in prompts] if record_margins else None
        return Generation(
            [[] for _ in prompts], [0] * batch, [False] * batch, rows, prefill_tokens, padded_prefill_tokens, 0, 0,
            None if rows is None else [[] for _ in prompts], None if rows is None else [[] for _ in prompts],
        )
    session = session_for(model)
    device = session.weights.device
    rows = session.rows_for(batch)  # graphs exist per row bucket; extra rows are inert

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            session.refresh()
            runner = session.runner(rows, max_len + max_new_tokens)
            cache = runner.cache
            pre = prefill(model, prompts, pad_id, device)
            logits = pre.logits  # (B, V)
            cache.load_prefill(pre.layer_kv, None if rows == batch else torch.arange(batch, device=device),
                               pre.prompt_mask)
            if rows > batch:  # inert rows attend to one (stale) key: finite, never read
                cache.open_position(torch.arange(batch, rows, device=device), 0)
            padded = pre.padded
            # Per-row step inputs, padded to `rows`: the token fed, its RoPE position, its cache column.
            step_tokens = torch.full((rows,), pad_id, dtype=torch.long, device=device)
            rope_pos = torch.zeros(rows, dtype=torch.long, device=device)
            rope_pos[:batch] = pre.next_pos
            write_pos = torch.full((rows,), max_len, dtype=torch.long, device=device)
            del pre

            out_tokens = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long, device=device)
            margins_buf = top_buf = None
            if record_margins:
                margins_buf = torch.empty((batch, max_new_tokens), dtype=torch.float32, device=device)
                top_buf = torch.empty((batch, max_new_tokens, 2), dtype=torch.long, device=device)
            finished = torch.zeros(batch, dtype=torch.bool, device=device)
            check_eos = eos_id is not None and eos_id >= 0
            check_every = session.check_every
            steps = 0
            for t in range(max_new_tokens):
                if margins_buf is not None:
                    top2 = logits.float().topk(2, dim=-1)  # values, indices: (B, 2) each
                    margins_buf[:, t] = top2.values[:, 0] - top2.values[:, 1]
                    top_buf[:, t] = top2.indices
                nxt = sample_next_token(logits, temperature, top_p, generator)
                nxt = nxt.masked_fill(finished, pad_id)  # finished rows only ever see pads
                out_tokens[:, t] = nxt
                steps = t + 1
                if check_eos:
                    finished |= nxt == eos_id
                if steps == max_new_tokens:
                    break
                if check_eos and steps % check_every == 0 and bool(finished.all()):
                    break
                if rows == batch:
                    step_tokens = nxt
                else:
                    step_tokens[:batch] = nxt
                logits = runner.step(step_tokens, rope_pos, write_pos, max_len + steps, all_valid=not padded)
                logits = logits[:batch] if rows > batch else logits
                rope_pos += 1
                write_pos += 1

            gen = out_tokens[:, :steps]
            if check_eos:
                first_eos = (gen == eos_id).to(torch.int8).argmax(dim=-1)
                lengths_t = torch.where(finished, first_eos + 1, torch.full_like(first_eos, steps))
            else:
                lengths_t = torch.full((batch,), steps, dtype=torch.long, device=device)
            gen_rows = gen.tolist()
            lengths = lengths_t.tolist()
            fin = finished.tolist()
            margin_rows = margins_buf[:, :steps].tolist() if margins_buf is not None else None
            top_rows = top_buf[:, :steps].tolist() if top_buf is not None else None  # (B, steps, 2)
    finally:
        if was_training:
            model.train()

    tokens = [row[:n] for row, n in zip(gen_rows, lengths)]
    margins = [row[:n] for row, n in zip(margin_rows, lengths)] if margin_rows is not None else None
    top1 = [[a for a, _ in row[:n]] for row, n in zip(top_rows, lengths)] if top_rows is not None else None
    top2 = [[b for _, b in row[:n]] for row, n in zip(top_rows, lengths)] if top_rows is not None else None
    return Generation(
        tokens=tokens,
        lengths=lengths,
        finished=fin,
        margins=margins,
        prefill_tokens=prefill_tokens,
        padded_prefill_tokens=padded_prefill_tokens,
        generated_tokens=sum(lengths),
        untrimmed_steps=batch * max(lengths),  # where the reference loop stops (this one may overrun)
        top1=top1,
        top2=top2,
    )

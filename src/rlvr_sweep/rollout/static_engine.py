"""The fast engine: `engine.generate`'s contract on a preallocated KV cache and a fixed decode step.

`generate` here is a drop-in for `rlvr_sweep.rollout.engine.generate` (same arguments, same
`Generation`, same sampling functions; on a CPU the same generator consumption): it prefills with the model's own
forward exactly as the reference engine does, copies the prefill's keys/values into a preallocated
`KVCache`, then runs `qwen3_step.decode_step` once per token through a `StepRunner` (replayed CUDA
graphs on a GPU, eager on a CPU). Sampling is `engine.sample_next_token` on the step's logits.

Equality with the reference engine:
- CPU float32: identical tokens, margins and accounting (bitwise equal logits: the step mirrors the
  model's kernels and reads exactly the reference's cache length).
- GPU: float32 greedy tokens identical (the GPU check, H200, Qwen3-0.6B's shape: 8 of 8 rows of 128
  tokens); bf16 kernels over a bucketed window differ in rounding from transformers', so tokens agree
  except at logit ties (there 2 of 8 rows identical, each other row parting where its top-1/top-2 gap
  was 0 or one bf16 step); the benchmark reports the greedy agreement and those gaps.

Per model, the weights view, caches (one per row bucket, grown on demand) and captured graphs are
kept between calls in a weak-keyed table; `release(model)` frees them.

Sampling on the GPU path can be drawn inside the step's graph (`in_graph_sampling`, `graph_sampler`; on the
devices of `IN_GRAPH_SAMPLING_DEVICES`, where it is proven the eager draw: so far the CPU): each row's
1,024 likeliest tokens decide its nucleus, and the loop reads back one flag a step saying whether every row
was decided (the rows that were not are drawn by the full sort, eagerly, from the same probabilities and
noise): the same tokens, and the generator moved as `engine.sample_next_token` moves it.

Host syncs: on a GPU the loop reads the all-finished flag only every `CHECK_EVERY` steps (and, when it
samples inside the graph, that one flag a step). The extra steps after the last EOS emit
pads and are trimmed, and the accounting is that of the reference loop (which stops at once); with
sampling they also draw up to ``CHECK_EVERY - 1`` extra rows of random numbers. On a CPU (no
asynchrony to protect) it checks every step, so the generator advances exactly as in the reference.
"""

from __future__ import annotations

import dataclasses
import weakref

import torch

from rlvr_sweep.rollout.engine import DecodeRecord, Generation, nothing_to_decode
from rlvr_sweep.rollout.prefill import prefill
from rlvr_sweep.rollout.qwen3_step import KVCache, Qwen3StepWeights, rope_tables
from rlvr_sweep.rollout import graph_sampler
from rlvr_sweep.rollout.step_graphs import InGraphSampling, StepRunner, row_bucket

__all__ = ["generate", "release", "in_graph_sampling", "CHECK_EVERY", "CUDA_GRAPHS", "IN_GRAPH_SAMPLING", "Session",
           "session_for"]

CHECK_EVERY = 16  # on CUDA: decode steps between reads of the all-finished flag
CUDA_GRAPHS = True  # capture decode steps on CUDA; False runs them eagerly (read when a cache is built)
IN_GRAPH_SAMPLING = True  # on the GPU path, draw each token inside its step's graph (`in_graph_sampling`)...
IN_GRAPH_SAMPLING_DEVICES = ("cpu",)  # ...on the devices where that is proven the eager draw (the GPU check tests CUDA)
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


def in_graph_sampling(session: Session, vocab: int, temperature: float | None, top_p: float | None, generator,
                      recording: bool) -> InGraphSampling | None:
    """How the GPU loop's steps draw inside their graph (`step_graphs.InGraphSampling`), or None where the loop samples
    eagerly: off the GPU path (a CPU's own loop), on a device not in `IN_GRAPH_SAMPLING_DEVICES`, with
    `IN_GRAPH_SAMPLING` off, greedy, without a top-p cut, with
    margins or log-probs recorded, or with a generator per row (`seeding.RowGenerators`)."""
    device = session.weights.device
    if not (IN_GRAPH_SAMPLING and session.gpu_like and device.type in IN_GRAPH_SAMPLING_DEVICES):
        return None
    if recording or hasattr(generator, "sample"):
        return None
    if temperature is None or temperature <= 0 or top_p is None or top_p >= 1.0 or vocab < 2:
        return None
    if generator is None:  # the default generator, named, so that its state can be registered with a graph
        generator = torch.cuda.default_generators[device.index or 0] if device.type == "cuda" else torch.default_generator
    return InGraphSampling(temperature, top_p, generator, vocab)


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
    record_logprobs: bool = False,
) -> Generation:
    """Same contract as :func:`rlvr_sweep.rollout.engine.generate` (read its docstring); faster.

    Raises `qwen3_step.UnsupportedModel` for a model that is not Qwen3-shaped.
    """
    done = nothing_to_decode(prompts, max_new_tokens, record_margins)
    if done is not None:
        return done
    batch = len(prompts)
    prompt_lens = [len(p) for p in prompts]
    max_len = max(prompt_lens)
    prefill_tokens = sum(prompt_lens)
    padded_prefill_tokens = batch * max_len
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

            record = DecodeRecord(batch, max_new_tokens, eos_id, pad_id, record_margins, device, record_logprobs)
            check_every = session.check_every
            sampling = in_graph_sampling(session, logits.shape[-1], temperature, top_p, generator,
                                         record_margins or record_logprobs)
            nxt = record.emit(logits, temperature, top_p, generator)
            while True:
                steps = record.steps
                if steps == max_new_tokens or (steps % check_every == 0 and record.all_finished()):
                    break
                if rows == batch:
                    step_tokens = nxt
                else:
                    step_tokens[:batch] = nxt
                if sampling is None:
                    logits = runner.step(step_tokens, rope_pos, write_pos, max_len + steps, all_valid=not padded)
                    nxt = record.emit(logits[:batch] if rows > batch else logits, temperature, top_p, generator)
                else:  # the step and the draw in one graph; the rows its candidates left undecided, by the sort
                    probs, q, drawn, decided = runner.step_and_sample(step_tokens, rope_pos, write_pos,
                                                                      max_len + steps, sampling, batch)
                    if not bool(decided.all()):
                        drawn = torch.where(decided, drawn, graph_sampler.sorted_tokens(probs, top_p, q))
                    nxt = record.take(drawn)
                rope_pos += 1
                write_pos += 1

            out = record.generation(prefill_tokens, padded_prefill_tokens)
            # where the reference loop stops (this one may run past the last row's EOS)
            return dataclasses.replace(out, untrimmed_steps=batch * max(out.lengths))
    finally:
        if was_training:
            model.train()

"""Runs `qwen3_step.decode_step` per token: eagerly on a CPU, as replayed CUDA graphs on a GPU.

A decode step of a 0.6B model is ~600 small kernels; launched one by one from Python it costs
~17 ms (the paper's loop), replayed from a CUDA graph ~1-3 ms (performance_anchors.md §3). A graph
fixes every shape, so steps are captured per (rows, window) bucket: ``rows`` is the cache's row count
(the engine pads a batch up to a bucket of `ROW_BUCKETS`) and ``window`` the number of cache positions
attention reads, rounded up to a multiple of `WINDOW_QUANTUM` so that short sequences do not read the
whole preallocated length. Graphs are captured lazily, the first time a bucket is needed (one warm-up
run, then capture: tens of milliseconds each), and share one memory pool; that is safe because the
only output read after a replay (the logits) is read before the next replay.

On a CPU there is nothing to capture; the step runs eagerly with the exact window (the reference
engine's cache length), which is also what keeps float32 results bitwise equal to it.
"""

from __future__ import annotations

import contextlib
import warnings

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from rlvr_sweep.rollout import graph_sampler
from rlvr_sweep.rollout.qwen3_step import KVCache, Qwen3StepWeights, decode_step

__all__ = ["ROW_BUCKETS", "WINDOW_QUANTUM", "IN_GRAPH_CANDIDATES", "attention_kernels", "row_bucket", "window_bucket",
           "StepRunner", "InGraphSampling"]

ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512)
WINDOW_QUANTUM = 256
IN_GRAPH_CANDIDATES = 1024  # a captured step's candidate tokens per row (`graph_sampler.candidate_tokens`)


def row_bucket(rows: int) -> int:
    """Smallest captured batch size holding ``rows`` (rows itself past the largest bucket)."""
    for b in ROW_BUCKETS:
        if rows <= b:
            return b
    return rows


def window_bucket(needed: int, capacity: int, quantum: int = WINDOW_QUANTUM) -> int:
    """``needed`` cache positions rounded up to a multiple of ``quantum``, at most ``capacity``."""
    return min(capacity, -(-needed // quantum) * quantum)


def attention_kernels(device: torch.device):
    """On CUDA, decode attention runs on the memory-efficient kernel (it takes the additive mask and
    is capturable; flash takes no mask, and cuDNN's is left out of graphs); elsewhere, SDPA's choice
    (the CPU's is the reference engine's, which keeps float32 results bitwise equal)."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


class _Graph:
    """One captured computation for a fixed (rows, window): ``fn(tokens, rope_pos, write_pos)``, its inputs copied
    into static buffers. ``generator``: a CUDA generator the computation draws from (its state is registered with
    the graph, so each replay draws fresh numbers and advances it, as an eager call would)."""

    def __init__(self, runner: "StepRunner", fn, tokens, rope_pos, write_pos, generator=None):
        self.tokens = tokens.clone()
        self.rope_pos = rope_pos.clone()
        self.write_pos = write_pos.clone()
        # Warm-up on a side stream (lazy cuBLAS/SDPA initialisation must not happen during capture).
        # The step is idempotent for fixed inputs (it rewrites the same key/value at write_pos), so
        # warming up and capturing on the real inputs leaves the cache as one step would; a warm-up that
        # draws moves the generator, so its state is put back before the capture.
        state = generator.get_state() if generator is not None else None
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), attention_kernels(runner.weights.device):
            fn(self.tokens, self.rope_pos, self.write_pos)
        torch.cuda.current_stream().wait_stream(side)
        if generator is not None:
            generator.set_state(state)
        self.graph = torch.cuda.CUDAGraph()
        if generator is not None and generator is not torch.cuda.default_generators[runner.weights.device.index or 0]:
            self.graph.register_generator_state(generator)  # (the default one is registered by the capture itself)
        with torch.cuda.graph(self.graph, pool=runner.pool), attention_kernels(runner.weights.device):
            self.outputs = fn(self.tokens, self.rope_pos, self.write_pos)  # recorded only

    def replay(self, tokens, rope_pos, write_pos):
        self.tokens.copy_(tokens, non_blocking=True)
        self.rope_pos.copy_(rope_pos, non_blocking=True)
        self.write_pos.copy_(write_pos, non_blocking=True)
        self.graph.replay()
        return self.outputs


class StepRunner:
    """Decode steps over one `KVCache`; ``step(...)`` returns (rows, V) logits.

    ``use_graphs`` defaults to "on CUDA"; ``bucket_windows`` (default: as ``use_graphs``) rounds the
    attention window up to `WINDOW_QUANTUM` as graphs need, which eager runs can also do so that a
    CPU exercises the GPU's shapes. Graphs depend on the weights' and cache's memory: build a new
    runner when either is reallocated.
    """

    def __init__(self, weights: Qwen3StepWeights, cache: KVCache, cos: torch.Tensor, sin: torch.Tensor,
                 use_graphs: bool | None = None, bucket_windows: bool | None = None):
        self.weights, self.cache, self.cos, self.sin = weights, cache, cos, sin
        device = weights.device
        self.use_graphs = device.type == "cuda" if use_graphs is None else use_graphs
        if self.use_graphs and device.type != "cuda":
            raise ValueError("CUDA graphs need a CUDA model")
        self.bucket_windows = self.use_graphs if bucket_windows is None else bucket_windows
        self.pool = torch.cuda.graph_pool_handle() if self.use_graphs else None
        self.graphs: dict[int, _Graph] = {}

    @property
    def captured(self) -> int:
        return len(self.graphs)

    def window_for(self, needed: int) -> int:
        """Cache positions a step reads when the furthest row writes position ``needed - 1``."""
        return window_bucket(needed, self.cache.capacity) if self.bucket_windows else needed

    def step(self, tokens, rope_pos, write_pos, needed: int, all_valid: bool = False) -> torch.Tensor:
        """One token per row. ``needed``: 1 + the largest write position (host-side, no sync).
        ``all_valid``: every cache position below ``needed`` is real in every row; an eager step over
        exactly ``needed`` positions then runs without a mask, as the reference engine does for
        unpadded batches (graphs always use the mask)."""
        window = self.window_for(needed)
        use_mask = not (all_valid and window == needed) or self.use_graphs
        return self._run((window,), lambda *inputs: self._decode(window, use_mask, *inputs), tokens, rope_pos,
                         write_pos)

    def step_and_sample(self, tokens, rope_pos, write_pos, needed: int, sampling: "InGraphSampling", batch: int):
        """One decode step and the next token of its first ``batch`` rows drawn from its logits, in one graph
        (`InGraphSampling.draw`): ``(probs, noise, tokens, decided)``, each of ``batch`` rows, as
        `graph_sampler.noise` and `graph_sampler.candidate_tokens` give them (the rows past ``batch`` pad a batch
        to its row bucket and draw nothing, so the generator moves as a draw for ``batch`` rows moves it)."""
        window = self.window_for(needed)
        return self._run((window, sampling.key, batch),
                         lambda *inputs: sampling.draw(self._decode(window, True, *inputs)[:batch]),
                         tokens, rope_pos, write_pos, sampling.generator)

    def _decode(self, window: int, use_mask: bool, tokens, rope_pos, write_pos) -> torch.Tensor:
        return decode_step(self.weights, self.cache, self.cos, self.sin, tokens, rope_pos, write_pos, window,
                           use_mask=use_mask)

    def _run(self, key, fn, tokens, rope_pos, write_pos, generator=None):
        """``fn(tokens, rope_pos, write_pos)``: eagerly, or as the graph captured for ``key``."""
        if not self.use_graphs:
            with attention_kernels(self.weights.device):
                return fn(tokens, rope_pos, write_pos)
        graph = self.graphs.get(key)
        if graph is None:
            try:
                graph = self.graphs[key] = _Graph(self, fn, tokens, rope_pos, write_pos, generator)
            except RuntimeError as exc:  # e.g. a kernel that syncs: keep decoding, eagerly, and say so
                warnings.warn(f"CUDA graph capture failed, decoding eagerly from now on: {exc}", RuntimeWarning)
                self.use_graphs = False
                self.graphs.clear()
                with attention_kernels(self.weights.device):
                    return fn(tokens, rope_pos, write_pos)
        return graph.replay(tokens, rope_pos, write_pos)


class InGraphSampling:
    """What a step draws its next token with inside the graph (`graph_sampler`): temperature, top-p, the run's
    generator and ``k`` candidates per row; ``key`` tells captured graphs apart (a graph fixes all of them).
    ``draw(logits)`` -> ``(probs, noise, tokens, decided)``."""

    def __init__(self, temperature: float, top_p: float, generator: torch.Generator, vocab: int):
        self.temperature, self.top_p, self.generator = temperature, top_p, generator
        self.k = min(IN_GRAPH_CANDIDATES, vocab - 1)
        self.key = (temperature, top_p, self.k, generator)  # the generator itself: a graph holds its state

    def draw(self, logits: torch.Tensor):
        probs = graph_sampler.probabilities(logits, self.temperature)
        q = graph_sampler.noise(probs, self.generator)
        tokens, decided = graph_sampler.candidate_tokens(probs, self.top_p, q, self.k)
        return probs, q, tokens, decided

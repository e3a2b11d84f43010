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

from rlvr_sweep.rollout.qwen3_step import KVCache, Qwen3StepWeights, decode_step

__all__ = ["ROW_BUCKETS", "WINDOW_QUANTUM", "attention_kernels", "row_bucket", "window_bucket", "StepRunner"]

ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512)
WINDOW_QUANTUM = 256


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
    """One captured decode step for a fixed (rows, window); inputs are copied into static buffers."""

    def __init__(self, runner: "StepRunner", window: int, tokens, rope_pos, write_pos):
        self.tokens = tokens.clone()
        self.rope_pos = rope_pos.clone()
        self.write_pos = write_pos.clone()
        args = (runner.weights, runner.cache, runner.cos, runner.sin)
        # Warm-up on a side stream (lazy cuBLAS/SDPA initialisation must not happen during capture).
        # The step is idempotent for fixed inputs (it rewrites the same key/value at write_pos), so
        # warming up and capturing on the real inputs leaves the cache as one step would.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), attention_kernels(runner.weights.device):
            decode_step(*args, self.tokens, self.rope_pos, self.write_pos, window)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=runner.pool), attention_kernels(runner.weights.device):
            self.logits = decode_step(*args, self.tokens, self.rope_pos, self.write_pos, window)  # recorded only

    def replay(self, tokens, rope_pos, write_pos) -> torch.Tensor:
        self.tokens.copy_(tokens, non_blocking=True)
        self.rope_pos.copy_(rope_pos, non_blocking=True)
        self.write_pos.copy_(write_pos, non_blocking=True)
        self.graph.replay()
        return self.logits


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
        if not self.use_graphs:
            with attention_kernels(self.weights.device):
                return decode_step(self.weights, self.cache, self.cos, self.sin, tokens, rope_pos, write_pos, window,
                                   use_mask=not (all_valid and window == needed))
        graph = self.graphs.get(window)
        if graph is None:
            try:
                graph = self.graphs[window] = _Graph(self, window, tokens, rope_pos, write_pos)
            except RuntimeError as exc:  # e.g. a kernel that syncs: keep decoding, eagerly, and say so
                warnings.warn(f"CUDA graph capture failed, decoding eagerly from now on: {exc}", RuntimeWarning)
                self.use_graphs = False
                self.graphs.clear()
                with attention_kernels(self.weights.device):
                    return decode_step(self.weights, self.cache, self.cos, self.sin, tokens, rope_pos, write_pos,
                                       window)
        return graph.replay(tokens, rope_pos, write_pos)

"""Decoding engines by name (the `rollout.engine` config option): one contract, three speeds.

Every entry has the signature of `engine.generate` -- ``(model, prompts, *, max_new_tokens, eos_id,
pad_id, temperature, top_p, generator=None, record_margins=False) -> Generation`` -- so rollouts and
read-outs pick one by name and call it the same way:

- ``reference``: `engine.generate`, a Python loop over a transformers `DynamicCache` (the baseline).
- ``static``: `static_engine.generate`, a preallocated cache and a fixed decode step, CUDA graphs on
  a GPU; same sampling functions and generator use; float32 CPU results bitwise equal to reference.
- ``vllm``: `vllm_engine.generate`, vLLM in-process (GPU, optional extra); its own sampler (same
  rules up to rounding, not the same random stream); weights pushed after every update.
- ``auto``: ``static`` where a test proves it token-identical to ``reference`` -- float32 weights on
  the CPU (tests/rollout/test_static_engine.py, tests/run/test_engines.py) -- and ``reference``
  everywhere else (bfloat16, any GPU: unproven until the GPU check, `bench/gpu_check.py`, says so).
  The smoke profile's tiny model uses it; the paper profile keeps ``reference``.
"""

from __future__ import annotations

import torch

from rlvr_sweep.config.options import Option, Registry
from rlvr_sweep.rollout import engine, static_engine, vllm_engine
from rlvr_sweep.rollout.qwen3_step import UnsupportedModel

PROVEN_IDENTICAL = {("cpu", torch.float32)}  # (device type, dtype) where static == reference, by test


def auto_generate(model, prompts, **kw):
    """`static_engine.generate` where it is proven token-identical to the reference, else `engine.generate`."""
    weights = next(model.parameters())
    if (weights.device.type, weights.dtype) in PROVEN_IDENTICAL:
        try:
            return static_engine.generate(model, prompts, **kw)
        except UnsupportedModel:  # refused before decoding anything: the reference decodes any model
            pass
    return engine.generate(model, prompts, **kw)

__all__ = ["ENGINES"]

ENGINES = Registry("rollout engine", group="model", key="engine")
ENGINES.add(Option("reference", engine.generate, doc="a Python loop over a transformers DynamicCache (the baseline)"))
ENGINES.add(Option("static", static_engine.generate, doc="a preallocated cache and a fixed decode step (CUDA graphs)"))
ENGINES.add(Option("vllm", vllm_engine.generate, doc="vLLM in-process (GPU, optional extra)"))
ENGINES.add(Option("auto", auto_generate, doc="static where proven token-identical to reference (CPU float32), else reference"))


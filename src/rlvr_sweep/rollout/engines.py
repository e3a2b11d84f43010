"""Decoding engines by name (the `rollout.engine` config option): one contract, three speeds.

Every entry has the signature of `engine.generate` -- ``(model, prompts, *, max_new_tokens, eos_id,
pad_id, temperature, top_p, generator=None, record_margins=False) -> Generation`` -- so rollouts and
read-outs pick one by name and call it the same way:

- ``reference``: `engine.generate`, a Python loop over a transformers `DynamicCache` (the baseline).
- ``static``: `static_engine.generate`, a preallocated cache and a fixed decode step, CUDA graphs on
  a GPU; same sampling functions and generator use; float32 CPU results bitwise equal to reference.
- ``vllm``: `vllm_engine.generate`, vLLM in-process (GPU, optional extra); its own sampler (same
  rules up to rounding, not the same random stream); weights pushed after every update.
"""

from __future__ import annotations

from rlvr_sweep.config.options import Option, Registry
from rlvr_sweep.rollout import engine, static_engine, vllm_engine

__all__ = ["ENGINES"]

ENGINES = Registry("rollout engine", group="model", key="engine")
ENGINES.add(Option("reference", engine.generate, doc="a Python loop over a transformers DynamicCache (the baseline)"))
ENGINES.add(Option("static", static_engine.generate, doc="a preallocated cache and a fixed decode step (CUDA graphs)"))
ENGINES.add(Option("vllm", vllm_engine.generate, doc="vLLM in-process (GPU, optional extra)"))


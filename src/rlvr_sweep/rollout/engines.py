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

from collections.abc import Callable

from rlvr_sweep.rollout import engine, static_engine, vllm_engine

__all__ = ["ENGINES", "get_engine"]


def get_engine(name: str) -> Callable:
    """The generate function registered as ``name``; unknown names list the valid ones."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown rollout engine {name!r}; valid: {sorted(ENGINES)}") from None


ENGINES: dict[str, Callable] = {
    "reference": engine.generate,
    "static": static_engine.generate,
    "vllm": vllm_engine.generate,
}

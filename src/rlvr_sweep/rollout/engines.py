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
  the CPU (tests/rollout/test_static_engine.py, tests/run/test_engines.py) and on a CUDA GPU (the GPU
  check, tests/rollout/test_gpu.py; its figures in docs/testing.md) -- and ``reference`` everywhere
  else: bfloat16 and float16 (the two engines' kernels round differently, so rows part at logit ties;
  `static_engine`'s docstring), and any model that is not Qwen3-shaped (Llama, Qwen2, ...: the static
  step is Qwen3's layer).
  It logs its choice and the reason once per model (`auto_choice`), so a run's logs/run.log says it.
  The smoke profile's tiny model uses it; the paper profile keeps ``reference``.
"""

from __future__ import annotations

import logging
import weakref

import torch

from rlvr_sweep.config.options import Option, Registry
from rlvr_sweep.rollout import engine, static_engine, vllm_engine
from rlvr_sweep.rollout.qwen3_step import UnsupportedModel, check_supported

log = logging.getLogger(__name__)

PROVEN_IDENTICAL = {("cpu", torch.float32), ("cuda", torch.float32)}  # (device type, dtype): static == reference,
# by test (the CUDA entry: the GPU check of 2026-12-04, torch 2.11.0+cu130, transformers 5.17.0, docs/testing.md)

# model -> ((device type, dtype) decided for, engine name): decided and logged once per model (again
# only if the model moves to another device or dtype); weak, so a released model takes its entry along
_CHOSEN: "weakref.WeakKeyDictionary[torch.nn.Module, tuple[tuple[str, torch.dtype], str]]" = weakref.WeakKeyDictionary()


def _where(model: torch.nn.Module) -> tuple[str, torch.dtype]:
    weights = next(model.parameters())
    return weights.device.type, weights.dtype


def _by_place(where: tuple[str, torch.dtype]) -> tuple[str, str]:
    """(engine, why) from the weights' device and dtype alone."""
    device, dtype = where
    if where in PROVEN_IDENTICAL:
        return "static", f"float32 weights on {device}, a Qwen3-shaped model: proven token-identical to reference"
    return "reference", (f"{str(dtype).removeprefix('torch.')} on {device}: static is proven token-identical "
                         "only for float32 weights (on the CPU and on a CUDA GPU)")


def _not_qwen3(model: torch.nn.Module, err: UnsupportedModel) -> tuple[str, str]:
    return "reference", f"{type(model).__name__} is not Qwen3-shaped: {err}"


def auto_choice(model: torch.nn.Module) -> tuple[str, str]:
    """(engine name, why) that ``auto`` picks for ``model``, decoding nothing. For example
    ``('static', 'float32 weights on cpu, a Qwen3-shaped model: proven token-identical to reference')``
    for the tiny Qwen3 checkpoint, ``('reference', "LlamaForCausalLM is not Qwen3-shaped: model_type
    'llama' is not 'qwen3'")`` for a float32 Llama, ``('reference', 'bfloat16 on cuda: static is
    proven token-identical only for float32 weights (on the CPU and on a CUDA GPU)')`` for any model in
    bf16 on a GPU."""
    choice = _by_place(_where(model))
    if choice[0] == "static":
        try:
            check_supported(model)  # what the static engine checks before it decodes anything
        except UnsupportedModel as err:
            return _not_qwen3(model, err)
    return choice


def auto_generate(model, prompts, **kw):
    """`static_engine.generate` where it is proven token-identical to the reference, else `engine.generate`.
    The first call for a model decides, remembers and logs which and why (`auto_choice` says it beforehand)."""
    where = _where(model)
    known = _CHOSEN.get(model)
    name, why = (known[1], "") if known is not None and known[0] == where else _by_place(where)
    if name == "static":
        try:  # the static engine's own refusal decides (it comes before any decoding), so the log says what ran
            out = static_engine.generate(model, prompts, **kw)
        except UnsupportedModel as err:  # the reference decodes any causal LM
            name, why = _not_qwen3(model, err)
    if known != (where, name):
        _CHOSEN[model] = (where, name)
        log.info("model.engine=auto: %s (%s)", name, why)
    return out if name == "static" else engine.generate(model, prompts, **kw)


__all__ = ["ENGINES", "auto_choice"]

ENGINES = Registry("rollout engine", group="model", key="engine")
ENGINES.add(Option("reference", engine.generate, doc="a Python loop over a transformers DynamicCache (the baseline)"))
ENGINES.add(Option("static", static_engine.generate, doc="a preallocated cache and a fixed decode step (CUDA graphs)"))
ENGINES.add(Option("vllm", vllm_engine.generate, doc="vLLM in-process (GPU, optional extra)"))
ENGINES.add(Option("auto", auto_generate, doc="static where proven token-identical to reference (float32), else reference"))


"""Policy stage: the model being trained and its tokenizer (paper §1).

`load_policy` reads Qwen3-0.6B-Base (hub id or a local `save_pretrained` folder) or the tiny
Qwen3-architecture checkpoint shipped in `assets/` (built by `python -m rlvr_sweep.policy.build_tiny`),
through the same `from_pretrained` call, and unties the output head as the baseline does.
"""

import importlib

# imported when first asked for: from `source` (where a model is) or `loading` (torch and transformers)
__all__ = ["DTYPES", "ModelLoadError", "Policy", "load_policy", "resolve_model_folder", "resolve_model_source",
           "untie_output_head"]


_LIGHT = ("ModelLoadError", "resolve_model_folder", "resolve_model_source")  # `source`: no torch


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module(f"rlvr_sweep.policy.{'source' if name in _LIGHT else 'loading'}"), name)
    raise AttributeError(f"module 'rlvr_sweep.policy' has no attribute {name!r}")

"""Policy stage: the model being trained and its tokenizer (paper §1).

`load_policy` reads Qwen3-0.6B-Base (hub id or a local `save_pretrained` folder) or the tiny
Qwen3-architecture checkpoint shipped in `assets/` (built by `python -m rlvr_sweep.policy.build_tiny`),
through the same `from_pretrained` call, and unties the output head as the baseline does.
"""

from rlvr_sweep.policy.loading import (
    DTYPES, ModelLoadError, Policy, load_policy, resolve_model_folder, resolve_model_source, untie_output_head,
)

__all__ = ["DTYPES", "ModelLoadError", "Policy", "load_policy", "resolve_model_folder", "resolve_model_source",
           "untie_output_head"]

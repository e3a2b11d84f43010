"""Policy loading: a Hugging Face causal LM and its tokenizer, from a local folder or a hub id.

The paper profile loads Qwen3-0.6B-Base (seed paper §1); the smoke profile loads the tiny
Qwen3-architecture checkpoint shipped inside the package (`pkg:` paths). Both go through the same
`from_pretrained` call. Loading fails fast, before a run folder is written, with a message that
says how to point the run at a local copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from rlvr_sweep.config import DTYPE_NAMES, ModelConfig
from rlvr_sweep.policy.source import (  # noqa: F401  (re-exported: where a model comes from)
    HUB_IGNORED, WEIGHT_SUFFIXES, ModelLoadError, resolve_model_folder, resolve_model_source,
)

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}  # model.dtype -> torch dtype


@dataclass
class Policy:
    model: torch.nn.Module
    tokenizer: object
    device: torch.device
    source: str  # the configured model.path or hub id (the folder it was loaded from is the run's model input)
    adapter: bool = False  # LoRA layers were attached (`policy.adapter`): only they train

    @property
    def eos_id(self) -> int:
        return self.tokenizer.eos_token_id

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return self.eos_id if pad is None else pad  # the baseline pads with EOS


def load_policy(cfg: ModelConfig, folder: Path | None = None, *, lora=None, seed: int = 0) -> Policy:
    """Load model and tokenizer from `folder` (default: `resolve_model_folder(cfg)`); untie the output
    head when configured (the baseline trains both); attach LoRA layers when `lora` (a `config.LoraConfig`) sets a
    rank, drawn from `seed` unless it names its own (`policy.adapter`)."""
    if cfg.dtype not in DTYPES:
        raise ModelLoadError(f"unknown model.dtype {cfg.dtype!r}; valid: {sorted(DTYPES)}")
    folder = resolve_model_folder(cfg) if folder is None else Path(folder)
    device = _pick_device(cfg.device)
    cap_memory(device, cfg.memory_share)
    try:  # never trust_remote_code (a config asking for code of its own gets the library's class), never a pickle
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=DTYPES[cfg.dtype], use_safetensors=True)
    except Exception as err:  # noqa: BLE001  (whatever a user's folder holds, it is named in one line)
        first = (str(err).strip().splitlines() or ["no detail"])[0][:300]
        raise ModelLoadError(f"model {cfg.path or cfg.hub_id!r} cannot be loaded from {folder}: "
                             f"{type(err).__name__}: {first}") from err
    if tokenizer.eos_token_id is None:  # else decoding fails deep inside an engine, or never stops
        raise ModelLoadError(f"model {cfg.path or cfg.hub_id!r}: the tokenizer in {folder} has no EOS token "
                             "(eos_token in tokenizer_config.json): rollouts and read-outs end at it, and it pads "
                             "where the tokenizer has no pad token")
    if cfg.untie_embeddings:
        untie_output_head(model)
    adapted = lora is not None and lora.enabled
    if adapted:  # on the CPU, before the move: the draw does not depend on the device
        from rlvr_sweep.policy.adapter import attach

        attach(model, lora, seed)
    model.to(device)
    return Policy(model=model, tokenizer=tokenizer, device=device, source=cfg.path or cfg.hub_id or str(folder),
                  adapter=adapted)


def checkpoint_activations(model: torch.nn.Module) -> None:
    """Recompute each decoder layer's activations in the backward pass (`train.activation_checkpointing`):
    transformers' own checkpointing, non-reentrant (torch's recommended form, which restores the random state for
    the recomputation, so dropout draws the same masks). Decoding is unaffected: it runs in eval mode."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def untie_output_head(model: torch.nn.Module) -> None:
    """Give the output head its own copy of the (tied) embedding weights.

    The baseline builds its model and loads a state dict, so the embedding and output head are two
    parameters with equal initial values that drift apart in training (baseline spec §1;
    the paper counts P = 751,632,384 untied parameters).
    """
    head, embed = model.get_output_embeddings(), model.get_input_embeddings()
    if head is not None and head.weight is embed.weight:
        head.weight = torch.nn.Parameter(embed.weight.detach().clone())
    model.config.tie_word_embeddings = False


def cap_memory(device: torch.device, share: float | None) -> bool:
    """Cap torch's caching allocator on a CUDA `device` to `share` of its memory (`model.memory_share`: k runs
    sharing one GPU), before anything is allocated there: past it an allocation raises CUDA's out-of-memory error in
    this process instead of taking the other runs' memory. True when a cap was set; nothing to cap elsewhere."""
    if share is None or device.type != "cuda":
        return False
    torch.cuda.set_per_process_memory_fraction(share, device)
    return True


def _pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)

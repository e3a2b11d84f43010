"""LoRA adapters on the policy (`lora.*` settings; `peft`, installed with `pip install rlvr_sweep[lora]`).

`attach` puts peft's LoRA layers into the loaded model in place (`peft.inject_adapter_in_model`), so the policy is
still the causal LM every stage calls: rollouts and read-outs decode through the adapter, unmerged, with the
reference engine (the static engine reads the base weights directly and refuses a model with adapters; `auto`
then picks the reference). Only the adapter trains: the base weights are frozen, AdamW holds the adapter's
parameters, a checkpoint holds the adapter and its optimizer state (`trained_state`), and a KL term's reference
policy is the same model with the adapter switched off (`AdapterOff`), not a second copy of the weights.

peft draws each A matrix with `nn.init.kaiming_uniform_` from torch's global CPU generator and sets B = 0 (so the
adapted model starts as the base model); `attach` seeds that generator with `lora.init_seed` (the run's seed when
unset) for the draw only and restores it after, so the run's own random streams are those of a run without an
adapter. The adapter's weights are kept in float32 whatever `model.dtype` (peft's own default for a bf16 base), and
are drawn before they are rounded to the base layer's dtype by peft's move and cast back.

A finished run keeps `model/` as the adapter merged into the base weights (`merged_state`: W + (alpha / r) B A,
summed in float32 and rounded to `model.dtype` once), so `model.path=<run>/model` reads it out as any saved model,
and `adapter/` as peft saves an adapter (`adapter_config.json`, `adapter_model.safetensors`).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import torch

from rlvr_sweep.policy.source import ModelLoadError

ADAPTER = "adapter"  # a run folder's adapter, as peft saves one
MARK = "lora_"  # the name part of every adapter parameter (lora_A, lora_B)
ALL_LINEAR = "all-linear"  # peft's name for every linear layer but the output head
PEFT_PREFIX = "base_model.model."  # a saved adapter's keys, as a PeftModel names its base model's layers


def require_peft():
    """The `peft` module, or a ModelLoadError saying how to install it."""
    try:
        import peft
    except ImportError as err:
        raise ModelLoadError("lora.rank is set, but peft is not installed: pip install 'rlvr_sweep[lora]' "
                             "(or pip install peft)") from err
    return peft


def attach(model: torch.nn.Module, lora, seed: int) -> torch.nn.Module:
    """Put LoRA layers (`lora`: a `config.LoraConfig`) into `model` in place, drawn under `lora.init_seed` (or
    `seed`), and freeze everything else. Returns the model."""
    peft = require_peft()
    targets = ALL_LINEAR if list(lora.target_modules) == [ALL_LINEAR] else list(lora.target_modules)
    config = peft.LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets,
                             bias="none")
    with torch.random.fork_rng(devices=[]):  # the draw's own stream: the run's global stream is left as it was
        torch.manual_seed(seed if lora.init_seed is None else lora.init_seed)
        try:
            peft.inject_adapter_in_model(config, model)
        except ValueError as err:  # no layer of that name in this model
            raise ModelLoadError(f"lora.target_modules={list(lora.target_modules)}: {str(err).splitlines()[0][:300]}") from err
    for name, param in model.named_parameters():
        trained = MARK in name
        param.requires_grad_(trained)
        if trained:
            param.data = param.data.float()
    return model


def has_adapter(model: torch.nn.Module) -> bool:
    """Whether `model` holds LoRA layers (peft's tuner layers: they carry `lora_A`)."""
    return any(hasattr(module, "lora_A") for module in model.modules())


def trained_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The adapter's parameters by name: what a checkpoint of an adapter run keeps of the model."""
    return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}


def load_trained_state(model: torch.nn.Module, state: dict) -> None:
    """Copy a checkpoint's adapter parameters into `model`; ValueError when the names differ."""
    params = {name: p for name, p in model.named_parameters() if MARK in name}
    if set(state) != set(params):
        missing, extra = sorted(set(params) - set(state)), sorted(set(state) - set(params))
        raise ValueError(f"the checkpoint's adapter does not match the model's (missing {missing[:3]}, "
                         f"unexpected {extra[:3]})")
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(state[name])


def _layers(model: torch.nn.Module) -> list:
    return [module for module in model.modules() if hasattr(module, "lora_A") and hasattr(module, "enable_adapters")]


@contextmanager
def adapter_off(model: torch.nn.Module):
    """Inside, `model` computes as its base weights alone (peft's `enable_adapters(False)` on every layer); after,
    every parameter trains as it did before (peft's toggle sets the adapter's `requires_grad` itself)."""
    layers = _layers(model)
    trains = {p: p.requires_grad for p in model.parameters()}
    for layer in layers:
        layer.enable_adapters(False)
    try:
        yield model
    finally:
        for layer in layers:
            layer.enable_adapters(True)
        for p, flag in trains.items():
            p.requires_grad_(flag)


class AdapterOff(torch.nn.Module):
    """The base policy of an adapter run, as a module: calls the run's model with its adapter switched off. The
    reference policy of a KL term (the run's initial policy: B = 0 at the start), with no copy of any weight."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.__dict__["policy"] = model  # not a submodule: its parameters are the policy's, not this module's

    def forward(self, *args, **kwargs):
        with torch.no_grad(), adapter_off(self.policy):
            return self.policy(*args, **kwargs)


def merged_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's state with every adapter merged into its base layer: W + (alpha / r) B A, summed in float32 and
    rounded to the base weight's dtype once; keyed as the model without adapters (a plain `save_pretrained`)."""
    merged = {}
    for name, module in model.named_modules():
        if not hasattr(module, "lora_A"):
            continue
        base = module.get_base_layer().weight
        delta = sum((module.lora_B[a].weight.float() @ module.lora_A[a].weight.float()) * module.scaling[a]
                    for a in module.active_adapters)
        merged[f"{name}.weight"] = (base.float() + delta).to(base.dtype).detach()
    state = {}
    for key, tensor in model.state_dict().items():
        if MARK in key:
            continue
        plain = key.replace(".base_layer.", ".")
        state[plain] = merged.get(plain, tensor)
    return state


def save_adapter(model: torch.nn.Module, folder: Path, base: str) -> None:
    """The adapter as peft saves one (`adapter_config.json`, `adapter_model.safetensors`), `base` naming the model
    it adapts; `PeftModel.from_pretrained(<that model>, folder)` loads it."""
    peft = require_peft()
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = model.peft_config["default"]
    config.base_model_name_or_path = base
    config.save_pretrained(str(folder))
    state = peft.get_peft_model_state_dict(model, save_embedding_layers=False)
    weights = {PEFT_PREFIX + k: v.detach().contiguous().cpu() for k, v in state.items()}
    save_file(weights, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})


def adapter_record(model: torch.nn.Module) -> dict:
    """What run.json says of the adapter: its parameter count and layers."""
    layers = _layers(model)
    return {"parameters": sum(p.numel() for p in trained_state(model).values()), "layers": len(layers),
            "config": json.loads(json.dumps(model.peft_config["default"].to_dict(), default=str))}

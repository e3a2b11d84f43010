"""Prompt prefill for the fast engines: left padding and one forward of the model itself.

The fast engines prefill exactly as `engine.generate` does (same padded ids, mask, positions and
model call), so the first token's logits and the cached keys/values are the reference engine's;
only the decode steps after it run through `qwen3_step`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Prefill", "prefill"]


@dataclass
class Prefill:
    logits: torch.Tensor  # (n, V) next-token logits after each prompt
    layer_kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer (keys, values), each (n, Hkv, P, D)
    prompt_mask: torch.Tensor  # (n, P) bool, False on left pads
    next_pos: torch.Tensor  # (n,) long: RoPE position of each row's first generated token (its prompt length)
    width: int  # P, the padded prompt width
    padded: bool  # some row has left padding


def prefill(model: torch.nn.Module, prompts: list[list[int]], pad_id: int, device: torch.device) -> Prefill:
    """Left-pad ``prompts`` (each non-empty) and run the model once over them with a cache.

    Call under ``torch.no_grad()`` with the model in eval mode. No padding: no mask (the model's
    causal default); padding: the 2D padding mask with positions ``cumsum(mask) - 1``.
    """
    lens = [len(p) for p in prompts]
    width = max(lens)
    flat: list[int] = []
    for p, n in zip(prompts, lens):
        flat.extend([pad_id] * (width - n))
        flat.extend(p)
    input_ids = torch.tensor(flat, dtype=torch.long).view(len(prompts), width).to(device)
    lens_t = torch.tensor(lens, dtype=torch.long)
    prompt_mask = (torch.arange(width)[None, :] >= (width - lens_t)[:, None]).to(device)
    padded = min(lens) < width
    if padded:
        attention_mask = prompt_mask.long()
        position_ids = (attention_mask.cumsum(-1) - 1).clamp_(min=0)
    else:
        attention_mask = None
        position_ids = torch.arange(width, device=device).expand(len(prompts), width)
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=True,
                logits_to_keep=1)
    cache = getattr(out, "cache", None)
    if cache is None:
        cache = out.past_key_values
    if hasattr(cache, "layers"):  # transformers >= 4.56
        layer_kv = [(layer.keys, layer.values) for layer in cache.layers]
    else:
        layer_kv = list(zip(cache.key_cache, cache.value_cache))
    return Prefill(
        logits=out.logits[:, -1, :],
        layer_kv=layer_kv,
        prompt_mask=prompt_mask,
        next_pos=position_ids[:, -1] + 1,
        width=width,
        padded=padded,
    )

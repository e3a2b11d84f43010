"""Policy-gradient loss on sampled sequences (seed paper §1, §3.2; baseline spec §7).

Token log-probs come from a float32 log-softmax over the model's logits (the baseline casts bf16
logits to fp32 first) and are summed over completion tokens, EOS included, with no length
normalisation. Two recipes give the same gradient up to rounding:

- `sum_then_scale` (Arm 1): L = -(1/G) sum_i A_i * (sum_t log p_it)
- `scale_then_sum` (Arms 2+): L = (1/G) sum_i sum_t A_it * (-log p_it); per-token advantages allowed
"""

from __future__ import annotations

import torch

from rlvr_sweep.update.kl import token_entropy

LOSS_RECIPES = ("sum_then_scale", "scale_then_sum")


def pack_sequences(prompts: list[list[int]], completions: list[list[int]], pad_id: int):
    """Right-pad prompt+completion rows. Returns input_ids (N, L), attention_mask (N, L) and
    completion_mask (N, L-1): True where position j predicts a completion token (token j+1)."""
    rows = [p + c for p, c in zip(prompts, completions)]
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    completion_mask = torch.zeros((len(rows), width - 1), dtype=torch.bool)
    for i, (p, row) in enumerate(zip(prompts, rows)):
        input_ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        attention_mask[i, : len(row)] = 1
        completion_mask[i, len(p) - 1 : len(row) - 1] = True
    return input_ids, attention_mask, completion_mask


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, start: int = 0, *,
                   with_entropy: bool = False):
    """(N, L) ids -> (N, L-1-start) float32 log p(token j+1 | tokens <= j) for j >= start; with `with_entropy`,
    also the entropy of each of those positions' distributions (no gradient): (logps, entropy)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits  # (N, L, V)
    logp = torch.log_softmax(logits[:, start:-1].float(), dim=-1)
    picked = logp.gather(-1, input_ids[:, start + 1 :].unsqueeze(-1)).squeeze(-1)
    return (picked, token_entropy(logp)) if with_entropy else picked


def policy_loss(
    logps: torch.Tensor, mask: torch.Tensor, advantages: torch.Tensor, recipe: str, group_size: int
) -> torch.Tensor:
    """Loss of one chunk of rollouts; chunks of a group add up to the group's loss.

    logps, mask: (N, T). advantages: (N,) per sequence, or (N, T) per token (scale_then_sum only).
    """
    if recipe not in LOSS_RECIPES:
        raise ValueError(f"unknown train.loss_recipe {recipe!r}; valid: {list(LOSS_RECIPES)}")
    maskf = mask.to(logps.dtype)
    adv = advantages.to(device=logps.device, dtype=logps.dtype).detach()
    if recipe == "sum_then_scale":
        if adv.dim() != 1:
            raise ValueError("sum_then_scale needs one advantage per sequence, got per-token advantages")
        seq_logp = (logps * maskf).sum(dim=1)  # (N,)
        return -(adv * seq_logp).sum() / group_size
    token_adv = adv.unsqueeze(1) if adv.dim() == 1 else adv  # (N, 1) or (N, T)
    return ((-logps) * token_adv * maskf).sum() / group_size

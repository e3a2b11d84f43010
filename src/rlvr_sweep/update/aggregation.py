"""Loss aggregation: how one optimizer step's per-token losses become one number (`objective.aggregation`).

An optimizer step covers one mini-batch of an update's rollouts (all of them with one mini-batch, the
paper's case). With l_it the per-token loss of token t of rollout i, |o_i| its completion tokens (after
masking), N the mini-batch's rollouts, T their tokens, G a question's group size and L the rollout cap:

| mode | loss | source |
|---|---|---|
| `token_sum_over_g` | sum_q (1/G) sum_(i in q) sum_t l_it | seed paper §1 (the baseline's; the default) |
| `token_mean` | (1/T) sum_i sum_t l_it | DAPO (Yu et al. 2025, eq. 12); verl `token-mean` |
| `seq_mean_token_mean` | (1/N) sum_i (1/|o_i|) sum_t l_it | GRPO (Shao et al. 2024, eq. 3); verl `seq-mean-token-mean` |
| `seq_mean_token_sum` | (1/N) sum_i sum_t l_it | verl `seq-mean-token-sum` |
| `seq_mean_token_sum_norm` | (1/(N L)) sum_i sum_t l_it | Dr. GRPO (Liu et al. 2025 §3.1); verl `seq-mean-token-sum-norm` |

With one question per update and one mini-batch, `token_sum_over_g` and `seq_mean_token_sum` are the same
number (N = G). The backward runs in chunks of rollouts (`train.backward_micro_batch`), so every normaliser
is counted over the whole mini-batch first (`Normaliser.of`), and the chunks' losses add up to its loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

AGGREGATIONS = ("token_sum_over_g", "token_mean", "seq_mean_token_mean", "seq_mean_token_sum",
                "seq_mean_token_sum_norm")
PAPER_AGGREGATION = "token_sum_over_g"


@dataclass(frozen=True)
class Normaliser:
    """What one optimizer step's loss is divided by: its mode and the mini-batch's counts."""

    mode: str
    sequences: int  # N: rollouts in the mini-batch
    tokens: int  # T: their completion tokens in the loss (truncated rollouts left out when they are masked)
    max_len: int  # L: the rollout cap, in this profile's tokens (Dr. GRPO's constant)

    def __post_init__(self):
        if self.mode not in AGGREGATIONS:
            raise ValueError(f"unknown objective.aggregation {self.mode!r}; valid: {list(AGGREGATIONS)}")

    @classmethod
    def of(cls, mode: str, lengths: list[int], kept: list[bool], max_len: int) -> "Normaliser":
        """From each rollout of the mini-batch: its completion tokens, and whether they enter the loss. Every
        rollout counts as a sequence (a masked one adds 0 to the sum, as in TRL), only kept ones' tokens."""
        return cls(mode, len(lengths), sum(n for n, k in zip(lengths, kept) if k), max_len)


def aggregate(token_loss: torch.Tensor, mask: torch.Tensor, group_size: int, norm: Normaliser) -> torch.Tensor:
    """The loss of one chunk of rollouts (N_chunk, T) of one question under `norm`; the chunks of a mini-batch
    add up to its loss. `mask`: the tokens that count (completion tokens, less any masked rollout).

    E.g. losses (1, 2) and (3, -) (a 1-token rollout), G = 2, L = 4: token_sum_over_g 3, token_mean 2,
    seq_mean_token_mean (1.5 + 3) / 2 = 2.25, seq_mean_token_sum 3, seq_mean_token_sum_norm 0.75."""
    maskf = mask.to(token_loss.dtype)
    masked = token_loss * maskf
    if norm.mode == "token_sum_over_g":
        return masked.sum() / group_size
    if norm.mode == "token_mean":
        return masked.sum() / max(norm.tokens, 1)
    if norm.mode == "seq_mean_token_mean":
        return (masked.sum(-1) / maskf.sum(-1).clamp(min=1)).sum() / norm.sequences
    if norm.mode == "seq_mean_token_sum":
        return masked.sum() / norm.sequences
    return masked.sum() / (norm.sequences * norm.max_len)

"""One unpadded teacher-forced pass: what a policy would say at each position of a given response
(seed paper §5.6 items 1-3: the 72-token margin pass of the forks, the donor-prefix agreement probe).

`teacher_forced(model, prompt, tokens)` runs the model once over ``prompt + tokens`` as a single
unpadded ``[1, L]`` row (no mask, positions ``0..L-1``) and reads, at every response position ``t``
(the logits that predict ``tokens[t]``): the raw top-1 minus top-2 logit margin, the top-1 and top-2
ids (``torch.topk`` order, as the decoding engine records them) and the log-probability of the given
token. Margins are computed in float32 from the model's own logits, as `rollout.engine` does, so on
one device and dtype a pass over a greedy response reproduces the margins its decoding saw (up to
the rounding a padded batch adds; the paper notes that near-ties can rank differently).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["TeacherForced", "agreement", "teacher_forced"]


@dataclass(frozen=True)
class TeacherForced:
    margins: list[float]  # (n,) z_(1) - z_(2) at each position
    top1: list[int]  # (n,)
    top2: list[int]  # (n,)
    logprob: list[float]  # (n,) log p(tokens[t] | prompt, tokens[:t])


def agreement(tf: TeacherForced, tokens: list[int]) -> list[bool]:
    """Per position: the policy's argmax equals the forced token."""
    return [a == b for a, b in zip(tf.top1, tokens)]


def teacher_forced(model: torch.nn.Module, prompt: list[int], tokens: list[int]) -> TeacherForced:
    """The policy's view of ``tokens`` after ``prompt`` (both non-empty lists of ids), one forward pass."""
    if not prompt:
        raise ValueError("teacher_forced needs a non-empty prompt")
    n = len(tokens)
    if n == 0:
        return TeacherForced([], [], [], [])
    device = next(model.parameters()).device
    ids = torch.tensor([prompt + list(tokens)], dtype=torch.long, device=device)  # (1, L), unpadded
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            # the last n + 1 positions: logits at P-1+t predict tokens[t]; the very last predicts nothing asked
            logits = model(input_ids=ids, use_cache=False, logits_to_keep=n + 1).logits[0, :n].float()  # (n, V)
    finally:
        if was_training:
            model.train()
    best = logits.topk(2, dim=-1)
    target = torch.tensor(tokens, dtype=torch.long, device=device)
    logprob = torch.log_softmax(logits, dim=-1).gather(-1, target[:, None]).squeeze(-1)
    return TeacherForced(
        margins=(best.values[:, 0] - best.values[:, 1]).tolist(),
        top1=best.indices[:, 0].tolist(), top2=best.indices[:, 1].tolist(), logprob=logprob.tolist(),
    )

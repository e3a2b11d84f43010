"""Two rewards of one's own: the verdict minus a length penalty, in characters or in tokens."""

from __future__ import annotations

from rlvr_sweep.extend import REWARDS, at_least, between, param, score_rollouts


@REWARDS.register("len_penalty", receives=("extract",),
                  params={"coef": param(0.05, between(0, 1)), "max_chars": param(400, at_least(1), length=True)})
def len_penalty(texts, gold, *, grade, extract, coef: float, max_chars: int):
    """correct - coef * min(1, characters / max_chars); `correct` is the grader's verdict."""
    rewards, correct = score_rollouts(texts, gold, None, grade, extract)
    return [r - coef * min(1.0, len(t) / max_chars) for r, t in zip(rewards, texts)], correct


@REWARDS.register("token_len_penalty", receives=("tokens", "extract"),
                  params={"coef": param(0.05, between(0, 1)), "max_tokens": param(512, at_least(1), length=True)})
def token_len_penalty(texts, gold, *, grade, extract, tokens, coef: float, max_tokens: int):
    """correct - coef * min(1, tokens / max_tokens): a length penalty in the policy's own tokens (EOS counted)."""
    rewards, correct = score_rollouts(texts, gold, None, grade, extract)
    return [r - coef * min(1.0, len(ids) / max_tokens) for r, ids in zip(rewards, tokens)], correct

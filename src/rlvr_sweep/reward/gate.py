"""Training reward (baseline spec §5, seed paper §4.1).

A rollout is correct when its last braced `\\boxed{...}` (extraction with `fallback=None`, so an
unboxed final number scores 0) grades equal to the gold answer. The `gated` reward also asks for a
derivation: at least `gate_chars` characters before the last `\\boxed`.
"""

from __future__ import annotations

from rlvr_sweep.config.options import Option, Registry
from rlvr_sweep.reward import grading

# The reward registry (`reward.name`): every entry is (texts, gold, *, grade, **settings) ->
# (rewards, correct), `grade` the run's grader; an option that declares `receives=("tokens",)` is also given
# each rollout's token ids (`tokens`: a list per text), `receives=("extract",)` the task's answer extraction
# for rewards (`extract(text) -> answer`, "" when none: MATH's last box, without a fallback).
REWARDS = Registry("reward", group="reward")


def score_rollouts(texts: list[str], gold: str, gate_chars: int | None, grade=grading.grade, extract=None):
    """-> (rewards, correct): the (possibly gated) rewards, and the ungated correctness. `extract`: the
    task's reward extraction (None: the last `\boxed{}`, no fallback)."""
    extract = extract or (lambda text: grading.extract_answer(text, fallback=None))
    correct = []
    for text in texts:
        pred = extract(text)
        correct.append(1.0 if pred and grade(pred, gold) else 0.0)
    rewards = [c if grading.passes_gate(text, gate_chars) else 0.0 for c, text in zip(correct, texts)]
    return rewards, correct


def first_box_token(tokens: list[int], decode) -> int:
    """Index of the token in which the first `\\boxed` of `decode(tokens)` starts; -1 if none.

    The paper's `first_box_tok` (§5.4): a box starting at token 510 or 511 can be cut by a 512-token
    prefix. Found by bisection on the prefix length (the shortest prefix whose text reaches past the
    box's first character), so it costs about log2(len(tokens)) decodes.
    """
    at = decode(tokens).find("\\boxed")
    if at < 0:
        return -1
    lo, hi = 1, len(tokens)  # the shortest prefix that reaches character `at` has length in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        if len(decode(tokens[:mid])) > at:
            hi = mid
        else:
            lo = mid + 1
    return lo - 1


def ungated(texts: list[str], gold: str, *, grade=grading.grade, extract=None):
    """The verifier's verdict alone (Arms 1, 2)."""
    return score_rollouts(texts, gold, None, grade, extract)


def gated(texts: list[str], gold: str, *, grade=grading.grade, gate_chars: int = grading.GATE_CHARS, extract=None):
    """The verdict, kept only with >= gate_chars characters before the last \\boxed (the derivation gate)."""
    return score_rollouts(texts, gold, gate_chars, grade, extract)


def _gate_set(cfg) -> list[str]:
    if cfg.reward.gate_chars is not None:
        return []
    return ["reward.gate_chars=None with reward.name='gated': a gated reward needs gate_chars (paper: 30)"]


REWARDS.add(Option("ungated", ungated, receives=("extract",), doc="the verifier's verdict alone"))
REWARDS.add(Option("gated", gated, reads=("gate_chars",), lengths=("gate_chars",), check=_gate_set, receives=("extract",),
                   doc="the verdict behind the derivation gate (paper §4.1)"))

"""Training reward (baseline spec §5, seed paper §4.1).

A rollout is correct when its last braced `\\boxed{...}` (extraction with `fallback=None`, so an
unboxed final number scores 0) grades equal to the gold answer. The `gated` reward also asks for a
derivation: at least `gate_chars` characters before the last `\\boxed`.
"""

from __future__ import annotations

from rlvr_sweep.reward import grading

REWARDS = ("ungated", "gated")


def score_rollouts(texts: list[str], gold: str, gate_chars: int | None, grade=grading.grade):
    """-> (rewards, correct): the (possibly gated) rewards, and the ungated correctness."""
    correct = []
    for text in texts:
        pred = grading.extract_answer(text, fallback=None)
        correct.append(1.0 if pred and grade(pred, gold) else 0.0)
    rewards = [c if grading.passes_gate(text, gate_chars) else 0.0 for c, text in zip(correct, texts)]
    return rewards, correct

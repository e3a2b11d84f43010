"""Reward stage: the verifier and the derivation gate (paper §4.1; baseline spec §3-§5).

`extract_answer` takes the last `\\boxed{...}`; `grade` compares it with the gold answer (normalised
string match, then sympy equivalence in a bounded worker process); `score_rollouts` turns a group's
texts into binary rewards, gated (`rfind("\\boxed") >= 30`) or not, and `shaped` adds DAPO's overlong
penalty to any reward. `get_grader` picks the baseline
grader or the optional Math-Verify one; `answering` gives a task's answer rules (MATH's where it sets none).
"""

from rlvr_sweep.reward.grading import (
    FALLBACKS, GATE_CHARS, SYMBOLIC_TIMEOUT_S, equality_check, extract_answer, grade, normalize, passes_gate,
    split_parts, training_reward,
)
from rlvr_sweep.reward.answers import answer_of, no_majority, plurality
from rlvr_sweep.reward.graders import DEFAULT_GRADER, GRADERS, get_grader, math_verify_available
from rlvr_sweep.reward.gate import REWARDS, first_box_token, score_rollouts
from rlvr_sweep.reward.answering import Answering, answering
from rlvr_sweep.reward.overlong import overlong_penalty, shaped

__all__ = [
    "Answering", "answering", "answer_of", "no_majority", "plurality", "DEFAULT_GRADER", "FALLBACKS", "GATE_CHARS", "GRADERS", "REWARDS", "SYMBOLIC_TIMEOUT_S", "equality_check",
    "extract_answer", "first_box_token", "get_grader", "grade", "math_verify_available", "normalize", "overlong_penalty",
    "passes_gate", "score_rollouts", "shaped", "split_parts", "training_reward",
]

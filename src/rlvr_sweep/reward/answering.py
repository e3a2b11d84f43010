"""How a run reads and grades the answers of a task: its rules, MATH's where the task sets none.

`answering(task, grader)` gives a task's (`data.Task`) `extract` (read-outs), `extract_reward` (the
training reward) and `grade` with MATH's filled in where the task left one unset: the last `\\boxed{...}`
(read-outs fall back to the last number, the reward does not: baseline spec §3, §5) and the run's grader
(`grader.name`: `graders.GRADERS`). A task with a grader of its own grades with it whatever `grader.name`
says (`run.choices` refuses a `grader.name` other than the default for it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rlvr_sweep.data import Task
from rlvr_sweep.reward import grading
from rlvr_sweep.reward.graders import get_grader


@dataclass(frozen=True)
class Answering:
    extract: Callable[[str], str]  # response -> answer, for read-outs
    extract_reward: Callable[[str], str]  # for the training reward ("" scores 0)
    grade: Callable[[str, str], bool]  # (pred, gold) -> correct


def boxed_only(text: str) -> str:
    """MATH's reward extraction: the last braced box, no fallback."""
    return grading.extract_answer(text, fallback=None)


def answering(task: Task, grader: str) -> Answering:
    if task.extract is None:
        extract, strict = grading.extract_answer, task.extract_reward or boxed_only
    else:
        extract, strict = task.extract, task.extract_reward or task.extract
    return Answering(extract, strict, task.grade or get_grader(grader))

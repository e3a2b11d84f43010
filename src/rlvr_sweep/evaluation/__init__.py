"""Evaluation stage: read-outs of a policy on benchmark items (paper §5; baseline spec §8).

Every read-out takes `ReadoutSettings` and is registered by its `eval.name` (`READOUTS`):
`evaluate_greedy` (greedy, in left-padded batches of 32 in dataset order by default, or length-sorted
/ refilled), `evaluate_sampled` (k draws per item, §5.5) and `evaluate_forks` (greedy root plus
deterministic low-margin forks from one teacher-forced margin pass, §5.6). `probe` splices a donor's
prefixes into a recipient (Table 5A): `python -m rlvr_sweep.evaluation probe DONOR RECIPIENT --out DIR`.
"""

from rlvr_sweep.evaluation.continuation import Continuations, continue_prefixes, plan_batches
from rlvr_sweep.evaluation.forks import evaluate_forks, plan_item_forks
from rlvr_sweep.evaluation.greedy import evaluate_greedy, grade_row
from rlvr_sweep.evaluation.readout import ReadoutSettings, accuracy_rows
from rlvr_sweep.evaluation.registry import READOUTS
from rlvr_sweep.evaluation.sampled import evaluate_sampled
from rlvr_sweep.evaluation.schedule import SCHEDULES, decode_readout
from rlvr_sweep.evaluation.teacher_forcing import TeacherForced, agreement, teacher_forced

__all__ = [
    "Continuations", "READOUTS", "SCHEDULES", "ReadoutSettings", "TeacherForced", "accuracy_rows",
    "agreement",
    "continue_prefixes", "decode_readout", "evaluate_forks", "evaluate_greedy", "evaluate_sampled",
    "grade_row", "plan_batches", "plan_item_forks", "teacher_forced",
]

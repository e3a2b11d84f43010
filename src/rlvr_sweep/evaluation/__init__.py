"""Evaluation stage: read-outs of a policy on benchmark items (paper §5; baseline spec §8).

Every read-out takes `ReadoutSettings` and is registered by its `eval.name` (`READOUTS`):
`evaluate_greedy` (greedy, in left-padded batches of 32 in dataset order by default, or length-sorted
/ refilled), `evaluate_sampled` (k draws per item, §5.5) and `evaluate_forks` (greedy root plus
deterministic low-margin forks from one teacher-forced margin pass, §5.6). `probe` splices a donor's
prefixes into a recipient (Table 5A): `python -m rlvr_sweep.evaluation probe DONOR RECIPIENT --out DIR`.
"""

import importlib

# name -> the module that defines it, imported when first asked for (torch and transformers come with most):
# `python -m rlvr_sweep.evaluation probe` refuses a busy or finished folder before any of them loads
_WHERE = {
    "Continuations": "continuation", "continue_prefixes": "continuation", "plan_batches": "continuation",
    "evaluate_forks": "forks", "plan_item_forks": "forks", "evaluate_greedy": "greedy", "grade_row": "greedy",
    "ReadoutSettings": "readout", "accuracy_rows": "readout", "READOUTS": "registry",
    "evaluate_sampled": "sampled", "SCHEDULES": "schedule", "decode_readout": "schedule",
    "TeacherForced": "teacher_forcing", "agreement": "teacher_forcing", "teacher_forced": "teacher_forcing",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f"rlvr_sweep.evaluation.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'rlvr_sweep.evaluation' has no attribute {name!r}")

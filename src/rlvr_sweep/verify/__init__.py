"""Verify stage: recompute what runs stored, from stored tables and pure functions (paper §7).

`regrade` re-extracts and re-grades every stored eval response and rollout reward (PASS 1);
`compare` / `compare_run` put the baseline grader beside Math-Verify. It never imports the trainer.
`python -m rlvr_sweep.verify regrade|compare|compare-run ...` (see `cli`).
"""

from rlvr_sweep.verify.compare import (
    COMPARE_FILES, GOLD_CHECKS, BadInput, compare, compare_golds, compare_run, compare_run_dir, find_runs,
)
from rlvr_sweep.verify.regrade import regrade, regrade_run, run_grader

__all__ = [
    "COMPARE_FILES", "GOLD_CHECKS", "BadInput", "compare", "compare_golds", "compare_run", "compare_run_dir",
    "find_runs", "regrade", "regrade_run", "run_grader",
]

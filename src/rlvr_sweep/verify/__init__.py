"""Verify stage: recompute what runs stored, from stored tables and pure functions (paper §7).

`regrade` re-extracts and re-grades every stored eval response and rollout reward and `integrity`
checks each finished run folder (PASS 1); `analytic` checks the sampler laws, Proposition 2 and
zero-gradient AdamW (PASS 2); `ledgers` and `rebuild` check the conservation laws, token totals and
Tables 1-3 (PASS 3); `testtime`, `testtime_rules` and `margins` check the sampled / fork read-outs and the
prefix-splice probes (PASS 4: regraded, re-derived, margins re-run through the model on a sample,
Tables 4 / 5A / 5B recounted); `passes.run_all` runs all four. `compare` / `compare_run` put the baseline
grader beside Math-Verify. It never imports the trainer.
`python -m rlvr_sweep.verify all|regrade|compare|compare-run ...` (see `cli`).
"""

from rlvr_sweep.verify.compare import (
    COMPARE_FILES, GOLD_CHECKS, BadInput, compare, compare_golds, compare_run, compare_run_dir, find_runs,
)
from rlvr_sweep.verify.passes import PassResult, pass1, pass2, pass3, pass4, run_all
from rlvr_sweep.verify.regrade import regrade, regrade_run, run_grader

__all__ = [
    "COMPARE_FILES", "GOLD_CHECKS", "BadInput", "PassResult", "compare", "compare_golds", "compare_run",
    "compare_run_dir", "find_runs", "pass1", "pass2", "pass3", "pass4", "regrade", "regrade_run", "run_all",
    "run_grader",
]

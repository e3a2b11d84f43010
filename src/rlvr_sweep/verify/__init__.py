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

import importlib
import sys
import types

_HOMES = {  # each name's module, imported when the name is first asked for: `python -m
    # rlvr_sweep.verify.analytic` (PASS 2's process) then imports neither pandas nor the sweep readers
    **dict.fromkeys(("COMPARE_FILES", "GOLD_CHECKS", "BadInput", "compare", "compare_golds", "compare_run",
                     "compare_run_dir", "find_runs"), "compare"),
    **dict.fromkeys(("PassResult", "pass1", "pass2", "pass3", "pass4", "run_all"), "passes"),
    **dict.fromkeys(("regrade", "regrade_run", "run_grader"), "regrade"),
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(importlib.import_module(f"rlvr_sweep.verify.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'rlvr_sweep.verify' has no attribute {name!r}")


class _Package(types.ModuleType):
    """`verify.regrade` and `verify.compare` stay the functions once their submodules are imported
    (importing a submodule binds it as its package's attribute; the eager imports used to rebind them)."""

    def __setattr__(self, name, value):
        if not (name in _HOMES and isinstance(value, types.ModuleType)):
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

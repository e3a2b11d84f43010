"""Run stage: one run, top to bottom (paper §1, §3.2, §4; DESIGN "Shape").

`plan(cfg)` works out what a run computes from (its identity) and where it lives, before anything
is written; `run(cfg)` (`lifecycle`) reads out the base policy, trains (`train.train_loop`: rollout -> reward ->
credit -> loss -> optimizer step -> ledger, one question per step), keeps and reads out the trained
policy, and writes every table into the run's folder; `checkpoint` and `folder` make a killed run resume where
it stopped; `loggers` and `progress` report as it goes. task=evaluate reads out a saved checkpoint.
"""

import importlib

from rlvr_sweep.run.plan import Plan, plan  # no torch: a relaunch decides "finished, skip" from the plan alone

# imported from their modules when first asked for (the registries and running import torch)
_HOMES = {"check_choices": "choices", "run": "lifecycle", "run_plan": "lifecycle"}
__all__ = sorted([*_HOMES, "Plan", "plan"])


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(importlib.import_module(f"rlvr_sweep.run.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'rlvr_sweep.run' has no attribute {name!r}")

"""Run stage: one run, top to bottom (paper §1, §3.2, §4; DESIGN "Shape").

`plan(cfg)` works out what a run computes from (its identity) and where it lives, before anything
is written; `run(cfg)` (`lifecycle`) reads out the base policy, trains (`train.train_loop`: rollout -> reward ->
credit -> loss -> optimizer step -> ledger, one question per step), keeps and reads out the trained
policy, and writes every table into the run's folder; `checkpoint` makes a killed run resume where
it stopped; `loggers` and `progress` report as it goes. task=evaluate reads out a saved checkpoint.
"""

from rlvr_sweep.run.choices import check_choices
from rlvr_sweep.run.lifecycle import run, run_plan
from rlvr_sweep.run.plan import Plan, plan

__all__ = ["Plan", "check_choices", "plan", "run", "run_plan"]

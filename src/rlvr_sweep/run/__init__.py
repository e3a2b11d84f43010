"""Run stage: one run, top to bottom (paper §1, §3.2, §4; DESIGN "Shape").

`run(cfg)` (`lifecycle`) reads out the base policy, trains (`train.train_loop`: rollout -> reward ->
credit -> loss -> optimizer step -> ledger, one question per step), keeps and reads out the trained
policy, and writes every table into the run's folder; `checkpoint` makes a killed run resume where
it stopped; `loggers` and `progress` report as it goes. task=evaluate reads out a saved checkpoint.
"""

from rlvr_sweep.run.lifecycle import run, with_checkpoint_identity

__all__ = ["run", "with_checkpoint_identity"]

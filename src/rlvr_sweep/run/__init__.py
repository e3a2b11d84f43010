"""Run stage: one run, top to bottom (paper §1, §3.2, §4; DESIGN "Shape").

`run(cfg)` reads out the base policy, trains (rollout -> reward -> credit -> loss -> optimizer step
-> ledger, one question per step), reads out the trained policy and writes every table into the
run's folder; `checkpoint` makes a killed run resume where it stopped.
"""

from rlvr_sweep.run.train import run

__all__ = ["run"]

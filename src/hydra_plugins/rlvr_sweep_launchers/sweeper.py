"""The sweeper of `python -m rlvr_sweep -m`: Hydra's basic sweeper, minus a second composition.

Before launching a batch, Hydra's basic sweeper composes every job once to see that it can be
composed, and the launcher composes it again to run it. The command line's preflight
(`rlvr_sweep.sweep.preflight.check_sweep`) has composed, built and planned every job before Hydra
starts, so a job it checked is not composed a third time; a job it did not check (a sweep over
Hydra's own settings, a batch the preflight never saw) is validated as Hydra validates it.
"""

from __future__ import annotations

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

from rlvr_sweep.sweep.preflight import CHECKED_JOBS, hydra_part, job_part


class CheckedSweeper(BasicSweeper):
    def validate_batch_is_legal(self, batch) -> None:
        same_hydra = len({tuple(hydra_part(job)) for job in batch}) <= 1
        unchecked = [job for job in batch if not same_hydra or tuple(job_part(job)) not in CHECKED_JOBS]
        if unchecked:
            super().validate_batch_is_legal(unchecked)

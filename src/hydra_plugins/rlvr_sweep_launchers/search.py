"""`hydra/sweeper=optuna` (conf/hydra/sweeper/optuna.yaml): Optuna's sweeper, ending in one line where every
trial failed.

Optuna's sweeper asks the study for its best trial once the trials ran, and a study without a completed
trial raises (`No trials are completed yet`): a search whose every trial failed would end in a traceback.
Here it ends with one line, and the sweep summary (`sweep.summary`) names each trial and why it failed.
"""

from __future__ import annotations

import logging

from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper

log = logging.getLogger(__name__)
NO_TRIAL_COMPLETED = "No trials are completed yet"  # optuna's message for a study without a completed trial


class CheckedOptunaSweeper(OptunaSweeper):
    def sweep(self, arguments):
        try:
            return super().sweep(arguments)
        except ValueError as err:
            if NO_TRIAL_COMPLETED not in str(err):
                raise
            log.error("search ended: no trial completed (each one failed; the summary below says why)")

"""`hydra/sweeper=optuna` (the Optuna plugin's own config, with `_target_` set here by the preflight):
Optuna's sweeper, ending in one line where every trial failed, and ending cleanly once a grid sampler
(`hydra/sweeper/sampler=grid`) has tried every point.

Optuna's sweeper asks the study for its best trial once the trials ran, and a study without a completed
trial raises (`No trials are completed yet`): a search whose every trial failed would end in a traceback.
Here it ends with one line, and the sweep summary (`sweep.summary`) names each trial and why it failed.
Hydra imports every module of the `hydra_plugins` namespace at start-up, and takes a sweeper from nowhere
else; Optuna's plugin is optional (`pip install 'rlvr_sweep[search]'`), so without it this module defines
nothing (and says nothing: the preflight names the missing package when a line asks for the sweeper).
"""

from __future__ import annotations

import logging

try:
    from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper
except ImportError:  # the optional plugin is not installed
    OptunaSweeper = None

log = logging.getLogger(__name__)
NO_TRIAL_COMPLETED = "No trials are completed yet"  # optuna's message for a study without a completed trial
# optuna's grid sampler stops the study once every point was tried, which only works inside `optimize`:
# under the sweeper's ask-and-tell it raises this instead, after the last point's trial was told
GRID_DONE = "`Study.stop` is supposed to be invoked inside an objective function or a callback"

if OptunaSweeper is not None:
    logging.getLogger("alembic").setLevel(logging.WARNING)  # optuna's storage imports: a line per plugin at INFO

    class CheckedOptunaSweeper(OptunaSweeper):
        def sweep(self, arguments):
            try:
                return super().sweep(arguments)
            except ValueError as err:
                if NO_TRIAL_COMPLETED not in str(err):
                    raise
                log.error("search ended: no trial completed (each one failed; the summary below says why)")
            except RuntimeError as err:
                if GRID_DONE not in str(err):
                    raise
                log.info("search ended: every point of the grid was tried")

"""One trial of a hyperparameter search (`sweep.search`): the job a search sweeper launches.

The trial's config is built and checked, its objective resolved (`search.objective_of`: the test-benchmark
guard included) and every run it needs (one per `sweep.objective_seeds`, else its own seed) located and
planned before any of them trains, as a grid's preflight plans its jobs; a finished run is read, not run
again. The trial returns the objective's mean over its runs; a trial that is refused or fails returns
`search.failed_trial(why)` and says why in one line, in the log and in its `trial_<n>.json`.
"""

from __future__ import annotations

import dataclasses
import logging
import traceback
from pathlib import Path

from rlvr_sweep.config import build_config
from rlvr_sweep.plugins import plugin_frame
from rlvr_sweep.sweep.search import failed_trial, objective_of, value_of
from rlvr_sweep.sweep.search_record import record_of, write_trial
from rlvr_sweep.sweep.summary import JOB_ERROR, POINTER

log = logging.getLogger(__name__)


def run_trial(raw, job_dir: Path, number: int, overrides: list[str]):
    """The trial's value (a float), or `failed_trial(why)`."""
    from rlvr_sweep.run.loggers import check_loggers
    from rlvr_sweep.run.plan import finished_as_left, locate

    try:
        folder = record_of(job_dir.parent)  # this launch's own record (`search_record.start_search`)
    except ValueError as err:  # no record to write to: the trial says why in its job folder and fails
        log.error("trial %d failed: %s", number, err)
        (job_dir / JOB_ERROR).write_text(f"{err}\n")
        return failed_trial(str(err))
    record = {"overrides": list(overrides)}
    write_trial(folder, number, {**record, "status": "started"})  # a trial cut off reads as unfinished
    try:
        cfg = build_config(raw)
        check_loggers(cfg.logger)
        record["objective"] = objective = objective_of(cfg)
        # a run another process holds (another search, a grid over the same settings) is waited for and read:
        # its being busy says nothing of the trial's settings (run.wait_for_lock is not part of the identity)
        waiting = dataclasses.replace(cfg.run, wait_for_lock=True)
        configs = [dataclasses.replace(cfg, seed=seed, run=waiting) for seed in (cfg.sweep.objective_seeds or [cfg.seed])]
        located = [(c, locate(c)) for c in configs]  # every run of the trial checked before any trains
        (job_dir / POINTER).write_text("".join(f"{where.run_dir.resolve()}\n" for _, where in located))
        done = [finished_as_left(where.run_dir) for _, where in located]
        plans = [None] * len(done)
        if any(info is None for info in done):
            from rlvr_sweep.run import plan, run_plan  # torch and transformers: only when a run is left to run

            plans = [plan(c) if info is None else None for (c, _), info in zip(located, done)]
        runs, values = [], []
        for (c, where), info, planned in zip(located, done, plans):
            info = info or run_plan(planned)
            values.append(value_of(info, objective))
            runs.append({"run_dir": str(Path(where.run_dir).resolve().relative_to(Path(c.run.out_root).resolve())),
                         "run_hash": info.get("run_hash"), "seed": c.seed, "value": values[-1],
                         "skipped": bool(info.get("skipped"))})
    except Exception as err:  # a refused or failed trial is the search's to record, not the end of it
        said = _one_line(err)
        log.error("trial %d failed: %s", number, said)
        (job_dir / JOB_ERROR).write_text(f"{said}\n\n{traceback.format_exc()}")
        write_trial(folder, number, {**record, "status": "failed", "error": said})
        return failed_trial(said)
    value = sum(values) / len(values)
    write_trial(folder, number, {**record, "status": "ok", "value": value, "runs": runs})
    log.info("trial %d: %s = %.4f (%d run%s)", number, objective, value, len(runs), "" if len(runs) == 1 else "s")
    return value


def _one_line(err: Exception) -> str:
    frame = plugin_frame(err.__traceback__)
    if frame is not None:  # the researcher's own code raised it (CONVENTIONS #20)
        return f"plugin {frame.module} raised {type(err).__name__}: {err} in {frame}"
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {first}" if first else type(err).__name__

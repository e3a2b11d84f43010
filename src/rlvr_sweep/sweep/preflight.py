"""Check a sweep before any job is launched (or submitted to SLURM).

Every job of a multirun is composed from the command line's overrides and built into a checked
config (`config.build_config`: unknown keys, ranges, combinations) and planned as its run would be
(`run.plan`: the data files read, the model folder found, every prompt within the model's context,
the identity worked out). A problem stops the whole sweep at once, naming the job, instead of failing
job by job on the cluster. Data files and model files read once are not read again (`data.jsonl`,
`store.identity` memoise them by file), so a grid of many jobs on the same files plans quickly.
"""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from rlvr_sweep.config import build_config


class PreflightError(RuntimeError):
    """A job of the sweep would fail; the message names the job and the problem."""


def sweep_jobs(conf_dir: str, overrides: list[str]) -> list[list[str]]:
    """The override list of every job Hydra's basic sweeper expands a launch to: a preset's
    `hydra.sweeper.params` (e.g. `+sweep=paper_grid`) first, then the command line's overrides, which
    win on a shared key, as in `BasicSweeper.sweep`."""
    loader = GlobalHydra.instance().config_loader()
    parser = OverridesParser.create(config_loader=loader)
    fixed = [o.input_line for o in parser.parse_overrides(overrides) if not o.is_sweep_override()]
    master = compose("config", overrides=fixed, return_hydra_config=True)
    params = [f"{key}={value}" for key, value in (master.hydra.sweeper.get("params") or {}).items()]
    combined = parser.parse_overrides([*params, *overrides])
    return [job for batch in BasicSweeper.split_arguments(combined, None) for job in batch]


def check_sweep(conf_dir: str, overrides: list[str]) -> int:
    """Compose and plan every job (`run.plan`: settings, data rows, model folder, prompt lengths; a job
    whose run is finished only as far as `run.plan.locate` finds it); returns the number of jobs checked."""
    from rlvr_sweep.run import plan
    from rlvr_sweep.run.loggers import check_loggers
    from rlvr_sweep.run.plan import locate
    from rlvr_sweep.store import is_finished

    # Hydra's own settings do not reach a job's config, except where it finds config files (a
    # researcher's own config folder, `hydra.searchpath=[file://...]`)
    job_overrides = [o for o in overrides if not o.startswith("hydra") or o.startswith("hydra.searchpath=")]
    with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
        jobs = sweep_jobs(conf_dir, job_overrides)
        for number, job in enumerate(jobs, start=1):
            try:
                cfg = build_config(compose("config", overrides=job))
                check_loggers(cfg.logger)
                if not is_finished(locate(cfg).run_dir):  # a finished run was checked when it ran
                    plan(cfg)
            except Exception as err:
                raise PreflightError(f"job {number} of {len(jobs)} ({' '.join(job)}): {err}") from err
    return len(jobs)

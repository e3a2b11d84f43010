"""Check a sweep before any job is launched (or submitted to SLURM).

Every job of a multirun is composed from the command line's overrides, and each one that has not
already finished is checked: known names and compatible choices (`run.check_choices`), a model
folder or reachable hub id, and readable data files. A problem stops the whole sweep at once,
naming the job, instead of failing job by job on the cluster.
"""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from rlvr_sweep.config import Config


class PreflightError(RuntimeError):
    """A job of the sweep would fail; the message names the job and the problem."""


def sweep_jobs(conf_dir: str, overrides: list[str]) -> list[list[str]]:
    """The override list of every job the basic sweep expansion yields (sweeps from the command line)."""
    loader = GlobalHydra.instance().config_loader()
    parsed = OverridesParser.create(config_loader=loader).parse_overrides(overrides)
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def check_sweep(conf_dir: str, overrides: list[str]) -> int:
    """Compose and check every job; returns the number of jobs checked."""
    from rlvr_sweep import data, store
    from rlvr_sweep.policy import resolve_model_source
    from rlvr_sweep.run import check_choices

    job_overrides = [o for o in overrides if not o.startswith("hydra")]
    checked: dict[str, None] = {}
    with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
        jobs = sweep_jobs(conf_dir, job_overrides)
        for number, job in enumerate(jobs, start=1):
            try:
                cfg: Config = OmegaConf.to_object(compose("config", overrides=job))
                if store.is_finished(store.run_dir_for(cfg)):
                    continue  # it will be skipped
                check_choices(cfg)
                for key, check in (
                    (repr(cfg.model), lambda: resolve_model_source(cfg.model)),
                    (repr(cfg.data), lambda: data.training_rows(cfg.data)),
                    (repr((cfg.data, cfg.eval.benchmarks)),
                     lambda: [data.benchmark_rows(b, cfg.data, 1) for b in cfg.eval.benchmarks]),
                ):
                    if key not in checked:
                        check()
                        checked[key] = None
            except Exception as err:
                raise PreflightError(f"job {number} of {len(jobs)} ({' '.join(job)}): {err}") from err
    return len(jobs)

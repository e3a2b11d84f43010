"""Command line of `python -m rlvr_sweep`: Hydra, made to accept the line as a user types it.

Stock Hydra 1.3 rejects the design card's call `+arm=stopped_tree horizon=1024 -m seed=42,101,7`
twice; `sweep.command_line` makes the line one Hydra takes before it parses it.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import traceback
import warnings
from pathlib import Path

import hydra
from hydra.types import RunMode

from rlvr_sweep.config import ConfigError, build_config, register_configs
from rlvr_sweep.plugins import (
    PluginCodeChanged, PluginOutputError, load_environment_plugins, plugin_frame,
)
from rlvr_sweep.sweep.command_line import (  # noqa: F401  (re-exported: the line's normalisation)
    CONF_DIR, MULTIRUN_FLAGS, NUMERIC_GROUPS, normalize_argv, normalize_overrides,
)
from rlvr_sweep.sweep.planned import UnplannedRunError
from rlvr_sweep.sweep.search import is_search

register_configs()  # also in a SLURM job process, which resolves its output folder with ${pid:}
try:  # RLVR_SWEEP_PLUGINS: their options are config options before Hydra composes (a job process too)
    load_environment_plugins()
    _PLUGIN_ERROR = None
except ConfigError as _err:  # said in one line by `main`
    _PLUGIN_ERROR = _err

log = logging.getLogger(__name__)
EXIT_FAILED, EXIT_BAD_INPUT, EXIT_BUSY = 1, 2, 3

@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _hydra_entry(raw) -> dict:
    from hydra.core.hydra_config import HydraConfig

    from rlvr_sweep.data import DataError
    from rlvr_sweep.policy import ModelLoadError
    from rlvr_sweep.run.loggers import check_loggers
    from rlvr_sweep.run.plan import finished_as_left, locate
    from rlvr_sweep.store import RunBusyError, UnfinishedRunError
    from rlvr_sweep.sweep.summary import BUSY, JOB_ERROR, POINTER, SKIPPED, format_summary

    user_errors = (ConfigError, DataError, ModelLoadError, UnfinishedRunError, ImportError)  # one line

    single = HydraConfig.get().mode == RunMode.RUN
    job_dir = Path(HydraConfig.get().runtime.output_dir)
    if not single and is_search(HydraConfig.get().sweeper.get("_target_")):  # a search's trial: its value
        from rlvr_sweep.sweep.trial import run_trial

        return run_trial(raw, job_dir, HydraConfig.get().job.num, list(HydraConfig.get().overrides.task))
    try:
        cfg = build_config(raw)
        if single:  # the summary then names its row without composing the arm's preset again
            from rlvr_sweep.analysis.row_names import remember_preset

            remember_preset(cfg, list(HydraConfig.get().overrides.task))
        check_loggers(cfg.logger)
        located = locate(cfg)  # a finished run is skipped here, before torch and transformers are imported
        if not single:  # the run its launch planned, or nothing (`sweep.planned`)
            from rlvr_sweep.sweep.planned import check_planned
            from rlvr_sweep.sweep.preflight import job_part

            check_planned(cfg.run.out_root, job_part(HydraConfig.get().overrides.task), located.identity.run,
                          located.identity.inputs)
        (job_dir / POINTER).write_text(str(located.run_dir.resolve()))
        info = finished_as_left(located.run_dir)
        if info is None:
            from rlvr_sweep.run import plan, run_plan  # heavy imports (torch, transformers) only when a job runs

            info = run_plan(plan(cfg, located=located))
    except RunBusyError as err:  # another process runs it: not a failure of this one
        if single:
            _exit_with(err, EXIT_BUSY)
        log.warning("%s", err)
        (job_dir / BUSY).write_text(f"{err}\n")
        return {"status": "busy", "error": str(err)}
    except Exception as err:  # in a sweep, one failed run must not stop the others
        frame = plugin_frame(err.__traceback__)
        said = None
        if frame is not None:  # the researcher's own code raised it: name it there, not as a bug of ours
            said = f"plugin {frame.module} raised {type(err).__name__}: {err} in {frame}; the run is recorded as failed"
        elif isinstance(err, (PluginOutputError, PluginCodeChanged)):  # what a plugin returned or ran, named
            said = f"{err}; the run is recorded as failed"
        elif not single and isinstance(err, UnplannedRunError):  # the job's own inputs, named: not a bug
            said = f"{err}; the job is recorded as failed"
        if said is not None:
            if single:
                print(f"rlvr_sweep: {said}", file=sys.stderr, flush=True)
                sys.exit(EXIT_FAILED)
            log.error("%s; the sweep goes on", said)
            (job_dir / JOB_ERROR).write_text(f"{said}\n\n{traceback.format_exc()}")
            return {"status": "failed", "error": said}
        if single:
            if isinstance(err, user_errors):
                _exit_with(err, EXIT_BAD_INPUT)
            if isinstance(err, OSError):  # the machine's doing (a full disk, a vanished mount): not a bug
                _exit_with(err, EXIT_FAILED)
            traceback.print_exc()
            print("rlvr_sweep: this is a bug in rlvr_sweep, not a mistake in the command (the traceback above says "
                  "where); please report it with the command line", file=sys.stderr, flush=True)
            sys.exit(EXIT_FAILED)
        log.exception("run failed; the sweep goes on")
        (job_dir / JOB_ERROR).write_text(f"{type(err).__name__}: {err}\n\n{traceback.format_exc()}")
        return {"status": "failed", "error": repr(err)}
    if info.get("skipped"):
        (job_dir / SKIPPED).touch()
    # over several ranks the leader's, once (a follower's is its scratch copy); `run.ranks` exported RANK
    if single and os.environ.get("RANK", "0") == "0":
        print("\nRun summary (greedy accuracy, %):\n" + format_summary([info]), flush=True)
    return info


def _exit_with(err: Exception, code: int) -> None:
    """One line that names the problem instead of a traceback, then exit."""
    print(f"rlvr_sweep: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
    sys.exit(code)


def main() -> None:
    # our launcher presets extend the submitit plugin's schema-backed configs of the same name
    warnings.filterwarnings("ignore", message=r"\s*'hydra/launcher/submitit_(slurm|local)' is validated against ConfigStore schema",
                            category=UserWarning)
    if sys.argv[1:] in (["--version"], ["-V"]):  # before Hydra, whose own --version names Hydra's
        from rlvr_sweep import __version__

        print(f"rlvr_sweep {__version__}")
        sys.exit(0)
    if sys.argv[1:2] == ["status"]:  # `rlvr-sweep status ROOT`: no torch
        from rlvr_sweep.io.entry import run_command
        from rlvr_sweep.sweep.status_cli import main as status

        run_command("rlvr-sweep status", lambda: status(sys.argv[2:]))
    register_configs()
    if _PLUGIN_ERROR is not None:
        print(f"rlvr_sweep: {_PLUGIN_ERROR}", file=sys.stderr, flush=True)
        sys.exit(EXIT_BAD_INPUT)
    sys.argv = normalize_argv(sys.argv)
    if any(a in MULTIRUN_FLAGS for a in sys.argv[1:2]) and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("rlvr_sweep: torchrun launches one run over its ranks: drop -m (a sweep whose runs each take several "
              "GPUs: -m hydra/launcher=submitit_slurm hydra.launcher.tasks_per_node=N)", file=sys.stderr, flush=True)
        sys.exit(EXIT_BAD_INPUT)
    if any(a in MULTIRUN_FLAGS for a in sys.argv[1:2]) and not any(a.startswith("--") for a in sys.argv[2:]):
        _preflight(sys.argv[2:])
    elif not any(a.startswith("-") for a in sys.argv[1:]):
        # One run's startup makes objects that live as long as the process (torch's, transformers', the model's):
        # collecting them as they arrive costs about 1 s; `run_plan` freezes them and turns collection back on
        # once the model is loaded. (Not for a sweep: its preflight's compositions are garbage only a collection frees.)
        gc.disable()
        _check_line(sys.argv[1:])
    try:
        _hydra_entry()
    finally:  # a run skipped as done, or one that failed before its model loaded, never reached `run_plan`'s enable
        if not gc.isenabled():
            gc.enable()


def _check_line(overrides: list[str]) -> None:
    """A single run's line composed before Hydra runs it, so a mistake in it is one line and exit 2
    (Hydra's own report is a page and exit 1)."""
    from rlvr_sweep.sweep.preflight import composition_problem

    problem = composition_problem(str(CONF_DIR), overrides)
    if problem:
        print(f"rlvr_sweep: {problem}", file=sys.stderr, flush=True)
        sys.exit(EXIT_BAD_INPUT)


def _preflight(overrides: list[str]) -> None:
    """Check every job of a sweep before Hydra launches (or submits) any of them."""
    from rlvr_sweep.sweep.preflight import (
        PreflightError, check_search, check_sweep, one_composition_per_line, search_sweeper,
    )

    try:
        with one_composition_per_line():
            if search_sweeper(str(CONF_DIR), overrides):
                count, settled = check_search(str(CONF_DIR), overrides)
                print(f"Preflight: checked the search space's {count} corner job(s); each trial is checked again "
                      "as it starts", flush=True)
                sys.argv += settled  # the sweeper's direction the objective's (docs/search.md)
                return
            notes: list[str] = []
            count = check_sweep(str(CONF_DIR), overrides, notes=notes)
    except PreflightError as err:
        print(f"Sweep not launched: {err}", file=sys.stderr, flush=True)
        sys.exit(2)
    print(f"Preflight: checked {count} job(s)", flush=True)
    for note in notes:
        print(f"Preflight: {note}", flush=True)

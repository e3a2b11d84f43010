"""The submitit launchers of rlvr_sweep's presets: the plugin's, with a job that dies counted, not fatal.

(Hydra instantiates launchers only from the `hydra_plugins` namespace, hence this package beside
`rlvr_sweep`; the presets in `rlvr_sweep/conf/hydra/launcher/` name these classes.)

hydra-submitit-launcher waits for each job's result in turn; a job killed from outside (`kill -9`, the
out-of-memory killer, a node failure) has none, and submitit's `UncompletedJobError` then ends the
whole sweep command with a traceback and no summary. Here every job of the array is waited for, a job
that did not finish leaves one line in its Hydra job folder (`job_error.txt`, what a job that fails
inside the run writes too), and the sweep summary lists it among the failed runs (exit 1). A job array
that sbatch refuses (an unknown partition) ends the sweep with one line and exit 2. On a cluster without
accounting, `sacct`'s own "Slurm accounting storage is disabled" and submitit's warning that `sacct` does
not answer are said once per sweep, in one line, not at every poll (`_SacctSaidOnce`).
"""

from __future__ import annotations

import logging
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_submitit_launcher import submitit_launcher

from rlvr_sweep.sweep.preflight import job_part
from rlvr_sweep.sweep.records import add_job_ids
from rlvr_sweep.sweep.summary import JOB_ERROR

log = logging.getLogger(__name__)


class _WaitedJob:
    """A submitted job whose `results()` reports a job that did not finish instead of raising."""

    def __init__(self, job, job_dir: Path, overrides):
        self.job, self.job_dir, self.overrides = job, job_dir, list(overrides)

    def results(self):
        try:
            return self.job.results()
        except Exception as err:  # noqa: BLE001  (killed, out of memory, past its requeues: the job is gone)
            first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
            why = f"job {self.job.job_id} did not finish ({type(err).__name__}: {first})"
            self.job_dir.mkdir(parents=True, exist_ok=True)
            error = self.job_dir / JOB_ERROR
            if not error.exists():  # the run's own error, when it wrote one, says more
                error.write_text(why + "\n")
            done = JobReturn(overrides=self.overrides, status=JobStatus.COMPLETED)
            done.return_value = {"status": "failed", "error": why}
            return [done]


@contextmanager
def _every_job_waited_for(sweep_dir: Path):
    """While the plugin launches: its job array comes back as `_WaitedJob`s, each with its job folder
    (`<sweep dir>/<job number>`; the plugin maps its jobs over (overrides, dir key, number, ...))."""
    import submitit

    real = submitit.AutoExecutor.map_array

    def map_array(executor, fn, *iterables):
        jobs = real(executor, fn, *iterables)
        overrides, numbers = iterables[0], iterables[2]
        add_job_ids({tuple(job_part(o)): job.job_id for job, o in zip(jobs, overrides)}, executor.cluster)  # for `status`
        return [_WaitedJob(job, sweep_dir / str(n), o) for job, n, o in zip(jobs, numbers, overrides)]

    submitit.AutoExecutor.map_array = map_array
    try:
        yield
    finally:
        submitit.AutoExecutor.map_array = real


class LocalLauncher(submitit_launcher.LocalLauncher):
    def launch(self, job_overrides, initial_job_idx):
        with _every_job_waited_for(Path(str(self.config.hydra.sweep.dir))):
            return super().launch(job_overrides, initial_job_idx)


class _SacctSaidOnce(logging.Filter):
    """submitit asks `sacct` for its jobs' states at every poll (after 2, 4, 8, ... s). On a cluster without
    accounting storage each call fails: `sacct` prints "Slurm accounting storage is disabled" on this
    process's stderr, and submitit warns (through its stdout and stderr handlers, and Hydra's log).
    While installed, `sacct` is run with its stderr captured (submitit's module sees this object as its
    `subprocess`), submitit's warnings about it are dropped, and the first failure is said in one line
    with sacct's own words; a message sacct prints while it answers is passed on once."""

    def __init__(self) -> None:
        super().__init__()
        self.reason, self.said, self.passed_on = "", False, set()

    def __getattr__(self, name):  # everything else of `subprocess`, for submitit's other calls
        return getattr(subprocess, name)

    def check_output(self, command, **kwargs):
        if list(command)[:1] != ["sacct"]:
            return subprocess.check_output(command, **kwargs)
        try:
            proc = subprocess.run(command, capture_output=True, check=True, **kwargs)
        except subprocess.CalledProcessError as err:
            self.reason = self.reason or _first_line(err.stderr) or f"exit {err.returncode}"
            raise
        except OSError as err:  # no sacct on this machine
            self.reason = self.reason or str(err)
            raise
        words = _first_line(proc.stderr)
        if words and words not in self.passed_on:
            self.passed_on.add(words)
            print(words, file=sys.stderr, flush=True)
        return proc.stdout

    def filter(self, record: logging.LogRecord) -> bool:
        if "Bypassing sacct error" not in record.getMessage():
            return True
        if not self.said:
            self.said = True
            log.warning("sacct does not answer on this cluster (%s): submitit follows the jobs without it; "
                        "its further warnings about it are not shown", self.reason or "no accounting storage?")
        return False


def _first_line(text) -> str:
    text = text.decode(errors="replace") if isinstance(text, bytes) else (text or "")
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


@contextmanager
def _sacct_said_once():
    """For one launch: `sacct`'s failure and submitit's warnings about it said once (`_SacctSaidOnce`)."""
    from submitit.core import core

    once = _SacctSaidOnce()
    submitit_log = logging.getLogger("submitit")
    submitit_log.addFilter(once)
    core.subprocess = once
    try:
        yield
    finally:
        core.subprocess = subprocess
        submitit_log.removeFilter(once)


class SlurmLauncher(submitit_launcher.SlurmLauncher):
    def launch(self, job_overrides, initial_job_idx):
        from submitit.core.utils import FailedJobError

        try:
            with _sacct_said_once(), _every_job_waited_for(Path(str(self.config.hydra.sweep.dir))):
                return super().launch(job_overrides, initial_job_idx)
        except FailedJobError as err:  # sbatch refused the array (a partition, account or limit): nothing runs
            said = [line.strip() for line in str(err).strip("'\"").splitlines() if line.strip()]
            print(f"Sweep not launched: SLURM refused the job array: {' '.join(said[:2]) or err!r} "
                  "(hydra.launcher.partition / account / limits)", file=sys.stderr, flush=True)
            sys.exit(2)

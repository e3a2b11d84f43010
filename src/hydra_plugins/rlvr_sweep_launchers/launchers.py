"""The submitit launchers of rlvr_sweep's presets: the plugin's, with a job that dies counted, not fatal.

(Hydra instantiates launchers only from the `hydra_plugins` namespace, hence this package beside
`rlvr_sweep`; the presets in `rlvr_sweep/conf/hydra/launcher/` name these classes.)

hydra-submitit-launcher waits for each job's result in turn; a job killed from outside (`kill -9`, the
out-of-memory killer, a node failure) has none, and submitit's `UncompletedJobError` then ends the
whole sweep command with a traceback and no summary. Here every job of the array is waited for, a job
that did not finish leaves one line in its Hydra job folder (`job_error.txt`, what a job that fails
inside the run writes too), and the sweep summary lists it among the failed runs (exit 1). A job array
that sbatch refuses (an unknown partition) ends the sweep with one line and exit 2, and submitit's
warning that `sacct` does not answer (a cluster without accounting) is said once, not at every poll.
"""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_submitit_launcher import submitit_launcher

from rlvr_sweep.sweep.preflight import job_part
from rlvr_sweep.sweep.records import add_job_ids
from rlvr_sweep.sweep.summary import JOB_ERROR


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


class _SacctOnce(logging.Filter):
    """submitit warns at every poll when `sacct` fails (a cluster without accounting storage): said once."""

    said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if "Bypassing sacct error" not in record.getMessage():
            return True
        if self.said:
            return False
        self.said = True
        record.msg, record.args = ("sacct does not answer on this cluster (no accounting storage?): submitit follows "
                                   "the jobs without it; its further warnings about it are not shown"), ()
        return True


class SlurmLauncher(submitit_launcher.SlurmLauncher):
    def launch(self, job_overrides, initial_job_idx):
        from submitit.core.utils import FailedJobError

        logging.getLogger("submitit").addFilter(_SacctOnce())

        try:
            with _every_job_waited_for(Path(str(self.config.hydra.sweep.dir))):
                return super().launch(job_overrides, initial_job_idx)
        except FailedJobError as err:  # sbatch refused the array (a partition, account or limit): nothing runs
            said = [line.strip() for line in str(err).strip("'\"").splitlines() if line.strip()]
            print(f"Sweep not launched: SLURM refused the job array: {' '.join(said[:2]) or err!r} "
                  "(hydra.launcher.partition / account / limits)", file=sys.stderr, flush=True)
            sys.exit(2)

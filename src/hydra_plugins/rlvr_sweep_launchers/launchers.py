"""The submitit launchers of rlvr_sweep's presets: the plugin's, with a job that dies counted, not fatal.

(Hydra instantiates launchers only from the `hydra_plugins` namespace, hence this package beside
`rlvr_sweep`; the presets in `rlvr_sweep/conf/hydra/launcher/` name these classes.)

hydra-submitit-launcher waits for each job's result in turn; a job killed from outside (`kill -9`, the
out-of-memory killer, a node failure) has none, and submitit's `UncompletedJobError` then ends the
whole sweep command with a traceback and no summary. Here every job of the array is waited for, a job
that did not finish leaves one line in its Hydra job folder (`job_error.txt`, what a job that fails
inside the run writes too), and the sweep summary lists it among the failed runs (exit 1).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_submitit_launcher import submitit_launcher

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


class SlurmLauncher(submitit_launcher.SlurmLauncher):
    def launch(self, job_overrides, initial_job_idx):
        with _every_job_waited_for(Path(str(self.config.hydra.sweep.dir))):
            return super().launch(job_overrides, initial_job_idx)

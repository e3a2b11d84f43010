"""A sweep's job runs the run its preflight planned, or nothing.

The preflight locates every job in the launching process and records each one's run (`sweep.records`: its
`run_hash` and its identity inputs' digests); each job locates its run again in its own process (another
process on the node, or a SLURM job elsewhere). When the two differ, the job's inputs are not what the
launch checked: a task whose rows depend on the process (a generator seeded from the time, the pid or
Python's per-process hash order), or a data file, model or plugin edited between the launch and the job.
Such a job would train in a folder no record names, which `status` never matches to its job and every
relaunch trains again; it is refused in one line naming the inputs that differ, before anything is written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rlvr_sweep.config import ConfigError
from rlvr_sweep.sweep.records import LAUNCH_ENV, SWEEPS


class UnplannedRunError(ConfigError):
    """A job computed another run than the one its launch planned."""


def planned_job(out_root, overrides: list[str]) -> dict | None:
    """The launch record's entry for the job with these overrides (`preflight.job_part`), or None: no launch
    named in the environment, its record unreadable, or no job of it with these overrides."""
    stamp = os.environ.get(LAUNCH_ENV, "")
    if not stamp or "/" in stamp or stamp.startswith("."):
        return None
    try:
        record = json.loads((Path(out_root) / SWEEPS / f"{stamp}.json").read_text())
    except (OSError, ValueError, RecursionError):
        return None
    jobs = record.get("jobs") if isinstance(record, dict) else None
    return next((job for job in jobs if isinstance(job, dict) and job.get("overrides") == list(overrides)), None) \
        if isinstance(jobs, list) else None


def check_planned(out_root, overrides: list[str], run_hash: str, inputs: dict) -> None:
    """UnplannedRunError when the launch planned this job's run under another hash, naming the inputs whose
    digests differ; nothing when they agree or no plan is found."""
    job = planned_job(out_root, overrides)
    if job is None or not isinstance(job.get("run_hash"), str) or job["run_hash"] == run_hash:
        return
    planned = job.get("inputs") if isinstance(job.get("inputs"), dict) else {}
    now = {name: part.get("sha256") for name, part in inputs.items()}
    differ = sorted(n for n in set(planned) | set(now) if planned.get(n) != now.get(n))
    which = (f"its inputs {', '.join(differ)} differ" if differ else "its settings differ")
    raise UnplannedRunError(
        f"this job computed run {run_hash}, not the run {job['run_hash']} its launch planned: {which} between the "
        "launching process and this one (a task's rows that change from process to process: a generator seeded "
        "from the time, the pid or Python's hash order; or a data file, model or plugin edited since the launch); "
        "nothing was written")

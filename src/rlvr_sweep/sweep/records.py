"""What a sweep launched: one JSON record per launch, under `<run.out_root>/.sweeps/`, for `status`.

A run folder exists only once its job starts; until then `status` finds a queued job here. The
preflight, which composes and locates every job, writes the record before Hydra launches anything:
each job's overrides, arm, seed, horizon and the run folder it will write. The SLURM launchers add each
job's SLURM id (`123_4`: array 123, index 4) once submitit has submitted the array. The launching
process's pid and host are kept, so a job of a basic-launcher sweep whose process has ended is told
apart from one still waiting its turn. Records are JSON (read with `json`), never pickles.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from rlvr_sweep.io import atomic_write_json

SWEEPS = ".sweeps"
_written: list[Path] = []  # this process's records, which its launcher completes


def write_records(jobs: list[dict], command: list[str]) -> list[Path]:
    """One record per run root the jobs write under (`jobs`: {overrides, run_dir, arm, ...}); their paths."""
    by_root: dict[Path, list[dict]] = {}
    for job in jobs:
        by_root.setdefault(Path(job["out_root"]), []).append(job)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    paths = []
    for root, its_jobs in by_root.items():
        path = root / SWEEPS / f"{stamp}-{os.getpid()}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, {"created_at": time.time(), "pid": os.getpid(), "host": socket.gethostname(),
                                 "command": command, "jobs": its_jobs})
        paths.append(path)
    _written[:] = paths
    return paths


def add_job_ids(ids_by_overrides: dict[tuple[str, ...], str], scheduler: str) -> None:
    """Note each submitted job's id (SLURM's `123_4`, or the local executor's) and the scheduler
    (`slurm`, `local`) in this process's records; jobs are matched by their overrides."""
    for path in _written:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for job in record["jobs"]:
            job_id = ids_by_overrides.get(tuple(job["overrides"]))
            if job_id:
                job.update(job=str(job_id), scheduler=scheduler)
        atomic_write_json(path, record)


def read_records(root: Path) -> list[dict]:
    """Every record under `root/.sweeps` (and a profile folder's parent's), oldest first; an unreadable
    record is left out."""
    found = []
    for folder in {Path(root) / SWEEPS, Path(root).parent / SWEEPS}:
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(record, dict) and isinstance(record.get("jobs"), list):
                found.append({**record, "path": str(path)})
    return sorted(found, key=lambda r: r.get("created_at", 0))

"""A running run's progress file, `progress.json`: what `status` reads to say where a run is.

The run rewrites it whole (an atomic rename) at every training step and read-out batch: its pid and
host, the phase (`train`, `read-out base toy_heldout`, ...), done / total, the last update's seconds,
tokens per second, the ETA of the phase, and the step its last checkpoint holds (what a relaunch after
a kill resumes from). A finished run removes it before its manifest is sealed, so a sealed folder is
what it was before this file existed; a run that failed or was killed leaves it where it stopped.
`status` knows a run is running by its lock (`store.lock`), never by this file's age.
"""

from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from rlvr_sweep.io import atomic_write_json

PROGRESS_JSON = "progress.json"


class Beacon:
    """The progress file of one run folder; `update(**fields)` merges the fields and rewrites it."""

    def __init__(self, run_dir: Path, **fields):
        self.path = Path(run_dir) / PROGRESS_JSON
        self.fields = {"pid": os.getpid(), "host": socket.gethostname(), "started_at": time.time(), **fields}

    def update(self, **fields) -> None:
        self.fields.update(fields, updated_at=time.time())
        try:  # whole or not at all, but not flushed to disk: an fsync a step was ~6 ms of a 0.09 s smoke step
            atomic_write_json(self.path, self.fields, durable=False)
        except OSError:  # progress is advisory: a full or read-only disk must not stop the run here
            pass

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


_current: Beacon | None = None


@contextmanager
def beacon_for(run_dir: Path, **fields):
    """While the body runs, `current()` is this run's beacon (one run at a time per process)."""
    global _current
    before, _current = _current, Beacon(run_dir, **fields)
    try:
        _current.update()
        yield _current
    finally:
        _current = before


def current() -> Beacon | None:
    return _current


def read_progress(run_dir: Path) -> dict | None:
    """The progress file's fields, or None when there is none (or it cannot be read)."""
    try:
        data = json.loads((Path(run_dir) / PROGRESS_JSON).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None

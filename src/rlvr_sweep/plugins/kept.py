"""The plugin code a run ran, kept beside it, so the run stays checkable after its plugin is edited.

As a run with plugins starts, every file its code record holds (`loading.code_record`: the identity's files)
is copied into the run folder's `plugin_code/`, at its own absolute path below it
(`plugin_code/home/me/lenpen/rewards.py`), so the package layout, the files a plugin reads beside its code and
the modules it imports are where the same names find them. Each copy is of the bytes the record's sha256 is
of: the bytes compiled (`compiled.COMPILED_BYTES`), else the file as read, kept only when it hashes to the
recorded digest. A resumed run keeps what is already kept. The run's manifest seals the copies with the
other files when it finishes.

The copies are never imported unless a reader asks for them by name (`verify --plugins-kept-in DIR`): a
results folder is someone's files, and its code runs on the reader's machine (CONVENTIONS #20).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from rlvr_sweep.io import atomic_write_bytes
from rlvr_sweep.plugins.compiled import COMPILED_BYTES

KEPT = "plugin_code"


def kept_path(run_dir, original: str) -> Path:
    """Where `original` (a recorded plugin file) is kept in the run folder."""
    resolved = Path(original).resolve()
    return Path(run_dir) / KEPT / resolved.relative_to(resolved.anchor)


def keep_code(run_dir, record: dict | None) -> list[str]:
    """Copy the record's files into `run_dir/plugin_code/`; the keys of those that could not be kept (the file
    gone, or no longer the bytes recorded), each said once in run.json by the caller."""
    if not record:
        return []
    missed = []
    for key, path in sorted((record.get("paths") or {}).items()):
        recorded = (record.get("files") or {}).get(key)
        target = kept_path(run_dir, path)
        if target.is_file() and _sha256(target.read_bytes()) == recorded:
            continue  # kept when the run started (a resumed run)
        data = COMPILED_BYTES.get(str(Path(path).resolve()))
        if data is None or _sha256(data) != recorded:
            try:
                data = Path(path).read_bytes()
            except OSError:
                data = None
        if data is None or _sha256(data) != recorded:
            missed.append(key)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, data)
    return missed


def kept_record(run_dir, record: dict) -> dict:
    """The record with each path pointing at the file's copy in the run folder (to be checked as any record is:
    `verify.plugin_runs.recorded_code_problem`)."""
    return {**record, "paths": {key: str(kept_path(run_dir, path)) for key, path in (record.get("paths") or {}).items()},
            "entries": [str(kept_path(run_dir, e)) if Path(e).is_absolute() else e for e in record.get("entries") or []]}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

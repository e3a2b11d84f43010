"""A file's sha256, memoised while the file stays the same (a sweep plans many jobs on the same files),
and the stamp that says a file is the same: its size, mtime, ctime, inode and device (any write sets the
ctime, which no user tool sets back; a copy is a new inode). `store.remembered` keys its cache by it too.
`rows_digest` is the digest of data rows (a run's data inputs, a task's checksums)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

_DIGESTS: dict[tuple, str] = {}


def stamp(st: os.stat_result) -> list[int]:
    """What identifies a file's content on disk (`os.stat` of it): equal stamps, the same bytes."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def file_sha256(path: Path, memo: bool = True) -> str:
    """sha256 of a file's bytes. With `memo`, remembered by its real path and `stamp`, so a changed file
    is read again (`memo=False` always reads)."""
    st = os.stat(path)
    key = (os.path.realpath(path), *stamp(st))
    if memo and key in _DIGESTS:
        return _DIGESTS[key]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def rows_digest(rows: list[dict]) -> str:
    """sha256 of rows as canonical JSON lines (keys sorted): their content, in their order."""
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps(row, sort_keys=True, ensure_ascii=False, default=str).encode())
        h.update(b"\n")
    return h.hexdigest()

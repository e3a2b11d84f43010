"""A file's sha256, memoised while the file stays the same (a sweep plans many jobs on the same files)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_DIGESTS: dict[tuple, str] = {}


def file_sha256(path: Path, memo: bool = True) -> str:
    """sha256 of a file's bytes. With `memo`, remembered by (real path, inode, size, mtime, ctime): any
    write to the file changes its ctime, so a changed file is read again (`memo=False` always reads)."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if memo and key in _DIGESTS:
        return _DIGESTS[key]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]

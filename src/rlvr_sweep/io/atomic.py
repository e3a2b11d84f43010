"""Atomic file writes: the temporary file, the flush to disk, the rename (the only copy in the package)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO


def temp_name(path: Path) -> Path:
    """Where `path` is written before it is renamed into place: `.<name>.tmp-<pid>` beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_file(path: Path, mode: int | None = None, durable: bool = True) -> Iterator[BinaryIO]:
    """Put `path` in place whole: the block fills the yielded temporary file beside it, which is flushed
    to disk and renamed over `path` (a reader sees the old file or the new one, never half of one). A
    block that raises removes the temporary file. `mode`: the new file's permission bits (default: the
    umask's). ``durable=False`` skips the flush to disk (an fsync, milliseconds): readers still never see
    half a file, but after a power loss the file may be empty, which only an advisory file may be."""
    path = Path(path)
    tmp = temp_name(path)
    try:
        with open(tmp, "wb") as f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())  # on disk before the rename makes it the file
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: Path, write: Callable[[BinaryIO], None], mode: int | None = None, durable: bool = True) -> None:
    """`atomic_file`, filled by `write(f)`."""
    with atomic_file(path, mode, durable) as f:
        write(f)


def atomic_write_bytes(path: Path, data: bytes, durable: bool = True) -> None:
    atomic_write(path, lambda f: f.write(data), durable=durable)


def atomic_write_json(path: Path, obj: dict, durable: bool = True) -> None:
    atomic_write_bytes(path, json.dumps(obj, indent=2, sort_keys=True, default=str).encode(), durable)

"""A run's failure put down to a full disk: named, with what to do, instead of a library's own error."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path


class DiskFullError(OSError):
    """The disk holding the run folder filled up; the run recorded its failure and can be resumed."""


FULL_BELOW = 1 << 20  # bytes free under which a failed write is put down to a full disk


def full_disk(run_dir: Path, err: BaseException) -> DiskFullError | None:
    """A `DiskFullError` naming the disk when `err` came from it filling up (ENOSPC, or a library's own
    error while the disk has next to nothing free), else None."""
    try:
        free = shutil.disk_usage(run_dir).free
    except OSError:
        return None
    if getattr(err, "errno", None) == errno.ENOSPC or free < FULL_BELOW:
        return DiskFullError(errno.ENOSPC, f"the disk holding {run_dir} is full ({free:,} bytes free after removing "
                                           f"the run's temporary files; the write failed with {type(err).__name__}: "
                                           f"{str(err).strip()[:200]}); free space and rerun the same command to resume")
    return None

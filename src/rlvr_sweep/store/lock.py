"""One writer per run folder: an exclusive `fcntl.flock` held for the life of the run.

The lock file sits beside the run folder (`.<name>.lock` in the arm's folder), not inside it, so it
stays put when an unfinished folder is moved aside. It holds the holder's pid, host and start time,
which a second process reports when it finds the lock taken: it then exits (`RunBusyError`) or,
with `run.wait_for_lock=true`, waits for the holder to finish. The kernel drops the lock when the
holder dies (even under `kill -9`), so a stale lock file never blocks anyone.

What this relies on: `flock` semantics on the file system that holds `run.out_root`. Local file
systems have them; Linux NFS clients emulate `flock` with NFS byte-range locks (NFSv4, or v3 with a
lock manager); Lustre needs the `flock` mount option. Where flock is a no-op (some FUSE or
`-o localflock` mounts seen from several hosts), two hosts could still run the same folder.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)


class RunBusyError(RuntimeError):
    """Another process holds the run's lock; the message names its pid and host."""


def lock_path(run_dir: Path) -> Path:
    return run_dir.parent / f".{run_dir.name}.lock"


def holder(run_dir: Path) -> str:
    """Who holds (or last held) the lock, in words."""
    try:
        info = json.loads(lock_path(run_dir).read_text() or "{}")
    except (OSError, ValueError):
        return "an unknown process"
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.get("started", 0)))
    return f"pid {info.get('pid', '?')} on host {info.get('host', '?')} (since {started})"


@contextmanager
def run_lock(run_dir: Path, wait: bool = False):
    """Hold the run's lock for the body; raise RunBusyError at once if taken (unless `wait`)."""
    path = lock_path(run_dir)
    fd = take_lock(path)
    if fd is None:
        if not wait:
            raise RunBusyError(f"{run_dir} is being run by {holder(run_dir)}; this process writes nothing "
                               "(rerun with run.wait_for_lock=true to wait for it)")
        log.info("waiting for %s, which is being run by %s", run_dir, holder(run_dir))
        fd = take_lock(path, wait=True)
    try:
        yield
    finally:
        os.close(fd)  # releases the lock


def take_lock(path: Path, wait: bool = False) -> int | None:
    """An exclusive `flock` on `path` (made with its folder if missing), its holder's pid, host and start time
    written in it: the open descriptor, whose closing (or the process's end) releases it; None when another
    process holds it (unless `wait`: then once it is released)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    me = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, me, 0)
    return fd


def lock_holder(run_dir: Path) -> dict | None:
    """The holder's {pid, host, started} while some process holds the run's lock, else None."""
    return held_by(lock_path(run_dir))


def held_by(path: Path) -> dict | None:
    """The holder's {pid, host, started} while some process holds the lock at `path`, else None. Asks the
    kernel (a non-blocking shared `flock`, released at once), so a dead holder's file reads as free."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None  # never locked
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        except ValueError:
            info = {}
        return info if isinstance(info, dict) else {}
    finally:
        os.close(fd)
    return None

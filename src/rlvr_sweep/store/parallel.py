"""`folder_map(fn, items)`: work over many run folders on a few threads, results in order.

Reading a run's small files, hashing and decoding them spends much of its time in system calls and in
arrow's C++ code, which let other threads run, so a few threads keep both cores of a small machine
busy. (Worker processes were measured too: no faster on two cores once their results are sent back,
and they would re-import a user's script or notebook.) `RLVR_SWEEP_WORKERS=1` does it all on the
calling thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

THREADS = 4


def folder_map(fn: Callable, items: list) -> Iterator:
    """`map(fn, items)` on `THREADS` threads (or `RLVR_SWEEP_WORKERS`), in the items' order."""
    n = int(os.environ.get("RLVR_SWEEP_WORKERS", 0)) or THREADS
    if n == 1 or len(items) < 2:
        return map(fn, items)
    return _drain(fn, items, n)


def _drain(fn: Callable, items: list, n: int) -> Iterator:
    with ThreadPoolExecutor(max_workers=n) as pool:
        yield from pool.map(fn, items)

"""`folder_map(fn, items)`: work over many run folders on a few threads, results in order.

Reading a run's small files, hashing and decoding them spends much of its time in system calls and in
arrow's C++ code, which let other threads run: a thread per usable core, and at least `MIN_THREADS`
(files read cold, or from a network file system, keep a thread waiting on each), at most
`MAX_THREADS`. Measured on 2 cores, 1,024 runs' tables from a warm cache: 8.5 s on 1 thread, 4.4 s on
2, 5.4 s on 4, 6.2 s on 8; the whole `store collect` of 10,000 runs: 78 s on 2 threads and on 4 once
warm, 92 s on 2 from a cold cache. Worker processes were measured too: no faster on two cores once
their results are sent back, and they would re-import a user's script or notebook.
`RLVR_SWEEP_WORKERS=N` sets the number of threads (1: all on the calling thread).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

MIN_THREADS, MAX_THREADS = 4, 8


def threads() -> int:
    """`RLVR_SWEEP_WORKERS`, else a thread per usable core, within [`MIN_THREADS`, `MAX_THREADS`]."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return int(os.environ.get("RLVR_SWEEP_WORKERS", 0)) or min(max(cores, MIN_THREADS), MAX_THREADS)


AHEAD = 2  # results computed ahead of the consumer, per thread


def folder_map(fn: Callable, items: list) -> Iterator:
    """`map(fn, items)` on `threads()` threads, in the items' order. At most `AHEAD` results per thread
    wait for the consumer, so a slow consumer (a writer) does not make memory grow with the items."""
    n = threads()
    if n == 1 or len(items) < 2:
        return map(fn, items)
    return _drain(fn, items, n)


def _drain(fn: Callable, items: list, n: int) -> Iterator:
    with ThreadPoolExecutor(max_workers=n) as pool:
        pending: collections.deque = collections.deque()
        for item in items:
            if len(pending) >= n * AHEAD:
                yield pending.popleft().result()
            pending.append(pool.submit(fn, item))
        while pending:
            yield pending.popleft().result()

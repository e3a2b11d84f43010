"""`store.parallel.folder_map`: results in order, and a bounded read-ahead for a slow consumer."""

from __future__ import annotations

import threading

import pytest

from rlvr_sweep.store import parallel


def test_results_come_in_order_and_errors_surface(monkeypatch):
    monkeypatch.setenv("RLVR_SWEEP_WORKERS", "4")
    assert list(parallel.folder_map(lambda x: x * x, list(range(50)))) == [x * x for x in range(50)]
    with pytest.raises(ZeroDivisionError):
        list(parallel.folder_map(lambda x: 1 // (x - 7), list(range(20))))


def test_a_slow_consumer_holds_at_most_ahead_results_per_thread(monkeypatch):
    monkeypatch.setenv("RLVR_SWEEP_WORKERS", "3")
    started, lock = [], threading.Lock()

    def work(x):
        with lock:
            started.append(x)
        return x

    seen = []
    for x in parallel.folder_map(work, list(range(100))):
        with lock:
            ahead = len(started) - len(seen)
        assert ahead <= 3 * parallel.AHEAD  # what was started and not yet taken
        seen.append(x)
    assert seen == list(range(100))

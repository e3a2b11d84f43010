"""One writer per run folder: the lock, and names of moved-aside folders that never collide."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from rlvr_sweep.store import RunBusyError, run_lock, stale_name
from rlvr_sweep.store.lock import lock_path


def test_a_second_holder_is_refused_and_told_who_holds_the_run(tmp_path):
    run_dir = tmp_path / "arm" / "h512_s1_abc"
    with run_lock(run_dir):
        assert lock_path(run_dir).parent == run_dir.parent and not run_dir.exists()  # beside, not inside
        with pytest.raises(RunBusyError) as err:
            with run_lock(run_dir):
                pass
        assert f"pid {os.getpid()} on host {socket.gethostname()}" in str(err.value)
        assert "writes nothing" in str(err.value) and "run.wait_for_lock=true" in str(err.value)
    with run_lock(run_dir):  # released with the first holder
        pass


def test_waiting_holder_gets_the_lock_when_the_first_lets_go(tmp_path):
    run_dir = tmp_path / "h512_s1_abc"
    order = []
    holding = threading.Event()

    def first():
        with run_lock(run_dir):
            holding.set()
            time.sleep(0.5)
            order.append("first done")

    thread = threading.Thread(target=first)
    thread.start()
    holding.wait(5)
    started = time.monotonic()
    with run_lock(run_dir, wait=True):
        order.append("second in")
    thread.join()
    assert order == ["first done", "second in"] and time.monotonic() - started >= 0.3


def test_moved_aside_names_never_collide(tmp_path):
    run_dir = tmp_path / "h512_s1_abc"
    names = []
    for _ in range(3):  # three moves in the same second, by the same process
        run_dir.mkdir()
        moved = stale_name(run_dir)
        run_dir.rename(moved)
        names.append(moved.name)
    assert len(set(names)) == 3 and all(n.startswith("h512_s1_abc.stale-") for n in names)
    assert all(Path(tmp_path / n).is_dir() for n in names)

"""The worker pool (`reward.sandbox`): a pool begun early never charges a child's start to a request."""

from __future__ import annotations

import os
import subprocess
import threading
import time

from rlvr_sweep.reward import sandbox

SLOW_START = '''
import time


def make_handler():
    time.sleep(1.5)  # imports as slow as sympy's on a cold machine
    return lambda payload: ["echo", payload]
'''


def test_a_pool_begun_early_answers_a_request_whose_limit_is_shorter_than_a_start(tmp_path):
    module = tmp_path / "slow_worker.py"
    module.write_text(SLOW_START)
    pool = sandbox.SandboxWorker(str(module), "make_handler", size=2, unavailable="test worker: {why}")
    try:
        started = time.monotonic()
        pool.start(1)
        assert time.monotonic() - started < 0.5  # returns at once, the child starting behind it
        assert pool.request("a", limit=0.3) == ["echo", "a"]  # waits for the start, then 0.3 s for the answer
        assert time.monotonic() - started >= 1.5
        assert pool.stats()["timeouts"] == 0 and pool.stats()["worker_starts"] == 1  # the request started none
        assert pool.request("b", limit=0.3) == ["echo", "b"]
    finally:
        pool.shutdown()


QUICK_START = '''
def make_handler():
    return lambda payload: ["echo", payload]
'''


def test_a_fork_waits_for_a_child_start_under_way(tmp_path, monkeypatch):
    """Seen: `verify all` at 1,024 runs hung for good. Its main thread forked a PASS 1 part while a starter
    thread was inside Popen: the forked process inherited Popen's error pipe, so Popen waited for it to
    exit, while it waited for the parent to read its results. Want: a fork of the process waits until a
    child's start (its Popen) is done, and the pool still answers."""
    module = tmp_path / "quick_worker.py"
    module.write_text(QUICK_START)
    inside, leave = threading.Event(), threading.Event()
    real_popen = subprocess.Popen

    def slow_popen(*args, **kwargs):  # a start that takes its time, as one a fork can land in
        inside.set()
        leave.wait(30)
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(sandbox.subprocess, "Popen", slow_popen)
    pool = sandbox.SandboxWorker(str(module), "make_handler", size=1, unavailable="test worker: {why}")
    forked = threading.Event()

    def fork() -> None:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        forked.set()

    try:
        pool.start(1)
        assert inside.wait(30)
        threading.Thread(target=fork, daemon=True).start()
        assert not forked.wait(0.5)  # the fork waits for the start under way
        leave.set()
        assert forked.wait(30)
        monkeypatch.setattr(sandbox.subprocess, "Popen", real_popen)
        assert pool.request("a", limit=5.0) == ["echo", "a"]
    finally:
        leave.set()
        pool.shutdown()

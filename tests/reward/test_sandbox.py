"""The worker pool (`reward.sandbox`): a pool begun early never charges a child's start to a request."""

from __future__ import annotations

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

"""PASS 2 of `verify all` in a process of its own (`python -m rlvr_sweep.verify.analytic`), beside PASS 1.

Stdlib only, so that `python -m rlvr_sweep.verify all` can start it before it imports anything else
(`Pass2Beside.early`): torch's imports are the longest part of a small sweep's `verify all`.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rlvr_sweep.verify.result import PassResult

PASS2_MODULE = "rlvr_sweep.verify.analytic"  # run as `python -m` by Pass2Beside


class Pass2Beside:
    """PASS 2 in a child process (`python -m rlvr_sweep.verify.analytic`), started at once: it needs
    torch and no sweep (some 2 s of imports on a CPU; not `torch._dynamo`, which `torch.optim.AdamW`
    would pull in: `analytic.PlainAdamW`), so it runs on another core while PASS 1 reads the sweep. `result()` waits for it; its seconds are its own. A child
    that cannot start or answer fails the pass with its last error line."""

    def __init__(self):
        package_parent = str(Path(__file__).resolve().parents[2])  # the same rlvr_sweep as this process
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_parent, os.environ.get("PYTHONPATH"))
                                                           if p),
               "OMP_NUM_THREADS": "1"}
        self.started = time.perf_counter()
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", PASS2_MODULE], env=env,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as err:
            self.proc, self.error = None, f"cannot start the PASS 2 process: {err}"

    def done(self) -> bool:
        """The child has ended (or never started): `result()` would not wait."""
        return self.proc is None or self.proc.poll() is not None

    def close(self) -> None:
        """Stop the child if it still runs (PASS 1 raised before its result was asked for)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()

    def result(self) -> PassResult:
        if self.proc is None:
            return PassResult("PASS 2", "the analytic checks did not run", [self.error])
        out, err = self.proc.communicate()
        try:
            done = json.loads(out.strip().splitlines()[-1])
            counts, problems = done["counts"], done["problems"]
        except (IndexError, ValueError, KeyError, TypeError):
            last = (err.strip().splitlines() or [f"exit status {self.proc.returncode}, no output"])[-1]
            return PassResult("PASS 2", "the analytic checks did not run", [f"PASS 2 process: {last}"],
                              seconds=time.perf_counter() - self.started)
        return PassResult("PASS 2", f"{counts['checks']} analytic checks: {counts['summary']}", problems,
                          seconds=float(done["seconds"]))

    @classmethod
    def early(cls) -> None:
        """Start the child now, before the caller imports the sweep readers (about 0.5 s of pandas and
        pyarrow on a CPU); the next `taken()` in this process returns it. If none does (bad input, an
        error), it is stopped at exit."""
        global _EARLY
        started = cls()
        _EARLY = started
        atexit.register(started.close)

    @classmethod
    def taken(cls) -> "Pass2Beside":
        """The child `early()` started, else one started now."""
        global _EARLY
        started, _EARLY = _EARLY, None
        return started if isinstance(started, cls) else cls()


_EARLY: Pass2Beside | None = None

"""A sweep's tables built on several cores: `built(names, build_one, jobs)` (and other work named so:
`verify all` hashes every run folder in a child while it regrades them).

Each table is a function of the loaded sweep alone, and its work is Python (pandas, bootstrap loops)
that threads cannot spread. With `jobs` > 1 the tables are split by their usual cost (`COST`) into
`jobs` groups; this process builds the first, and a forked child per other group builds that one
(it shares the loaded sweep, copied on write) and sends its tables back through a pipe. Every table
is the same as one built here: the builders are deterministic, their resampling seeded. Where `fork`
is not available (macOS, Windows) everything is built here; a child that fails or dies has its group
built here again, so a builder's error surfaces as it would without children.
"""

from __future__ import annotations

import multiprocessing
import os

# seconds each table took at 1,024 smoke runs, built one by one in one process (`bench/bench_store.py`'s store;
# others count 0.1); table2b: 341 arm rows against the baseline
COST = {"table2b": 5.7, "table4": 4.3, "baseline_runs": 2.4, "table1": 1.8, "strata": 1.5, "baseline_readouts": 1.0,
        "audit": 0.9, "table2a": 0.6, "table5c": 0.4, "table5b": 0.15}
_BUILD = None  # the parent's build_one, inherited by the forked children


def default_jobs() -> int:
    """A process per usable core, at most 4 (`RLVR_SWEEP_TABLE_JOBS=N` sets it)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return int(os.environ.get("RLVR_SWEEP_TABLE_JOBS", 0)) or max(1, min(cores, 4))


def groups(names: list[str], jobs: int, cost: dict | None = None) -> list[list[str]]:
    """`names` in at most `jobs` groups of about equal cost (`cost`, default `COST`; the costliest first,
    each to the lightest group); each group keeps the names' order."""
    cost = COST if cost is None else cost
    loads = [[0.0, []] for _ in range(max(1, min(jobs, len(names))))]
    for name in sorted(names, key=lambda n: -cost.get(n, 0.1)):
        lightest = min(loads, key=lambda g: g[0])
        lightest[0] += cost.get(name, 0.1)
        lightest[1].append(name)
    return [sorted(g, key=names.index) for _, g in loads if g]


def built(names, build_one, jobs: int = 1, cost: dict | None = None) -> dict:
    """{name: build_one(name)} for every name, in order; on `jobs` processes (module docstring), split
    by `cost` (default `COST`)."""
    names = list(names)
    if jobs <= 1 or len(names) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return {name: build_one(name) for name in names}
    global _BUILD
    parts = groups(names, jobs, cost)
    context = multiprocessing.get_context("fork")
    _BUILD, children = build_one, []
    try:
        for part in parts[1:]:
            receive, send = context.Pipe(duplex=False)
            child = context.Process(target=_child, args=(part, send), daemon=True)
            child.start()
            send.close()
            children.append((part, child, receive))
    finally:
        _BUILD = None
    done = {name: build_one(name) for name in parts[0]}
    for part, child, receive in children:
        try:
            status, tables = receive.recv()  # sent by this process's own child (module docstring)
        except (EOFError, OSError):
            status, tables = "died", None
        receive.close()
        child.join()
        done.update(tables if status == "ok" else {name: build_one(name) for name in part})
    return {name: done[name] for name in names}


def _child(names: list[str], send) -> None:
    try:
        send.send(("ok", {name: _BUILD(name) for name in names}))
    except BaseException:  # built again by the parent, which then raises it as it would have
        send.send(("failed", None))
    finally:
        send.close()


class Beside:
    """`steps` (callables) run one after another in a forked child while this process does other work;
    `results()` yields each step's result in order, as the child sends it, so a caller can print each one
    as it ends. Where `fork` is not available, or from the step at which the child failed or died, the
    steps run here instead (a step's error then surfaces as it would have without the child). The child
    is daemonic: a step must not start processes with `multiprocessing` (subprocesses are fine)."""

    def __init__(self, steps):
        self.steps, self.child, self.receive = list(steps), None, None
        if self.steps and "fork" in multiprocessing.get_all_start_methods():
            context = multiprocessing.get_context("fork")
            self.receive, send = context.Pipe(duplex=False)
            self.child = context.Process(target=_steps_child, args=(self.steps, send), daemon=True)
            self.child.start()
            send.close()

    def results(self):
        for step in self.steps:
            status, value = "here", None
            if self.child is not None:
                try:
                    status, value = self.receive.recv()  # sent by this process's own child (module docstring)
                except (EOFError, OSError):
                    status = "died"
                if status != "ok":
                    self.close()
            yield value if status == "ok" else step()
        self.close()

    def close(self) -> None:
        """Stop the child if it still runs (the caller gave up early) and wait for it."""
        if self.child is not None:
            if self.child.is_alive():
                self.child.kill()
            self.child.join()
            self.receive.close()
            self.child = None


def _steps_child(steps, send) -> None:
    try:
        for step in steps:
            send.send(("ok", step()))
    except BaseException:  # this step and the rest run in the parent, which then raises it as it would have
        send.send(("failed", None))
    finally:
        send.close()

"""A pool of persistent, bounded subprocesses for untrusted or unbounded work (sympy, Math-Verify).

Parent side, `SandboxWorker(module_file, entry, ...)`: up to `size` child processes started with
`subprocess.Popen` (no `__main__` re-import; works from any thread and in daemonic pool workers).
A child loads this file and `module_file` by path, so the package `__init__` (and torch) stay out
of it, and calls `module_file`'s `entry()`, which returns the handler `payload -> result`.
`request(payload, limit)` fixes its deadline when it is called (`limit` seconds later), takes an
idle child (waiting for one only until that deadline), sends `[limit, payload]` as JSON over a
pipe and waits for the JSON reply until the same deadline (`Connection.poll`). So a request returns
within `limit` plus the time of a few Python statements (measured in `tests/reward`), whatever
other threads are doing. On timeout or death the request returns None, `stats()` counts it, and a
background thread kills the child and starts a replacement: no caller waits for a restart, and no
lock is held across a child's work. After a fork the child process forgets the pool (it shares
the parent's pipes) and starts its own; at exit the children are killed.

Child side, `serve`: imports (the handler factory) first, then memory/file-size/process rlimits,
then answers requests one at a time; a handler exception or unserialisable result replies `null`.
If the parent dies mid-request nobody kills the child, so each request arms SIGALRM (default
action: terminate) for `limit + ORPHAN_GRACE_S`.

A domain module loaded by path in the child gets this module as `_rlvr_sweep_sandbox`
(`CHILD_NAME`), already in `sys.modules`; see `load_sibling` for its other package modules.
"""
from __future__ import annotations

import atexit
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import warnings
import weakref
from multiprocessing import Pipe
from multiprocessing.connection import Connection

CHILD_NAME = "_rlvr_sweep_sandbox"  # this module's name in the child
MEMORY_BYTES = 4 * 2**30
ORPHAN_GRACE_S = 5.0
IMPORT_FAILED = "import failed"  # prefix of the child's startup reply when `entry()` raises
COUNTERS = ("timeouts", "queue_timeouts", "worker_starts", "worker_restarts", "worker_deaths", "start_failures")
# Children per pool: a grade that finds all of them busy waits, within its own deadline, for one.
POOL_SIZE = int(os.environ.get("RLVR_SWEEP_GRADER_WORKERS", "4"))

_BOOTSTRAP = (  # loads this file by path; it then loads the domain module by path
    "import sys; sys.dont_write_bytecode = True\n"  # pyc writes would trip RLIMIT_FSIZE
    "import importlib.util as u\n"
    f"spec = u.spec_from_file_location({CHILD_NAME!r}, sys.argv[1])\n"
    "m = u.module_from_spec(spec); sys.modules[spec.name] = m; spec.loader.exec_module(m)\n"
    "m._child_main(*sys.argv[2:])\n")

_AFTER_FORK = weakref.WeakSet()  # objects whose locks (and workers) a forked child must renew


class Counters:
    """Event counts behind a lock (renewed in a forked child, which keeps the counts)."""

    def __init__(self, names):
        self._values = dict.fromkeys(names, 0)
        self._lock = threading.Lock()
        _AFTER_FORK.add(self)

    def add(self, name: str) -> None:
        with self._lock:
            self._values[name] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._values)

    def _after_fork(self) -> None:
        self._lock = threading.Lock()  # another thread may have held it at the fork


class SandboxWorker:
    """A pool of `size` child processes running `module_file`'s `entry()` handler (module docstring).

    `request` takes an idle child, waiting for one no longer than the request's own deadline, so a
    caller's wait is bounded by its limit whatever other threads do; a child that misses the deadline
    or dies is killed and replaced by a background thread, never by the caller. `unavailable` is the
    RuntimeWarning text when a child cannot start (`{why}` is filled in). `import_failure`: None to
    retry a child whose `entry()` raised; else a function `why -> exception` raised at every request.
    """

    def __init__(self, module_file: str, entry: str, *, unavailable: str, size: int = POOL_SIZE,
                 startup_timeout_s: float = 60.0, max_reply_bytes: int = 4096,
                 memory_bytes: int = MEMORY_BYTES, import_failure=None):
        self.module_file, self.entry = os.path.abspath(module_file), entry
        self.unavailable, self.import_failure = unavailable, import_failure
        self.size, self.startup_timeout_s, self.max_reply_bytes = size, startup_timeout_s, max_reply_bytes
        self.memory_bytes = memory_bytes
        self.counters = Counters(COUNTERS)
        self._reset()
        _AFTER_FORK.add(self)

    def _reset(self) -> None:
        self._changed = threading.Condition(threading.Lock())  # guards the fields below
        self._idle: list[_Child] = []  # ready children nobody is using
        self._live = 0  # children idle, busy or starting
        self._generation = 0  # bumped by shutdown: older children are killed when handed back
        self._failed_start_at = -1e9
        self._ready = False  # a child has finished its imports since the last reset
        self.import_error: str | None = None  # set once `entry()` failed with import_failure set

    def _after_fork(self) -> None:
        self._reset()  # the old pipes belong to the parent; this process starts its own children

    def stats(self) -> dict[str, int]:
        return self.counters.snapshot()

    def request(self, payload, limit: float):
        """The JSON reply to `payload` within `limit` s of this call; None on timeout, death, failure.
        The first call in a process that never warmed the pool up starts one child and waits for its
        imports; more are started only while every child is busy (a caller grading one answer at a time
        never pays for the others' imports)."""
        if (not self._live or not self._ready) and not self.warm_up(children=1):
            return None  # a child's start (a `start()` still under way included) is never charged to `limit`
        deadline = time.monotonic() + limit
        child = self._take(deadline)
        if child is None:
            self.counters.add("timeouts")
            self.counters.add("queue_timeouts")
            return None
        try:
            child.requests.send_bytes(json.dumps([limit, payload]).encode())
            if child.replies.poll(max(0.0, deadline - time.monotonic())):
                reply = json.loads(child.replies.recv_bytes(self.max_reply_bytes))
                self._give_back(child)
                return reply
            self.counters.add("timeouts")
        except (EOFError, OSError, ValueError):
            self.counters.add("worker_deaths")
        self._replace(child)
        return None

    def start(self, children: int = 1) -> None:
        """Begin starting `children` children (up to `size`) and return at once: a caller that will
        probably need the pool starts it beside its other work; its first `request` still waits for a
        child's imports as a cold one would (up to the startup timeout, never its own `limit`)."""
        with self._changed:
            self._fill(children)

    def warm_up(self, children: int | None = None) -> bool:
        """Start the pool (`children` of it; all by default) and wait (up to the startup timeout) until
        a child has done its imports. Only until then: a request that finds the pool ready but every child
        busy waits for one within its own deadline (`_take`), so concurrent first calls are bounded by their
        limits as later ones are."""
        deadline = time.monotonic() + self.startup_timeout_s
        with self._changed:
            self._fill(children)
            while not self._ready and self._live and self.import_error is None:
                if not self._changed.wait(max(0.0, deadline - time.monotonic())):
                    break
            self._raise_import_error()
            return self._ready

    def shutdown(self) -> None:
        """Stop every child (a later request starts new ones); busy ones stop when handed back."""
        with self._changed:
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._generation += 1
            self._ready = False  # the next request waits for a new child's imports, never its own limit
        for child in idle:
            child.kill()

    # ------------------------------------------------------------ pool internals
    def _take(self, deadline: float):
        with self._changed:
            while True:
                self._raise_import_error()
                if self._idle:
                    return self._idle.pop()
                self._fill(self._live + 1)  # every child busy or starting: one more, up to `size`
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(remaining)

    def _give_back(self, child) -> None:
        with self._changed:
            if child.generation == self._generation:
                self._idle.append(child)
                self._changed.notify()
                return
            self._live -= 1
        child.kill()

    def _replace(self, child) -> None:
        """Kill a child that timed out or died and start another, both off the caller's thread."""
        with self._changed:
            self._live -= 1
            replace = child.generation == self._generation
            if replace:
                self._live += 1
        threading.Thread(target=self._kill_and_start, args=(child, replace), daemon=True).start()

    def _kill_and_start(self, child, replace: bool) -> None:
        child.kill()
        if replace:
            self.counters.add("worker_restarts")
            self._start_child()

    def _fill(self, upto: int | None = None) -> None:
        """Caller holds the condition. Start children up to `upto` (at most `size`; default `size`), not
        sooner than 1 s after a failure."""
        if time.monotonic() - self._failed_start_at < 1.0:
            return
        target = self.size if upto is None else min(upto, self.size)
        while self._live < target:
            self._live += 1
            threading.Thread(target=self._start_child, daemon=True).start()

    def _raise_import_error(self) -> None:
        if self.import_error is not None:
            raise self.import_failure(self.import_error)

    def _start_child(self) -> None:
        """In a starter thread: start one child and wait for its `ready`; then it joins the idle list."""
        with self._changed:
            generation = self._generation
        child, why = _Child.start(self, generation)
        with self._changed:
            if child is not None and generation == self._generation:
                self._ready = True
                self._idle.append(child)
                self._changed.notify_all()
                return
            self._live -= 1
            if child is None:
                self._failed_start_at = time.monotonic()
                if self.import_failure is not None and why.startswith(IMPORT_FAILED):
                    self.import_error = why  # an installation problem: no retry
            self._changed.notify_all()
        if child is not None:
            child.kill()
        else:
            self.counters.add("start_failures")
            warnings.warn(self.unavailable.format(why=why), RuntimeWarning, stacklevel=2)


class _Child:
    """One child process and the two pipes to it."""

    def __init__(self, proc, requests, replies, generation: int):
        self.proc, self.requests, self.replies, self.generation = proc, requests, replies, generation

    @classmethod
    def start(cls, pool: SandboxWorker, generation: int):
        """(child, "") once the child has answered `ready`, else (None, why)."""
        child_requests, requests = Pipe(duplex=False)
        replies, child_replies = Pipe(duplex=False)
        fds = (child_requests.fileno(), child_replies.fileno())
        args = (os.path.abspath(__file__), pool.module_file, pool.entry, pool.memory_bytes, *fds)
        try:
            with _SPAWNING:  # no fork of this process meanwhile (`_SPAWNING`)
                proc = subprocess.Popen(
                    [sys.executable, "-c", _BOOTSTRAP, *map(str, args)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    pass_fds=fds, start_new_session=True)  # own session: no terminal Ctrl-C
        except (OSError, ValueError) as exc:
            requests.close()
            replies.close()
            return None, repr(exc)
        finally:
            child_requests.close()
            child_replies.close()
        pool.counters.add("worker_starts")
        child = cls(proc, requests, replies, generation)
        try:
            answer = (replies.recv_bytes(4096) if replies.poll(pool.startup_timeout_s)
                      else b"no reply within the startup timeout")
        except (EOFError, OSError) as exc:
            answer = repr(exc).encode()
        if answer == b"ready":
            return child, ""
        child.kill()
        return None, answer.decode(errors="replace")

    def kill(self) -> None:
        for conn in (self.requests, self.replies):
            conn.close()  # an idle child sees EOF and exits by itself
        self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _stop_all() -> None:
    for worker in list(_AFTER_FORK):
        if isinstance(worker, SandboxWorker):
            for child in list(worker._idle):  # no lock: a daemon thread may hold it at exit
                child.proc.kill()


def _renew_after_fork() -> None:
    for obj in list(_AFTER_FORK):
        obj._after_fork()


# A child's start (`subprocess.Popen`, in a starter thread) and a fork of this process (`os.fork`, as
# multiprocessing's fork context forks) never overlap: a process forked while Popen waits for its child's
# exec inherits Popen's error pipe, and Popen then waits until that process exits. Seen: `verify all` at
# 1,024 runs hung for good, its forked PASS 1 part blocked sending its results to a parent that waited on
# the pool's warm-up. A fork waits for a start under way (Popen without `preexec_fn` runs no fork hooks).
_SPAWNING = threading.Lock()


def _release_spawning() -> None:
    _SPAWNING.release()


atexit.register(_stop_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_SPAWNING.acquire, after_in_parent=_release_spawning,
                        after_in_child=_release_spawning)
    os.register_at_fork(after_in_child=_renew_after_fork)


# ---------------------------------------------------------------- child side
def load_sibling(name: str):
    """In the child: this package's module `name` (a stdlib-only one), loaded by path."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_rlvr_sweep_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def limit_resources(memory_bytes: int = MEMORY_BYTES) -> None:
    import resource  # POSIX, like pass_fds

    for limit, value in ((resource.RLIMIT_AS, memory_bytes),
                         (resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_NPROC, 0)):
        try:
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):
            pass  # above an existing hard limit, which then caps us already


def serve(request_fd: int, reply_fd: int, make_handler, memory_bytes: int = MEMORY_BYTES) -> None:
    """The child's loop: `make_handler()`, rlimits, `ready`, then one reply per request."""
    import signal

    requests = Connection(request_fd, writable=False)
    replies = Connection(reply_fd, readable=False)
    try:
        handler = make_handler()
    except BaseException as exc:
        replies.send_bytes(f"{IMPORT_FAILED}: {exc!r}".encode()[:4000])
        return
    limit_resources(memory_bytes)
    replies.send_bytes(b"ready")
    while True:
        try:
            limit, payload = json.loads(requests.recv_bytes())
        except (EOFError, OSError):
            return  # parent closed the pipe or died
        # If the parent dies mid-computation nobody kills us; SIGALRM's default action does.
        signal.setitimer(signal.ITIMER_REAL, limit + ORPHAN_GRACE_S)
        try:
            result = handler(payload)
        except BaseException:  # MemoryError under RLIMIT_AS, RecursionError, library bugs
            result = None
        signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            reply = json.dumps(result).encode()
        except (TypeError, ValueError):
            reply = b"null"
        replies.send_bytes(reply)


def _child_main(module_file: str, entry: str, memory_bytes: str, request_fd: str,
                reply_fd: str) -> None:
    name = "_rlvr_sweep_" + os.path.splitext(os.path.basename(module_file))[0] + "_worker"
    spec = importlib.util.spec_from_file_location(name, module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    serve(int(request_fd), int(reply_fd), getattr(module, entry), int(memory_bytes))

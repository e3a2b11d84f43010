"""A persistent, bounded subprocess for untrusted or unbounded work (sympy, Math-Verify).

Parent side, `SandboxWorker(module_file, entry, ...)`: one child process started with
`subprocess.Popen` (no `__main__` re-import; works from any thread and in daemonic pool workers).
The child loads this file and `module_file` by path, so the package `__init__` (and torch) stay
out of it, and calls `module_file`'s `entry()`, which returns the handler `payload -> result`.
`request(payload, limit)` sends `[limit, payload]` as JSON over a pipe and waits at most `limit`
seconds (`Connection.poll`) for the JSON reply; on timeout or death the child is killed and a
replacement starts in the background, the request returns None and the worker's `stats()` counts
it. A lock makes each request/reply exchange atomic across threads; after a fork the child process
forgets the worker (it shares the parent's pipes) and starts its own; at exit the worker is killed.

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
import warnings
import weakref
from multiprocessing import Pipe
from multiprocessing.connection import Connection

CHILD_NAME = "_rlvr_sweep_sandbox"  # this module's name in the child
MEMORY_BYTES = 4 * 2**30
ORPHAN_GRACE_S = 5.0
IMPORT_FAILED = "import failed"  # prefix of the child's startup reply when `entry()` raises
COUNTERS = ("timeouts", "worker_starts", "worker_restarts", "worker_deaths", "start_failures")

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
    """One child process running `module_file`'s `entry()` handler (see the module docstring).

    `unavailable` is the RuntimeWarning text when the child cannot start (`{why}` is filled in).
    `import_failure`: None to retry a child whose `entry()` raised at the next request (after the
    warning); else a function `why -> exception` raised now and at every later request.
    """

    def __init__(self, module_file: str, entry: str, *, unavailable: str,
                 startup_timeout_s: float = 60.0, max_reply_bytes: int = 4096,
                 memory_bytes: int = MEMORY_BYTES, import_failure=None):
        self.module_file, self.entry = os.path.abspath(module_file), entry
        self.unavailable, self.import_failure = unavailable, import_failure
        self.startup_timeout_s, self.max_reply_bytes = startup_timeout_s, max_reply_bytes
        self.memory_bytes = memory_bytes
        self.counters = Counters(COUNTERS)
        self._reset()
        _AFTER_FORK.add(self)

    def _reset(self) -> None:
        self.lock = threading.Lock()
        self.proc = self.requests = self.replies = None
        self.ready = False
        self.import_error: str | None = None  # set once `entry()` failed with import_failure set

    def _after_fork(self) -> None:
        self._reset()  # the old pipes are closed in this process only, the old child lives on

    def stats(self) -> dict[str, int]:
        return self.counters.snapshot()

    def request(self, payload, limit: float):
        """The child's JSON reply to `payload` within `limit` s; None on timeout, death, failure."""
        with self.lock:
            if not self.ensure_ready():
                return None
            try:
                self.requests.send_bytes(json.dumps([limit, payload]).encode())
                if self.replies.poll(limit):
                    return json.loads(self.replies.recv_bytes(self.max_reply_bytes))
                self.counters.add("timeouts")
            except (EOFError, OSError, ValueError):
                self.counters.add("worker_deaths")
            self.stop()
            if self.start():  # the replacement does its imports while the caller moves on
                self.counters.add("worker_restarts")
            return None

    def warm_up(self) -> bool:
        """Start the child and wait until its imports are done."""
        with self.lock:
            return self.ensure_ready()

    def shutdown(self) -> None:
        """Stop the child (a later request starts a new one)."""
        with self.lock:
            self.stop()

    def ensure_ready(self) -> bool:
        """Caller holds the lock. Start the child if needed and wait for its `ready`."""
        if self.import_error is not None:
            raise self.import_failure(self.import_error)
        if self.proc is None and not self.start():
            return False
        if not self.ready:
            try:
                answer = (self.replies.recv_bytes(4096) if self.replies.poll(self.startup_timeout_s)
                          else b"no reply within STARTUP_TIMEOUT_S")
            except (EOFError, OSError) as exc:
                answer = repr(exc).encode()
            self.ready = answer == b"ready"
            if not self.ready:
                why = answer.decode(errors="replace")
                if self.import_failure is not None and why.startswith(IMPORT_FAILED):
                    self.counters.add("start_failures")  # an installation problem: no retry
                    self.stop()
                    self.import_error = why
                    raise self.import_failure(why)
                self.fail(why)
        return self.ready

    def start(self) -> bool:
        child_requests, self.requests = Pipe(duplex=False)
        self.replies, child_replies = Pipe(duplex=False)
        fds = (child_requests.fileno(), child_replies.fileno())
        args = (os.path.abspath(__file__), self.module_file, self.entry, self.memory_bytes, *fds)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, *map(str, args)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=fds, start_new_session=True)  # own session: no terminal Ctrl-C
        except (OSError, ValueError) as exc:
            self.fail(repr(exc))
            return False
        finally:
            child_requests.close()
            child_replies.close()
        self.counters.add("worker_starts")
        return True

    def fail(self, why: str) -> None:
        self.counters.add("start_failures")
        warnings.warn(self.unavailable.format(why=why), RuntimeWarning, stacklevel=4)
        self.stop()

    def stop(self) -> None:
        for conn in (self.requests, self.replies):
            if conn is not None:
                conn.close()  # an idle child sees EOF and exits by itself
        if self.proc is not None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.proc = self.requests = self.replies = None
        self.ready = False


def _stop_all() -> None:
    for worker in list(_AFTER_FORK):
        if isinstance(worker, SandboxWorker):
            worker.stop()  # no lock: a daemon thread may hold it at exit


def _renew_after_fork() -> None:
    for obj in list(_AFTER_FORK):
        obj._after_fork()


atexit.register(_stop_all)
if hasattr(os, "register_at_fork"):
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

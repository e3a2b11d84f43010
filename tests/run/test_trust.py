"""Runs you can trust under races and bad files: one writer per run, a finished run never touched,
checkpoints that cannot run code, temporary files cleaned up, bookkeeping that resumes."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading

import pytest

from rlvr_sweep import store
from rlvr_sweep.run import checkpoint, run
from rlvr_sweep.store.lock import lock_path
from tests.conftest import REPO
from tests.helpers import compose_cfg, run_dir_of, run_killed_at

SMOKE = ["+arm=ra_flat", "profile=smoke", "eval.limit=4"]


def cli(tmp_path, *extra):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src")}
    return [sys.executable, "-m", "rlvr_sweep", *SMOKE, "run.out_root=runs", *extra], env


class Lines:
    """A process's output, read in a thread, so a test can wait for a line (an event, not a sleep)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.lines, self.seen = proc, [], threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self.seen:
                self.lines.append(line)
                self.seen.notify_all()
        with self.seen:
            self.lines.append(None)  # end of output
            self.seen.notify_all()

    def wait_for(self, text: str, timeout: float = 300) -> bool:
        with self.seen:
            return self.seen.wait_for(lambda: any(line is None or text in line for line in self.lines), timeout) and \
                any(line is not None and text in line for line in self.lines)

    def text(self) -> str:
        self.proc.wait(timeout=600)
        self.wait_for("\0", timeout=60)
        return "".join(line for line in self.lines if line)


@pytest.mark.slow
def test_the_same_command_twice_runs_once(tmp_path):
    """A second launch while the first runs writes nothing and says who holds the run; a third that
    waits for the lock finds the run finished and skips it; the finished folder is never moved.
    The first launch is stopped (SIGSTOP) while it holds the lock, so no verdict depends on speed."""
    cmd, env = cli(tmp_path, "train.steps=4", "train.write_every=1")
    first = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first_out = Lines(first)
    try:
        assert first_out.wait_for("run ra_flat ->"), first_out.text()[-3000:]  # logged once it holds the lock
        os.kill(first.pid, signal.SIGSTOP)
        second = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        waiter = subprocess.Popen([*cmd, "run.wait_for_lock=true"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        waiter_out = Lines(waiter)
        assert waiter_out.wait_for("waiting for"), waiter_out.text()[-3000:]
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert first.wait(timeout=600) == 0, first_out.text()[-3000:]
    waited = waiter_out.text()
    assert second.returncode == 3, second.stdout + second.stderr
    assert f"is being run by pid {first.pid} on host" in second.stderr and "writes nothing" in second.stderr
    assert waiter.returncode == 0 and "skipping finished run" in waited
    run_dir = run_dir_of(compose_cfg([*SMOKE, "train.steps=4", f"run.out_root={tmp_path}/runs"]))
    assert [p.name for p in run_dir.parent.iterdir() if not p.name.startswith(".")] == [run_dir.name]
    assert store.is_finished(run_dir) and store.verify_manifest(run_dir) == []
    # each launch logged into its own Hydra output folder (pid in the name), none shared
    hydra_dirs = list((tmp_path / "outputs" / "hydra").glob("*/*"))
    assert len(hydra_dirs) == 3 and len({d.name.rsplit("_", 1)[-1] for d in hydra_dirs}) == 3


def test_a_finished_run_is_never_moved_and_leftovers_of_a_kill_are_removed(tmp_path):
    cfg = compose_cfg([*SMOKE, "train.steps=2", f"run.out_root={tmp_path}"])
    run(cfg)
    run_dir = run_dir_of(cfg)
    sealed = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    (run_dir / checkpoint.CHECKPOINT).write_bytes(b"left by a kill between DONE and its removal")
    (run_dir / f".steps.parquet.tmp-{os.getpid() + 1}").write_bytes(b"half a table")
    again = run(cfg)
    assert again["skipped"] and {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == sealed
    assert [p.name for p in run_dir.parent.iterdir() if not p.name.startswith(".")] == [run_dir.name]


class Exploit:
    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def unfinished_run_with(tmp_path, payload: bytes, *extra):
    """An unfinished run folder (config.yaml, a 'running' run.json) holding `payload` as its checkpoint."""
    cfg = compose_cfg([*SMOKE, "train.steps=2", f"run.out_root={tmp_path}", *extra])
    run_dir = run_dir_of(cfg)
    store.prepare_run_dir(cfg, run_dir)
    store.atomic_write_json(run_dir / store.RUN_JSON, {"status": "running"})
    (run_dir / checkpoint.CHECKPOINT).write_bytes(payload)
    return cfg, run_dir


def test_a_crafted_checkpoint_never_runs_code_and_the_run_starts_over(tmp_path, caplog):
    exploit = Exploit()
    exploit.marker = tmp_path / "pwned"
    cfg, run_dir = unfinished_run_with(tmp_path, pickle.dumps({"run_hash": "x", "boom": exploit}))
    info = run(cfg)
    assert not exploit.marker.exists()
    assert info["status"] == "finished" and "resumed_from_step" not in info
    (moved,) = [p for p in run_dir.parent.iterdir() if store.is_stale(p)]
    assert (moved / checkpoint.CHECKPOINT).is_file()  # moved aside whole, nothing deleted
    assert f"{run_dir / checkpoint.CHECKPOINT} cannot be loaded" in caplog.text


@pytest.mark.parametrize("payload", [b"", b"\x80\x04truncated"], ids=["empty", "truncated"])
def test_an_unreadable_checkpoint_is_named_and_stops_the_run_when_asked(tmp_path, payload):
    cfg, run_dir = unfinished_run_with(tmp_path, payload, "run.on_unfinished=error")
    with pytest.raises(store.UnfinishedRunError) as err:
        run(cfg)
    assert f"{run_dir / checkpoint.CHECKPOINT} cannot be loaded" in str(err.value)
    assert (run_dir / checkpoint.CHECKPOINT).read_bytes() == payload  # untouched


@pytest.mark.slow
def test_a_relaunch_with_other_bookkeeping_resumes_and_removes_temporary_files(tmp_path):
    base = [*SMOKE, "train.steps=12", "train.checkpoint_every=5", f"run.out_root={tmp_path}"]
    run_killed_at(compose_cfg(base), step=7)
    run_dir = run_dir_of(compose_cfg(base))
    (run_dir / f".pairs.parquet.tmp-{os.getpid() + 1}").write_bytes(b"partial")
    resumed = run(compose_cfg([*base, "train.write_every=3", "train.checkpoint_every=4"]))
    assert resumed["resumed_from_step"] == 5 and resumed["run_dir"] == str(run_dir.resolve())
    assert not list(run_dir.glob(".*.tmp-*")) and store.verify_manifest(run_dir) == []
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
    assert lock_path(run_dir).is_file()

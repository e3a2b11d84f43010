"""`status`: every state of a run folder and of a recorded job, made by hand, and the sweep-command form
on real compositions. (A SLURM sweep followed while it runs: tests/sweep/test_slurm.py.)"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlvr_sweep.store.beacon import Beacon, beacon_for, read_progress
from rlvr_sweep.store.lock import lock_holder, run_lock
from rlvr_sweep.sweep import records
from rlvr_sweep.sweep.status import sweep_report, sweep_states, totals
from rlvr_sweep.sweep.status_cli import main as status_main
from rlvr_sweep.sweep.status_cli import render
from tests.conftest import REPO


def make_run(root, arm, seed, status="running", horizon=512, **extra):
    run_dir = root / "smoke" / arm / f"h{horizon}_s{seed}_{seed:08x}"
    run_dir.mkdir(parents=True)
    info = {"arm": arm, "paper_arm": {"ra_flat": 4, "stopped_tree": 12}.get(arm, 1), "seed": seed,
            "horizon": horizon, "profile": "smoke", "status": status, **extra}
    (run_dir / "run.json").write_text(json.dumps(info))
    return run_dir


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def every_state(tmp_path):
    """A root with a run folder in each state; yields (root, folders by state) with the running and busy
    folders' locks held by this test."""
    root = tmp_path / "runs"
    folders = {}
    done = make_run(root, "ra_flat", 1, status="finished", accuracy={"base": {"toy_heldout": 0.13},
                                                                     "trained": {"toy_heldout": 0.185}})
    (done / "DONE").write_text("")
    folders["finished"] = done
    folders["running"] = make_run(root, "ra_flat", 2)
    folders["busy"] = make_run(root, "ra_flat", 3)
    failed = make_run(root, "stopped_tree", 1, status="failed",
                      error="ValueError('the grader got garbage')\nsecond line of the error")
    (failed / "checkpoint.pt").write_bytes(b"x")
    Beacon(failed, phase="train", checkpoint_step=4).update(done=5, total=8)
    folders["failed"] = failed
    killed = make_run(root, "stopped_tree", 2)
    (killed / "checkpoint.pt").write_bytes(b"x")
    with run_lock(killed):  # held once, by a process that is gone now: the lock file stays, free
        Beacon(killed, phase="train", checkpoint_step=6).update(done=7, total=8)
    folders["dead"] = killed
    in_base = make_run(root, "stopped_tree", 3)
    pq.write_table(pa.table({"benchmark": ["toy_heldout", "toy_heldout", "gsm8k"], "correct": [1.0, 0.0, 1.0]}),
                   in_base / "grades.parquet")
    folders["dead_base"] = in_base
    folders["dead_fresh"] = make_run(root, "stopped_tree", 4)
    aside = make_run(root, "ra_flat", 5)
    folders["moved aside"] = aside.rename(aside.with_name(aside.name + ".stale-20261201-120000"))
    with run_lock(folders["running"]), run_lock(folders["busy"]), beacon_for(folders["running"], phase="train") as b:
        b.update(done=3, total=8, unit="step", last_seconds=1.5, tokens_per_s=812.0, eta_s=7.5)
        yield root, folders


def test_every_state_of_a_run_folder(every_state):
    root, folders = every_state
    rows = {row["run_dir"]: row for row in sweep_states(root)}
    state = lambda key: rows[str(folders[key])]  # noqa: E731
    assert state("finished")["state"] == "finished" and state("finished")["detail"] == "toy_heldout 13.0 -> 18.5"
    running = state("running")
    assert running["state"] == "running"
    assert running["detail"].startswith(f"train 3/8 step, last 1.50s, 812 tok/s, ETA 8s, pid {os.getpid()} on "
                                        f"{socket.gethostname()}")
    assert state("busy")["state"] == "busy" and f"held by pid {os.getpid()}" in state("busy")["detail"]
    failed = state("failed")
    assert failed["state"] == "failed"
    assert failed["detail"] == "ValueError('the grader got garbage'); will resume from step 4"
    assert state("dead")["state"] == "dead"
    assert state("dead")["detail"] == "unfinished and no process holds it: will resume from step 6"
    assert state("dead_base")["detail"].endswith("will resume its first read-out after 2 graded benchmark(s)")
    assert state("dead_fresh")["detail"].endswith("will be moved aside and started over (no checkpoint)")
    assert state("moved aside")["state"] == "moved aside" and state("moved aside")["seed"] == 5
    assert [r["seed"] for r in sweep_states(root) if r["arm"] == "stopped_tree"] == [1, 2, 3, 4]  # numbers in order
    by_state, by_arm = totals(list(rows.values()))
    assert by_state == {"finished": 1, "running": 1, "busy": 1, "failed": 1, "dead": 3, "moved aside": 1}
    assert by_arm["stopped_tree h512"] == {"failed": 1, "dead": 3}


def test_the_lock_is_asked_of_the_kernel(tmp_path):
    run_dir = make_run(tmp_path, "ra_flat", 1)
    assert lock_holder(run_dir) is None  # never locked
    with run_lock(run_dir):
        assert lock_holder(run_dir)["pid"] == os.getpid()
    assert lock_holder(run_dir) is None  # the file stays, the lock is gone
    assert read_progress(run_dir) is None


def squeue_on_path(monkeypatch, folder, stdout: str = "", stderr: str = "", code: int = 0) -> None:
    """A fake `squeue` first on PATH: prints `stdout` and `stderr`, exits `code` (the machine's own squeue,
    working, broken or absent, then plays no part)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "squeue"
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{stdout}EOF\ncat >&2 <<'EOF'\n{stderr}EOF\nexit {code}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")


BROKEN_CLIENT = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"


@pytest.mark.parametrize("squeue", ["failing", "absent", "empty queue", "pending", "running", "the machine's"])
def test_recorded_jobs_without_a_folder(tmp_path, monkeypatch, squeue):
    """Seen: with an installed SLURM client and no controller, the SLURM job's row said nothing of it, and
    this test failed on such a machine. Want: the same verdicts whatever squeue this machine has."""
    root = tmp_path / "runs"
    root.mkdir()
    job = lambda n, **more: {"number": n, "overrides": [f"seed={n}"], "arm": "ra_flat", "paper_arm": 4,  # noqa: E731
                             "seed": n, "horizon": 512, "profile": "smoke", "out_root": str(root),
                             "run_dir": str(root / "smoke" / "ra_flat" / f"h512_s{n}_x"), **more}
    live = records.write_records([job(1), job(2)], ["-m", "seed=1,2"])[0]
    gone = json.loads(live.read_text())
    gone.update(pid=dead_pid(), created_at=gone["created_at"] + 1,
                jobs=[job(3), job(4, job="999999_4", scheduler="slurm"), job(5, job="4242", scheduler="local")])
    (root / records.SWEEPS / "later.json").write_text(json.dumps(gone))
    (root / records.SWEEPS / "garbage.json").write_text("{not json")  # named below the table, never an error
    fake = tmp_path / "bin"
    if squeue == "failing":
        squeue_on_path(monkeypatch, fake, stderr=BROKEN_CLIENT + "\nsecond line\n", code=1)
    elif squeue == "absent":
        fake.mkdir()
        monkeypatch.setenv("PATH", str(fake))
    elif squeue == "empty queue":
        squeue_on_path(monkeypatch, fake)
    elif squeue in ("pending", "running"):
        squeue_on_path(monkeypatch, fake, stdout=f"999999_3|RUNNING|node1\n999999_4|{squeue.upper()}|(Resources)\n")
    rows = {row["seed"]: row for row in sweep_states(root)}
    assert rows[1]["state"] == rows[2]["state"] == "queued"
    assert rows[2]["detail"] == f"job 2 of 2 of the sweep run by pid {os.getpid()} (basic launcher: one job after another)"
    assert rows[3]["state"] == "not started" and "has ended; relaunch it" in rows[3]["detail"]
    assert rows[5]["state"] == "not started" and rows[5]["detail"] == (  # a local job does not outlive its sweep's
        f"its sweep (pid {gone['pid']}) has ended and its local job 4242 made no run folder (it failed first: the "  # start
        "sweep's summary said why); relaunch it")
    slurm = (rows[4]["state"], rows[4]["detail"])
    lost = ("lost", "SLURM job 999999_4 is no longer in the queue and made no run folder (see its submitit log); "
                    "relaunch the sweep to run it")
    expected = {"failing": ("queued", f"SLURM job 999999_4 (squeue failed: {BROKEN_CLIENT})"),
                "absent": ("queued", "SLURM job 999999_4 (squeue is not on this machine)"),
                "empty queue": lost,
                "pending": ("queued", "SLURM job 999999_4: PENDING (Resources)"),
                "running": ("starting", "SLURM job 999999_4: RUNNING (Resources)")}
    if squeue == "the machine's":  # whatever it is here: one of the answers above, as its own exit says
        if not shutil.which("squeue"):
            assert slurm == expected["absent"]
        else:
            asked = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T|%R"], capture_output=True, text=True)
            first = (asked.stderr.strip() or asked.stdout.strip() or f"exit status {asked.returncode}").splitlines()[0]
            assert slurm == (lost if asked.returncode == 0 else ("queued", f"SLURM job 999999_4 (squeue failed: {first})"))
    else:
        assert slurm == expected[squeue]
    _, problems = sweep_report(root)
    assert [line.split(": ", 1)[0] for line in problems.lines] == [str(root / records.SWEEPS / "garbage.json")]


def test_the_table_the_json_and_bad_input(every_state, capsys):
    root, _ = every_state
    assert status_main([str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["arm", "paper", "horizon", "seed", "state", "detail"]
    assert "8 runs: 1 finished, 1 running, 1 busy, 1 failed, 3 dead, 1 moved aside" in out
    assert out[-1] == "  stopped_tree h512: 1 failed, 3 dead"
    assert status_main([str(root), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted(r["state"] for r in rows).count("dead") == 3
    assert status_main([str(root / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == f"status: error: {root / 'nowhere'} is not a folder"
    assert render([], planned=True)[0].split()[-4:] == ["detail", "a", "relaunch", "would"]


def test_the_runs_a_sweep_command_would_make(tmp_path, capsys):
    root = tmp_path / "runs"
    line = ["+arm=ra_flat", "profile=smoke", "train.steps=2", f"run.out_root={root}", "-m", "seed=1,2,3"]
    assert status_main(["--json", "--", *line]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["seed"], r["state"], r["would"]) for r in rows] == [(1, "new", "start"), (2, "new", "start"), (3, "new", "start")]
    first, second = (__import__("pathlib").Path(r["run_dir"]) for r in rows[:2])
    for folder, status in ((first, "finished"), (second, "failed")):
        folder.mkdir(parents=True)
        (folder / "run.json").write_text(json.dumps({"arm": "ra_flat", "seed": 1, "status": status, "error": "boom"}))
    (first / "DONE").write_text("")
    (second / "checkpoint.pt").write_bytes(b"x")
    Beacon(second, checkpoint_step=1).update()
    assert status_main(["--json", "--", *line]) == 0
    assert [r["would"] for r in json.loads(capsys.readouterr().out)] == ["skip", "resume from step 1", "start"]
    assert not (root / records.SWEEPS).exists()  # looking writes nothing
    assert status_main(["--", "+arm=ra_flta", "-m", "seed=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("status: error: the sweep does not compose: the command line (+arm=ra_flta seed=1): "
                          "In 'config': Could not find 'arm/ra_flta' (available options in 'arm': ablate_selective,")
    assert "\n" not in err


def test_status_needs_neither_torch_nor_transformers(every_state):
    root, _ = every_state
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "rlvr_sweep", "status", str(root)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert not {"torch", "transformers"} & imported
    assert "8 runs: 1 finished, 1 running" in proc.stdout, proc.stdout


def test_two_recorded_jobs_of_one_arm_and_seed_are_two_rows(tmp_path):
    """Two jobs of one launch alike in arm, seed, horizon and profile (they differ in `train.lr`, so in their run
    folders) are two runs: each keeps its own row, finished or queued, and neither replaces the other (#16)."""
    root = tmp_path / "runs"
    root.mkdir()
    job = lambda n, lr, run_hash: {"number": n, "overrides": ["seed=1", f"train.lr={lr}"], "arm": "ra_flat",  # noqa: E731
                                   "paper_arm": 4, "seed": 1, "horizon": 512, "profile": "smoke", "out_root": str(root),
                                   "run_hash": run_hash, "run_dir": str(root / "smoke" / "ra_flat" / f"h512_s1_{run_hash}")}
    records.write_records([job(1, 1e-6, "aaaaaaaa"), job(2, 2e-6, "bbbbbbbb"), job(3, 3e-6, "cccccccc")],
                          ["-m", "train.lr=1e-6,2e-6,3e-6"])
    done = root / "smoke" / "ra_flat" / "h512_s1_aaaaaaaa"
    done.mkdir(parents=True)
    (done / "run.json").write_text(json.dumps({"arm": "ra_flat", "paper_arm": 4, "seed": 1, "horizon": 512,
                                               "profile": "smoke", "status": "finished", "run_hash": "aaaaaaaa"}))
    (done / "DONE").write_text("")
    rows = sweep_states(root)
    assert [(r["seed"], r["state"], r["run_dir"].rsplit("/", 1)[-1]) for r in rows] == [
        (1, "finished", "h512_s1_aaaaaaaa"), (1, "queued", "h512_s1_bbbbbbbb"), (1, "queued", "h512_s1_cccccccc")]


def test_a_running_runs_detail_shows_its_last_updates_health():
    """The progress file's health fields (the last update's: `run.train.report_step`) join the detail; a run whose
    objective has no clip (or that has made no update) shows none."""
    from rlvr_sweep.sweep.status import PROGRESS_FIELDS, _progress_line

    base = {k: None for k in PROGRESS_FIELDS} | {"phase": "train", "done": 19, "total": 100, "unit": "step",
                                                 "pid": 7, "host": "vm"}
    line = _progress_line({**base, "entropy": 0.41234, "kl_ref": 0.00213, "clip_low": 0.01, "clip_high": 0.035})
    assert line == "train 19/100 step, entropy 0.412, KL 0.0021, clipped 1.0% low / 3.5% high, pid 7 on vm"
    assert _progress_line({**base, "entropy": 0.5}) == "train 19/100 step, entropy 0.500, pid 7 on vm"


def test_status_of_a_sweep_command_works_as_typed(tmp_path):
    """Seen: `python -m rlvr_sweep status -- <overrides>` ended "Could not load 'base_config'" (the command starts
    before the launch code registers the schema; the in-process tests had it registered). Want: the plan."""
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "rlvr_sweep", "status", "--", "+arm=ra_flat", "profile=smoke",
                           f"run.out_root={tmp_path}", "-m", "seed=1,2"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "2 runs: 2 new" in proc.stdout.splitlines()
    lines = proc.stdout.splitlines()  # each row's estimated peak memory, said once for the rows that share it
    at = lines.index("estimated peak memory (checked at launch against model.device_memory_gb, or a GPU's own memory):")
    assert lines[at + 1].startswith("  ra_flat (2 runs): about 12.31 MiB at the peak (the training pass): the training "
                                    "pass 10.02 MiB, AdamW moments 1.14 MiB, weights 0.57 MiB, gradients 0.57 MiB")

"""`status` on what it should not trust: crafted launch records, run.json and progress files with missing or
wrong-typed fields, files and folders it cannot read, a root moved or copied elsewhere, a launcher's pid
given to a later process. Each "Seen" of issue #33 redone: every bad file is one line naming the file, the
field and what was wrong, the other runs are all shown, and nothing raises."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from rlvr_sweep.store.beacon import Beacon
from rlvr_sweep.store.lock import run_lock
from rlvr_sweep.sweep import records, status_cli
from rlvr_sweep.sweep.status import sweep_report, sweep_states
from rlvr_sweep.sweep.status_cli import main as status_main
from tests.sweep.test_status import dead_pid, make_run


def finished(root, seed, **extra):
    run_dir = make_run(root, "ra_flat", seed, status="finished", run_hash=f"{seed:08x}",
                       accuracy={"base": {"toy_heldout": 0.13}, "trained": {"toy_heldout": 0.185}}, **extra)
    (run_dir / "DONE").write_text("")
    return run_dir


def job(root, seed, number, **more):
    """A job as the preflight hands it to `records` (absolute paths, which the record makes relative)."""
    return {"number": number, "overrides": [f"seed={seed}"], "arm": "ra_flat", "paper_arm": "4", "seed": seed,
            "horizon": 512, "profile": "smoke", "out_root": str(root), "run_hash": f"{seed:08x}",
            "run_dir": str(root / "smoke" / "ra_flat" / f"h512_s{seed}_{seed:08x}"), **more}


def states(rows) -> list[tuple]:
    return [(r["seed"], r["state"]) for r in rows]


# --- crafted launch records ------------------------------------------------------------------

def test_a_crafted_launch_record_beside_good_runs(tmp_path, capsys):
    """Seen: a record with a missing `run_dir` or `number`, a job that is a string, a string `created_at`
    or `horizon`, a numeric `run_dir`, a SLURM job without its id -> KeyError / TypeError, no run shown.
    Want: the good runs shown, the crafted jobs shown as far as they can be, each problem one line."""
    root = tmp_path / "runs"
    finished(root, 1), finished(root, 2)
    records.write_records([job(root, 1, 1), job(root, 2, 2)], ["-m", "seed=1,2"])
    crafted = root / records.SWEEPS / "crafted.json"
    base = {"arm": "ra_flat", "profile": "smoke", "horizon": 512}
    crafted.write_text(json.dumps({"created_at": "yesterday", "pid": os.getpid(), "host": socket.gethostname(), "jobs": [
        {**base, "number": 1, "seed": 7, "horizon": "512", "run_dir": "smoke/ra_flat/h512_s7_a"},
        {**base, "seed": 8, "run_dir": "smoke/ra_flat/h512_s8_b"},
        "h512_s9_c",
        {**base, "number": 4, "seed": 10},
        {**base, "number": 5, "seed": 11, "run_dir": 12345},
        {**base, "number": 6, "seed": 12, "run_dir": "smoke/ra_flat/h512_s12_d", "scheduler": "slurm"},
    ]}))
    (root / records.SWEEPS / "latin1.json").write_bytes(b'{"pid": "\xe9t\xe9"}')
    (root / records.SWEEPS / "jobless.json").write_text(json.dumps({"created_at": 1.0, "pid": 1, "host": "h"}))
    (root / records.SWEEPS / "list.json").write_text("[1, 2]")

    rows, problems = sweep_report(root)
    assert states(rows) == [(1, "finished"), (2, "finished"), (8, "not started"), (12, "queued"), (7, "not started")]
    by_seed = {r["seed"]: r for r in rows}
    assert by_seed[7]["horizon"] == "512"  # shown as read (after the numbers), and named below
    assert by_seed[8]["detail"] == ("its record does not say which process wrote it, where or when (named below); "
                                    "relaunch it once its sweep has ended")  # its pid runs, but since when?
    assert by_seed[12]["detail"] == "SLURM job ? (its record lacks the id, so squeue is not asked)"
    sweeps = root / records.SWEEPS
    assert problems.lines == [
        f"{sweeps / 'crafted.json'}: created_at: \"yesterday\" is not a number",
        f"{sweeps / 'crafted.json'}: jobs[0].horizon: \"512\" is not a whole number",
        f"{sweeps / 'crafted.json'}: jobs[1].number: missing",
        f"{sweeps / 'crafted.json'}: jobs[2]: \"h512_s9_c\" is not an object; left out",
        f"{sweeps / 'crafted.json'}: jobs[3].run_dir: missing; the job is left out (it names no run folder)",
        f"{sweeps / 'crafted.json'}: jobs[4].run_dir: 12345 is not a string; the job is left out (it names no run folder)",
        f"{sweeps / 'crafted.json'}: jobs[5].job: missing for a SLURM job (squeue cannot be asked about it)",
        f"{sweeps / 'jobless.json'}: jobs: missing; no job of this launch is shown",
        f"{sweeps / 'latin1.json'}: not read: not UTF-8 (byte 0xe9 at offset 9)",
        f"{sweeps / 'list.json'}: not read: not a JSON object (a list)",
    ]
    assert by_seed[7]["problems"] == [problems.lines[1]]  # the row carries its own lines (--json)
    assert status_main([str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "5 runs: 2 finished, 1 queued, 2 not started" in out
    at = out.index("not read: 2 files; read in part: 2 files (a field missing or of the wrong type; shown as far "
                   "as it could be):")
    assert out[at + 1:] == [f"  {line}" for line in problems.lines]
    assert any(line.endswith("[read in part: see below]") and " 7 " in line for line in out)
    assert status_main([str(root), "--json"]) == 0
    printed = capsys.readouterr()
    assert [r["seed"] for r in json.loads(printed.out)] == [1, 2, 8, 12, 7]
    assert printed.err.splitlines() == [f"status: {line}" for line in problems.lines]


def test_control_characters_from_a_file_are_shown_not_obeyed(tmp_path, capsys):
    root = tmp_path / "runs"
    finished(root, 1)
    crafted = root / records.SWEEPS / "x.json"
    crafted.parent.mkdir()
    crafted.write_text(json.dumps({"created_at": 1.0, "pid": dead_pid(), "host": socket.gethostname(), "jobs": [
        {"number": 1, "arm": "evil\x1b[2J\nrow", "seed": 3, "horizon": 512, "profile": "smoke", "run_dir": "a/b"}]}))
    assert status_main([str(root)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "evil\\x1b[2J\\nrow" in out


# --- run.json, progress.json and lock files ------------------------------------------------

def test_bad_fields_in_run_folders(tmp_path, capsys):
    """Seen: a run.json whose `horizon` is "512" or whose `seed` is a list -> traceback from the sort;
    `accuracy.trained` a string -> `status: error: Unknown format code 'f'` naming no file; a held lock
    whose progress.json has `"eta_s": "soon"` -> traceback. Want: each run shown, each field named."""
    root = tmp_path / "runs"
    good = finished(root, 1)
    text_horizon = finished(root, 2, horizon="512")
    listed = root / "smoke" / "ra_flat" / "h512_s_list"
    listed.mkdir()
    (listed / "run.json").write_text(json.dumps({"arm": "ra_flat", "seed": [1, 2], "horizon": 512, "profile": "smoke"}))
    worded = finished(root, 4)
    info = json.loads((worded / "run.json").read_text())
    info["accuracy"]["trained"] = {"toy_heldout": "high"}
    (worded / "run.json").write_text(json.dumps(info))
    flat = finished(root, 5)
    info = json.loads((flat / "run.json").read_text())
    info["accuracy"] = {"trained": "0.5"}
    (flat / "run.json").write_text(json.dumps(info))
    running = make_run(root, "ra_flat", 6)
    with run_lock(running):
        Beacon(running, phase="train").update(done=3, total=8, unit="step", eta_s="soon", last_seconds=[1])
        rows, problems = sweep_report(root)
        assert status_main([str(root)]) == 0
    out = capsys.readouterr().out
    by_dir = {r["run_dir"]: r for r in rows}
    # numbers in order, then what is not a number (the seed list, then the horizon "512")
    assert states(rows) == [(1, "finished"), (4, "finished"), (5, "finished"), (6, "running"), ([1, 2], "dead"),
                            (2, "finished")]
    assert by_dir[str(good)]["detail"] == "toy_heldout 13.0 -> 18.5"
    assert by_dir[str(worded)]["detail"] == "toy_heldout 13.0 -> ?"
    assert by_dir[str(flat)]["detail"] == ""
    assert by_dir[str(running)]["detail"].startswith(f"train 3/8 step, pid {os.getpid()} on {socket.gethostname()}, "
                                                     "updated ")
    assert sorted(problems.lines) == sorted([
        f"{text_horizon / 'run.json'}: horizon: \"512\" is not a whole number",
        f"{listed / 'run.json'}: seed: [1, 2] is not a whole number",
        f"{worded / 'run.json'}: accuracy.trained.toy_heldout: \"high\" is not a number",
        f"{flat / 'run.json'}: accuracy.trained: \"0.5\" is not an object",
        f"{running / 'progress.json'}: last_seconds: [1] is not a number",
        f"{running / 'progress.json'}: eta_s: \"soon\" is not a number",
    ])
    assert "6 runs: 4 finished, 1 running, 1 dead" in out and "Unknown format code" not in out


def test_what_cannot_be_read_is_counted_and_named(tmp_path, monkeypatch):
    """Seen: folders the walker could not read, and unreadable files, were dropped without a word."""
    root = tmp_path / "runs"
    finished(root, 1)
    (make_run(root, "ra_flat", 2) / "run.json").write_bytes(b'{"arm": "\xff"}')
    as_folder = root / "smoke" / "ra_flat" / "h512_s3_x"
    (as_folder / "run.json").mkdir(parents=True)  # a run.json that is a folder: read by no one, root included
    locked = root / "smoke" / "locked"
    locked.mkdir()
    real = os.scandir

    def scandir(path="."):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)  # the walker's listing of that one folder
    rows, problems = sweep_report(root)
    assert sorted(r["state"] for r in rows) == ["dead", "dead", "finished"]
    assert sorted(problems.lines) == sorted([
        f"{locked}: not read: cannot be read (Permission denied)",
        f"{root / 'smoke' / 'ra_flat' / 'h512_s2_00000002' / 'run.json'}: not read: not UTF-8 (byte 0xff at offset 9)",
        f"{as_folder / 'run.json'}: not read: Is a directory",
    ])
    assert problems.summary() == "not read: 2 files, 1 folder"


def test_watch_goes_on_when_a_file_goes_bad_mid_watch(tmp_path, monkeypatch, capsys):
    """Seen: `--watch` died mid-watch on a bad file. Want: the file is named on the next screen, and even a
    failure of the reading itself is said on the screen while the watch goes on."""
    root = tmp_path / "runs"
    run_dir = finished(root, 1)
    screens, reads = [], []
    real_report = status_cli.sweep_report

    def sleep(_):
        screens.append(None)
        if len(screens) == 1:  # between the first and second screens, run.json goes bad
            (run_dir / "run.json").write_text(json.dumps({"arm": "ra_flat", "seed": "one", "horizon": {"a": 1}}))
        elif len(screens) == 4:
            raise KeyboardInterrupt

    def flaky(where):
        reads.append(None)
        if len(reads) == 3:  # the third reading fails (a bug, say)
            raise RuntimeError("disk on fire")
        return real_report(where)

    monkeypatch.setattr(status_cli, "sweep_report", flaky)
    monkeypatch.setattr(status_cli.time, "sleep", sleep)
    assert status_main([str(root), "--watch", "0.01"]) == 0
    out = capsys.readouterr().out.split("\x1b[H\x1b[2J")[1:]
    assert len(out) == 4
    assert "1 run: 1 finished" in out[0] and "read in part" not in out[0]
    assert f"{run_dir / 'run.json'}: seed: \"one\" is not a whole number" in out[1]
    assert "reading failed (RuntimeError: disk on fire), a bug in rlvr_sweep" in out[2]
    assert "1 run: 1 finished" in out[2] and "reading failed" not in out[3]


# --- a moved or copied root ------------------------------------------------------------------

def test_a_moved_root_shows_each_run_once(tmp_path):
    """Seen: after `mv root moved`, 2 finished runs became 4 rows, 2 of them `not started ... relaunch it`:
    records kept absolute paths. Want: each run once with its true state, from records written now
    (relative paths, run hashes) and from records written before (absolute paths under their out_root)."""
    root = tmp_path / "runs"
    finished(root, 1), finished(root, 2)
    old = root / records.SWEEPS / "20261201-120000-1.json"  # as records were written before: absolute paths
    old.parent.mkdir()
    old_jobs = [{k: v for k, v in job(root, s, n).items() if k != "run_hash"} for n, s in enumerate([1, 2, 3], 1)]
    old.write_text(json.dumps({"created_at": time.time() - 60, "pid": dead_pid(), "host": socket.gethostname(),
                               "command": ["-m", "seed=1,2,3"], "jobs": old_jobs}))
    new = records.write_records([job(root, s, n) for n, s in enumerate([1, 2, 3, 4], 1)], ["-m", "seed=1,2,3,4"])[0]
    assert str(root) not in new.read_text()  # nothing absolute in a record written now
    before = states(sweep_states(root))
    assert before == [(1, "finished"), (2, "finished"), (3, "queued"), (4, "queued")]
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    shutil.move(root, moved)
    assert states(sweep_states(moved)) == before
    copied = tmp_path / "copy"
    shutil.copytree(moved, copied, symlinks=True)
    assert states(sweep_states(copied)) == before
    (moved / records.SWEEPS / new.name).unlink()  # only the old record: its third job has not started
    rows = sweep_states(moved)
    assert states(rows) == [(1, "finished"), (2, "finished"), (3, "not started")]
    assert rows[2]["run_dir"] == str(moved / "smoke" / "ra_flat" / "h512_s3_00000003")


def test_a_run_folder_found_elsewhere_is_matched_by_its_run_hash(tmp_path):
    root = tmp_path / "runs"
    run_dir = finished(root, 1)
    records.write_records([job(root, 1, 1, scheduler="slurm", job="77_0")], ["-m", "seed=1"])
    run_dir.rename(root / "smoke" / "archived_h512_s1")
    rows = sweep_states(root)
    assert states(rows) == [(1, "finished")] and rows[0]["job"] == "77_0"


def test_a_profile_folder_shows_only_its_own_recorded_jobs(tmp_path):
    root = tmp_path / "runs"
    records.write_records([job(root, 1, 1), {**job(root, 2, 2), "profile": "paper",
                                             "run_dir": str(root / "paper" / "ra_flat" / "h512_s2_x")}], ["-m"])
    (root / "smoke").mkdir()
    assert states(sweep_states(root / "smoke")) == [(1, "queued")]
    assert states(sweep_states(root)) == [(2, "queued"), (1, "queued")]


# --- the launching process -------------------------------------------------------------------

def test_a_reused_pid_does_not_keep_an_ended_sweep_queued(tmp_path):
    """Seen: `status` only checked that some process had the launcher's pid. Want: the launcher is alive
    only if the process with that pid started before its record was written, on this host."""
    root = tmp_path / "runs"
    later = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        written = time.time() - 30  # the record is older than the process now holding its pid
        for name, head in {
            "old_format": {"created_at": written, "pid": later.pid},  # as records were written before
            "other_start": {"created_at": time.time(), "pid": later.pid, "pid_start": ["another-boot", 1]},
            "this_process": {"created_at": time.time(), "pid": os.getpid()},
            "elsewhere": {"created_at": time.time(), "pid": os.getpid(), "host": "node-7"},
        }.items():
            seed = {"old_format": 1, "other_start": 2, "this_process": 3, "elsewhere": 4}[name]
            path = root / records.SWEEPS / f"{name}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"host": socket.gethostname(), **head,
                                        "jobs": [{**job(root, seed, 1), "run_dir": f"smoke/ra_flat/h512_s{seed}_x"}]}))
        rows = {r["seed"]: r for r in sweep_states(root)}
    finally:
        later.kill()
        later.wait()
    reused = (f"its sweep (pid {later.pid}) has ended: pid {later.pid} is now a process started after the sweep's "
              "record; relaunch it")
    assert (rows[1]["state"], rows[1]["detail"]) == ("not started", reused)
    assert (rows[2]["state"], rows[2]["detail"]) == ("not started", reused)
    assert rows[3]["state"] == "queued"  # this very process wrote it (it started before the record)
    elsewhere = f"its sweep (pid {os.getpid()} on node-7) cannot be asked from this machine; relaunch it once it has ended"
    assert (rows[4]["state"], rows[4]["detail"]) == ("not started", elsewhere)


def test_the_launcher_start_is_recorded_and_matched(tmp_path):
    root = tmp_path / "runs"
    path = records.write_records([job(root, 1, 1)], ["-m"])[0]
    record = json.loads(path.read_text())
    assert record["pid_start"] == records.process_start(os.getpid()) and record["state"] == "launched"
    assert records.launcher({**record, "created_at": 0.0}) == "alive"  # the start decides, not the time
    assert records.launcher({**record, "pid": dead_pid()}) == "ended"
    assert records.launcher({**record, "host": None}) == "unknown"


def test_true_is_no_process_id_nor_a_number(tmp_path):
    """JSON's `true` is Python's 1: a launch record whose pid is `true` would be pid 1 (init, always alive), so its
    jobs would show queued forever; a progress file's `"done": true` would be step 1. Both are named, not used (#21)."""
    root = tmp_path / "runs"
    finished(root, 1)
    sweeps = root / records.SWEEPS
    sweeps.mkdir()
    (sweeps / "bool.json").write_text(json.dumps({"created_at": time.time(), "pid": True, "host": socket.gethostname(),
                                                  "jobs": [{**job(root, 3, 1), "run_dir": "smoke/ra_flat/h512_s3_x"}]}))
    running = make_run(root, "ra_flat", 6)
    with run_lock(running):
        Beacon(running, phase="train").update(done=True, total=8, unit="step")
        rows, problems = sweep_report(root)
    assert states(rows) == [(1, "finished"), (3, "not started"), (6, "running")]
    assert rows[1]["detail"].startswith("its record does not say which process wrote it")
    assert rows[2]["detail"].startswith(f"train ?/8 step, pid {os.getpid()}")
    assert problems.lines == [f"{running / 'progress.json'}: done: true is not a number",
                              f"{sweeps / 'bool.json'}: pid: true is not a whole number"]

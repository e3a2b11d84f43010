"""`status ROOT` and `status -- <the sweep's overrides>` agree about the jobs of a live sweep, and a sweep is
visible from the start of its preflight (its record marked `checking`), on real compositions. (The same
followed in a real sweep process, killed mid-sweep: tests/sweep/test_status_live.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rlvr_sweep.sweep import records
from rlvr_sweep.sweep.cli import CONF_DIR
from rlvr_sweep.sweep.preflight import PreflightError, check_sweep, located_jobs
from rlvr_sweep.sweep.status import sweep_states
from rlvr_sweep.sweep.status_cli import main as status_main
from tests.sweep.test_status import dead_pid, squeue_on_path


def line_for(root) -> list[str]:
    return ["+arm=ra_flat", "profile=smoke", "train.steps=2", f"run.out_root={root}", "seed=1,2,3"]


def both_views(root, line, capsys) -> tuple[dict, dict]:
    """{seed: row} as `status ROOT` says it, and as `status -- <line>` says it."""
    by_root = {r["seed"]: r for r in sweep_states(root)}
    assert status_main(["--json", "--", *line[:-1], "-m", line[-1]]) == 0
    planned = {r["seed"]: r for r in json.loads(capsys.readouterr().out)}
    return by_root, planned


def finish(run_dir) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"arm": "ra_flat", "seed": 1, "horizon": 512, "profile": "smoke",
                                                  "status": "finished"}))
    (run_dir / "DONE").write_text("")


def test_status_root_and_the_sweep_command_agree_on_a_live_sweep(tmp_path, capsys, monkeypatch):
    """Seen: while a basic-launcher sweep had jobs queued, `status ROOT` said `queued (job 2 of 3 ...)` but
    `status -- <same overrides>` said `new ... start`. Want: both say queued, with the same words, and the
    sweep command's column says a relaunch would start them a second time."""
    root = tmp_path / "runs"
    line = line_for(root)
    jobs = located_jobs(str(CONF_DIR), line)
    path = records.write_records(jobs, line)[0]
    finish(Path(jobs[0]["run_dir"]))
    by_root, planned = both_views(root, line, capsys)
    queued = [f"job {n} of 3 of the sweep run by pid {os.getpid()} (basic launcher: one job after another)" for n in (2, 3)]
    assert [(by_root[s]["state"], by_root[s]["detail"]) for s in (2, 3)] == [("queued", d) for d in queued]
    assert [(planned[s]["state"], planned[s]["detail"]) for s in (2, 3)] == [("queued", d) for d in queued]
    assert [planned[s]["would"] for s in (1, 2, 3)] == ["skip", *["start it (also queued in its sweep)"] * 2]

    record = json.loads(path.read_text())  # the same sweep still in its preflight
    path.write_text(json.dumps({**record, "state": "checking"}))
    by_root, planned = both_views(root, line, capsys)
    assert by_root[3]["state"] == planned[3]["state"] == "checking"
    assert by_root[3]["detail"] == planned[3]["detail"] == (
        f"job 3 of 3 of the sweep whose preflight (pid {os.getpid()}) is checking its jobs; none is launched yet")

    gone = dead_pid()  # its process killed during the preflight
    path.write_text(json.dumps({**record, "state": "checking", "pid": gone, "pid_start": None}))
    by_root, planned = both_views(root, line, capsys)
    ended = f"its sweep (pid {gone}) has ended in its preflight; relaunch it"
    assert (by_root[3]["state"], by_root[3]["detail"]) == (planned[3]["state"], planned[3]["detail"]) == ("not started", ended)
    assert planned[3]["would"] == "start"

    ids = {tuple(j["overrides"]): f"55_{j['number'] - 1}" for j in jobs}  # the same sweep through SLURM
    path.write_text(json.dumps(record))
    records._written[:] = [path]
    records.add_job_ids(ids, "slurm")
    squeue_on_path(monkeypatch, tmp_path / "bin", stdout="55_1|PENDING|(Priority)\n55_2|RUNNING|node1\n")
    by_root, planned = both_views(root, line, capsys)
    for view in (by_root, planned):
        assert [(view[s]["state"], view[s]["detail"]) for s in (2, 3)] == [
            ("queued", "SLURM job 55_1: PENDING (Priority)"), ("starting", "SLURM job 55_2: RUNNING (node1)")]
    assert [planned[s]["would"] for s in (2, 3)] == ["start it (also queued in its sweep)",
                                                     "start it (also starting in its sweep)"]


def test_the_launch_record_exists_from_the_start_of_the_preflight(tmp_path, monkeypatch):
    """Seen: the record was written after the preflight, so `status` during a long preflight saw none of
    the sweep. Want: every job shown `checking` while the preflight checks the first one; `queued` once it
    passed; and no record at all of a sweep the preflight refused."""
    import rlvr_sweep.run

    root = tmp_path / "runs"
    seen = []

    def plan(cfg, shards=None):  # the long part of the preflight: each job's check (`run.plan`'s signature)
        seen.append((cfg.seed, [(r["seed"], r["state"], r["detail"]) for r in sweep_states(root)]))
        if cfg.seed == 13:
            raise ValueError("the prompt of item 4 is longer than the model's context")

    monkeypatch.setattr(rlvr_sweep.run, "plan", plan)
    assert check_sweep(str(CONF_DIR), line_for(root)) == 3
    checking = [(s, "checking", (f"job {s} of 3 of the sweep whose preflight (pid {os.getpid()}) is checking its "
                                 "jobs; none is launched yet")) for s in (1, 2, 3)]
    assert seen == [(1, checking), (2, checking), (3, checking)]
    assert [(r["seed"], r["state"]) for r in sweep_states(root)] == [(1, "queued"), (2, "queued"), (3, "queued")]
    (path,) = (root / records.SWEEPS).glob("*.json")
    record = json.loads(path.read_text())
    assert record["state"] == "launched" and record["n_jobs"] == 3
    assert [j["run_dir"] for j in record["jobs"]] == [f"smoke/ra_flat/h512_s{s}_{j['run_hash']}"
                                                      for s, j in zip((1, 2, 3), record["jobs"])]
    path.unlink()

    refused = root.parent / "refused"
    with pytest.raises(PreflightError, match=r"job 2 of 3 .*seed=13.*longer than the model's context"):
        check_sweep(str(CONF_DIR), [*line_for(refused)[:-1], "seed=12,13,14"])
    assert not refused.exists()  # a refused sweep writes nothing, its record included


def test_the_sweep_command_form_reads_what_it_reads_as_untrusted(tmp_path, capsys):
    """`status -- <overrides>` reads the same files as `status ROOT`: a bad one is named, the rows all shown."""
    root = tmp_path / "runs"
    line = line_for(root)
    jobs = located_jobs(str(CONF_DIR), line)
    first = Path(jobs[0]["run_dir"])
    first.mkdir(parents=True)
    (first / "run.json").write_text(json.dumps({"arm": "ra_flat", "seed": [1], "status": "failed", "error": 7}))
    bad = root / records.SWEEPS / "bad.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"created_at": 1.0, "pid": 1, "host": "h", "jobs": [{"number": "one", "run_dir": 3}]}))
    assert status_main(["--json", "--", *line[:-1], "-m", line[-1]]) == 0
    printed = capsys.readouterr()
    assert [(r["seed"], r["state"], r["would"]) for r in json.loads(printed.out)] == [
        (1, "failed", "move aside, start over"), (2, "new", "start"), (3, "new", "start")]  # the job's own seed
    assert printed.err.splitlines() == [
        f"status: {bad}: jobs[0].number: \"one\" is not a whole number",
        f"status: {bad}: jobs[0].arm: missing",
        f"status: {bad}: jobs[0].seed: missing",
        f"status: {bad}: jobs[0].horizon: missing",
        f"status: {bad}: jobs[0].profile: missing",
        f"status: {bad}: jobs[0].run_dir: 3 is not a string; the job is left out (it names no run folder)",
        f"status: {first / 'run.json'}: seed: [1] is not a whole number",
        f"status: {first / 'run.json'}: error: 7 is not a string",
    ]

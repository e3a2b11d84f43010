"""The state of every run of a sweep, from its folders, locks, progress files and launch records.

A run folder (found by `store.walk`, as `collect` finds it) is in one of these states:

- `finished`: its `DONE` marker is there (the detail: base -> trained accuracy on its first benchmark);
- `running`: a process holds its lock (`store.lock.lock_holder`, asked of the kernel) and writes its
  progress file (`store.beacon`): host, pid, phase, step i / N, the last step's seconds, tokens/s, ETA;
- `busy`: a process holds its lock but is not (yet) reporting progress in it (loading the model, or
  another process tidying the folder): a relaunch would leave it alone;
- `failed`: no process holds it and its run.json says it failed (the first line of the error);
- `dead`: no process holds it, no DONE, not failed (killed): what a relaunch does with it — resume
  from the checkpoint's step, resume the base read-out, or move it aside and start over;
- `moved aside`: a folder a run that started over moved aside (`.stale-` in its name; never read).

A job that the sweep's launch record (`sweep.records`) lists but whose folder does not exist yet is
`queued` (a SLURM job and array index, with `squeue`'s state and reason when `squeue` is there; a job
of a basic-launcher sweep whose process still runs), `starting` (SLURM runs the job, which has not made
its folder yet: it is importing and loading), `lost` (its SLURM job left the queue without
making a folder) or `not started` (its sweep's process has ended). `planned` states say, for the
jobs a sweep command would make, what a relaunch would do with each.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from rlvr_sweep.store import walk
from rlvr_sweep.store.beacon import read_progress
from rlvr_sweep.store.lock import lock_holder
from rlvr_sweep.store.manifest import CHECKPOINT
from rlvr_sweep.store.rundir import DONE_MARKER, read_run_json
from rlvr_sweep.sweep.records import read_records

STATES = ("finished", "running", "busy", "starting", "queued", "failed", "dead", "lost", "not started", "moved aside")
FIELDS = ("arm", "paper_arm", "horizon", "seed", "profile")


def sweep_states(root) -> list[dict]:
    """One row per run folder under `root`, then per recorded job without a folder, then per folder
    moved aside: {arm, paper_arm, horizon, seed, profile, state, detail, run_dir, ...}."""
    found = walk(root)
    recorded = _latest_jobs(root)
    rows = [_with_job(folder_state(d), recorded.get(str(Path(d).resolve()))) for d in found.runs]
    have = {str(Path(d).resolve()) for d in found.runs}
    rows += [job_state(job, record) for job, record in recorded.items() if job not in have]
    rows += [{**_fields(read_json_or_empty(d)), "state": "moved aside", "detail": "", "run_dir": str(d)}
             for d in found.stale]
    _add_squeue(rows)
    return sorted(rows, key=_order)


def _with_job(row: dict, record: dict | None) -> dict:
    """A running folder's row names its SLURM (or local executor's) job, when the launch recorded one."""
    job = (record or {}).get("job", {})
    if job.get("job"):
        row["job"] = job["job"]
        if row["state"] in ("running", "busy"):
            row["detail"] += f", {'SLURM' if job.get('scheduler') == 'slurm' else job.get('scheduler')} job {job['job']}"
    return row


def _order(row: dict) -> tuple:
    """Profile, arm, horizon, seed (numbers as numbers), then the folder."""
    return (str(row.get("profile")), str(row.get("arm")), row.get("horizon") or 0, row.get("seed") or 0,
            row.get("state") == "moved aside", row["run_dir"])


def folder_state(run_dir: Path) -> dict:
    """The state of one run folder (module docstring)."""
    info = read_json_or_empty(run_dir)
    row = {**_fields(info), "run_dir": str(run_dir)}
    if (run_dir / DONE_MARKER).is_file():
        return {**row, "state": "finished", "detail": _accuracy_line(info), "accuracy": info.get("accuracy")}
    holder = lock_holder(run_dir)
    progress = read_progress(run_dir)
    if holder is not None:
        mine = progress and (progress.get("pid"), progress.get("host")) == (holder.get("pid"), holder.get("host"))
        if mine:
            return {**row, "state": "running", "detail": _progress_line(progress), "progress": progress}
        return {**row, "state": "busy", "detail": f"held by pid {holder.get('pid', '?')} on {holder.get('host', '?')}"
                f"{_since(holder.get('started'))}, no progress reported yet", "holder": holder}
    note, action = resume_of(run_dir, progress)
    if info.get("status") == "failed":
        first = (str(info.get("error") or "failed").strip().splitlines() or ["failed"])[0]
        return {**row, "state": "failed", "detail": f"{first[:160]}; {note}", "error": first, "relaunch": action}
    return {**row, "state": "dead", "detail": f"unfinished and no process holds it: {note}", "relaunch": action}


def resume_of(run_dir: Path, progress: dict | None) -> tuple[str, str]:
    """What a relaunch does with an unfinished folder (`run.lifecycle._resume_or_start`): the words for
    the detail column, and the action for `planned_states`' `would`."""
    if (run_dir / CHECKPOINT).is_file():
        step = (progress or {}).get("checkpoint_step")
        where = f"from step {step}" if step is not None else "from its checkpoint"
        return f"will resume {where}", f"resume {where}"
    if (run_dir / "grades.parquet").is_file() and not (run_dir / "steps.parquet").is_file():
        return (f"will resume its first read-out after {_graded_benchmarks(run_dir)} graded benchmark(s)",
                "resume the first read-out")
    return "will be moved aside and started over (no checkpoint)", "move aside, start over"


def job_state(run_dir: str, record: dict) -> dict:
    """A recorded job whose run folder does not exist (yet)."""
    job = record["job"]
    row = {**{k: job.get(k) for k in FIELDS}, "run_dir": run_dir, "sweep_record": record["path"]}
    if Path(run_dir).is_dir() and lock_holder(Path(run_dir)) is not None:
        return {**row, "state": "starting", "detail": "its folder is locked, no run.json yet (loading the model)"}
    if job.get("scheduler") == "slurm":
        return {**row, "state": "queued", "detail": f"SLURM job {job['job']}", "slurm_job": job["job"]}
    if job.get("job"):
        return {**row, "state": "queued", "detail": f"{job.get('scheduler', 'local')} job {job['job']}"}
    alive = record["host"] == socket.gethostname() and _pid_alive(record["pid"])
    if alive:
        return {**row, "state": "queued", "detail": f"job {job['number']} of {record['n_jobs']} of the sweep run by "
                f"pid {record['pid']} (basic launcher: one job after another)"}
    where = "" if record["host"] == socket.gethostname() else f" on {record['host']}"
    return {**row, "state": "not started", "detail": f"its sweep (pid {record['pid']}{where}) has ended; relaunch it"}


def planned_states(jobs: list[dict]) -> list[dict]:
    """For the jobs a sweep command would make (`preflight.located_jobs`): each one's state and what a
    relaunch now would do with it (`would`: skip, leave alone, resume, start over, start)."""
    rows = []
    for job in jobs:
        run_dir = Path(job["run_dir"])
        if (run_dir / "run.json").is_file():
            row = folder_state(run_dir)
        else:
            row = {**{k: job.get(k) for k in FIELDS}, "run_dir": str(run_dir), "state": "new", "detail": "no run folder yet"}
        row["would"] = {"finished": "skip", "running": "leave alone (busy)", "busy": "leave alone (busy)",
                        "new": "start"}.get(row["state"]) or row.get("relaunch", "start")
        rows.append(row)
    return rows


def totals(rows: list[dict]) -> tuple[dict, dict]:
    """Runs per state, and per arm and horizon the runs per state."""
    by_state: dict[str, int] = {}
    by_arm: dict[str, dict[str, int]] = {}
    for row in rows:
        by_state[row["state"]] = by_state.get(row["state"], 0) + 1
        arm = by_arm.setdefault(f"{row.get('arm')} h{row.get('horizon')}", {})
        arm[row["state"]] = arm.get(row["state"], 0) + 1
    return by_state, by_arm


# ---------------------------------------------------------------------------------------------


def read_json_or_empty(run_dir: Path) -> dict:
    try:
        info = read_run_json(run_dir)
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _fields(info: dict) -> dict:
    return {k: info.get(k) for k in FIELDS}


def _latest_jobs(root) -> dict[str, dict]:
    """Each recorded run folder's latest job: {run_dir: {job, path, pid, host, n_jobs}}."""
    latest = {}
    for record in read_records(Path(root)):
        for job in record["jobs"]:
            latest[job["run_dir"]] = {"job": job, "path": record["path"], "pid": record.get("pid"),
                                      "host": record.get("host"), "n_jobs": len(record["jobs"])}
    return latest


def _add_squeue(rows: list[dict]) -> None:
    """SLURM's own word on queued jobs (`squeue -r`: one line per array element), when squeue is here."""
    queued = [r for r in rows if r.get("slurm_job")]
    if not queued:
        return
    if not shutil.which("squeue"):
        for r in queued:
            r["detail"] += " (squeue is not on this machine)"
        return
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T|%R"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        for r in queued:
            r["detail"] += f" (squeue failed: {err})"
        return
    states = {}
    for line in out.stdout.splitlines():
        job_id, state, reason = (line.split("|") + ["", ""])[:3]
        states[job_id.strip()] = (state.strip(), reason.strip())
    for r in queued:
        if r["slurm_job"] in states:
            state, reason = states[r["slurm_job"]]
            r["slurm_state"] = state
            reason = reason.strip("()")
            r["detail"] += f": {state}" + (f" ({reason})" if reason and reason != "None" else "")
            if state in ("RUNNING", "COMPLETING", "CONFIGURING"):  # begun, its run folder not made yet
                r["state"] = "starting"
        elif out.returncode == 0:
            r.update(state="lost", detail=r["detail"] + " is no longer in the queue and made no run folder "
                     "(see its submitit log); relaunch the sweep to run it")


def _accuracy_line(info: dict) -> str:
    accuracy = info.get("accuracy") or {}
    trained = accuracy.get("trained") or accuracy.get("eval") or {}
    if not trained:
        return ""
    bench = next(iter(trained))
    base = (accuracy.get("base") or {}).get(bench)
    now = 100 * trained[bench]
    return f"{bench} {100 * base:.1f} -> {now:.1f}" if base is not None else f"{bench} {now:.1f}"


def _progress_line(p: dict) -> str:
    parts = [f"{p.get('phase', '?')} {p.get('done', '?')}/{p.get('total', '?')} {p.get('unit', '')}".rstrip()
             if "total" in p else str(p.get("phase", "?"))]  # before its first step or item: "starting"
    if p.get("last_seconds") is not None:
        parts.append(f"last {p['last_seconds']:.2f}s")
    if p.get("tokens_per_s"):
        parts.append(f"{p['tokens_per_s']:,.0f} tok/s")
    if p.get("eta_s") is not None:
        parts.append(f"ETA {_duration(p['eta_s'])}")
    parts.append(f"pid {p.get('pid')} on {p.get('host')}")
    if p.get("updated_at"):
        parts.append(f"updated {_duration(time.time() - p['updated_at'])} ago")
    return ", ".join(parts)


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _since(started) -> str:
    return f" since {time.strftime('%H:%M:%S', time.localtime(started))}" if started else ""


def _graded_benchmarks(run_dir: Path) -> int:
    import pyarrow.parquet as pq

    try:
        return len(set(pq.read_table(run_dir / "grades.parquet", columns=["benchmark"]).column(0).to_pylist()))
    except Exception:  # noqa: BLE001  (a damaged table: the run starts over, as `_graded_so_far` decides)
        return 0


def _pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (OSError, TypeError, ValueError):
        return False
    return True

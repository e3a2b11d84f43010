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
`checking` (its sweep's preflight, still running, is checking the jobs), `queued` (a SLURM job and array
index, with `squeue`'s state and reason, or what failed when `squeue` did; a job of a basic-launcher sweep
whose very process still runs), `starting` (SLURM runs the job, which has not made its folder yet: it is
importing and loading), `lost` (its SLURM job left the queue without making a folder) or `not started`
(its sweep's process has ended, or its pid now belongs to a later process). Recorded jobs are matched to
folders by where they lie under the root and by run hash, so a moved or copied root shows each run once.
`planned_report` says, for the jobs a sweep command would make, the same states and what a relaunch
would do with each.

Every file read here is untrusted (CONVENTIONS #21): a run.json, progress file, lock file or launch
record with a missing or wrong-typed field is shown as far as it can be and named in one line
(`records.Problems`), and a file or folder that cannot be read is named; none of them hides the others.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from rlvr_sweep.store import walk
from rlvr_sweep.store.beacon import PROGRESS_JSON
from rlvr_sweep.store.lock import lock_holder, lock_path
from rlvr_sweep.store.manifest import CHECKPOINT
from rlvr_sweep.store.rundir import DONE_MARKER, RUN_JSON
from rlvr_sweep.sweep.records import (
    CHECKING,
    SWEEPS,
    Problems,
    check_fields,
    latest_jobs,
    launcher,
    place,
    read_json,
    read_records,
    wrong_type,
)

STATES = ("finished", "running", "busy", "starting", "checking", "queued", "failed", "dead", "lost", "not started",
          "moved aside")
FIELDS = ("arm", "paper_arm", "horizon", "seed", "profile")
RUN_FIELDS = {"arm": "str", "paper_arm": "label", "horizon": "int", "seed": "int", "profile": "str", "status": "str",
              "error": "str", "run_hash": "str", "accuracy": "object"}
PROGRESS_FIELDS = {"pid": "int", "host": "str", "phase": "str", "done": "number", "total": "number", "unit": "str",
                   "last_seconds": "number", "tokens_per_s": "number", "eta_s": "number", "updated_at": "number",
                   "checkpoint_step": "int", "entropy": "number", "kl_ref": "number", "clip_low": "number",
                   "clip_high": "number"}
HOLDER_FIELDS = {"pid": "int", "host": "str", "started": "number"}


def sweep_states(root) -> list[dict]:
    """The rows of `sweep_report`."""
    return sweep_report(root)[0]


def sweep_report(root) -> tuple[list[dict], Problems]:
    """One row per run folder under `root`, then per recorded job without a folder, then per folder
    moved aside ({arm, paper_arm, horizon, seed, profile, state, detail, run_dir, ...}; `problems`: the
    lines naming what was wrong in the row's own files); and every problem met, the walker's unread
    folders included."""
    problems = Problems()
    found = walk(root)
    for path, why in found.skipped:
        problems.not_read(path, why, kind="folder")
    rows = [folder_state(d, problems) for d in found.runs]
    home = place(Path(root) / SWEEPS)  # a profile folder's parent's records: only the jobs under the profile
    jobs = [j for j in latest_jobs(read_records(Path(root), problems))
            if place(Path(j["record"]["path"]).parent) == home or _inside(j["where"], root)]
    rows += _unmatched_jobs(rows, jobs)
    for d in found.stale:
        info = read_json(d / RUN_JSON, problems, missing_ok=True) or {}
        rows.append({**{k: info.get(k) for k in FIELDS}, "state": "moved aside", "detail": "", "run_dir": str(d)})
    _add_squeue(rows)
    return sorted(named(rows), key=_order), problems


def named(rows: list[dict]) -> list[dict]:
    """Each row with `row`, its arm row's name as the tables give it (`analysis.row_names`: what it changes from its
    arm's preset), and the paper arm it keeps; a job without a folder yet is named by its launch line's overrides."""
    from rlvr_sweep.analysis.row_names import bracket, name_folders, override_parts

    folders = [r["run_dir"] for r in rows if r.get("state") != "moved aside" and r.get("run_dir")
               and (Path(r["run_dir"]) / RUN_JSON).is_file()]
    names, _, said = name_folders(folders)
    for row in rows:
        if row.get("run_dir") in names:
            row["row"], row["paper_arm"] = names[row["run_dir"]]
        else:  # what every folder's row shares is left out of its name: so too of a job's
            shared = said.get(str(row.get("profile")), [])
            row["row"] = f"{row.get('arm')}{bracket([p for p in override_parts(row.get('overrides')) if p not in shared])}"
    return rows


def _unmatched_jobs(rows: list[dict], jobs: list[dict]) -> list[dict]:
    """A job whose run folder was found (where the record puts it, else by its run hash) names its SLURM
    job on the folder's row; the others get rows of their own."""
    by_place = {place(r["run_dir"]): r for r in rows}
    by_hash = {r["run_hash"]: r for r in rows if r.get("run_hash")}
    rest = []
    for job in jobs:
        row = by_place.get(place(job["where"])) or (by_hash.get(job["run_hash"]) if job["run_hash"] else None)
        if row is not None:
            _with_job(row, job)
        else:
            rest.append(job_state(job))
    return rest


def _with_job(row: dict, job: dict | None) -> dict:
    """A running folder's row names its SLURM (or local executor's) job, when the launch recorded one."""
    if job is None or job.get("job") is None:
        return row
    row["job"] = job["job"]
    if row["state"] in ("running", "busy"):
        row["detail"] += f", {_scheduler(job)} job {job['job']}"
    return row


def _order(row: dict) -> tuple:
    """Profile, arm, its row, horizon, seed (numbers as numbers, before anything else read there), then the folder."""
    return (str(row.get("profile")), str(row.get("arm")), str(row.get("row")), _sortable(row.get("horizon")),
            _sortable(row.get("seed")),
            row.get("state") == "moved aside", row["run_dir"])


def _sortable(value) -> tuple:
    if value is None or wrong_type(value, "number") is None:
        return 0, value or 0, ""
    return 1, 0, str(value)


def folder_state(run_dir: Path, problems: Problems | None = None) -> dict:
    """The state of one run folder (module docstring); what was wrong in its files is named in
    `problems` and in the row's `problems`."""
    problems = Problems() if problems is None else problems
    start = len(problems.lines)
    row = _folder_state(Path(run_dir), problems)
    if len(problems.lines) > start:
        row["problems"] = problems.lines[start:]
    return row


def _folder_state(run_dir: Path, problems: Problems) -> dict:
    source = run_dir / RUN_JSON
    info = read_json(source, problems) or {}
    good = check_fields(info, RUN_FIELDS, source, problems)
    row = {**{k: info.get(k) for k in FIELDS}, "run_hash": good["run_hash"], "run_dir": str(run_dir)}
    if (run_dir / DONE_MARKER).is_file():
        return {**row, "state": "finished", "detail": _accuracy_line(info, source, problems),
                "accuracy": info.get("accuracy")}
    holder = lock_holder(run_dir)
    raw = read_json(run_dir / PROGRESS_JSON, problems, missing_ok=True)
    progress = check_fields(raw, PROGRESS_FIELDS, run_dir / PROGRESS_JSON, problems) if raw is not None else None
    if holder is not None:
        held = check_fields(holder, HOLDER_FIELDS, lock_path(run_dir), problems)
        if progress is not None and progress["pid"] is not None and (progress["pid"], progress["host"]) == (
                held["pid"], held["host"]):
            return {**row, "state": "running", "detail": _progress_line(progress), "progress": raw}
        return {**row, "state": "busy", "detail": f"held by pid {held['pid'] or '?'} on {held['host'] or '?'}"
                f"{_since(held['started'])}, no progress reported yet", "holder": holder}
    note, action = resume_of(run_dir, progress)
    if info.get("status") == "failed":
        first = (str(info.get("error") or "failed").strip().splitlines() or ["failed"])[0]
        return {**row, "state": "failed", "detail": f"{first[:160]}; {note}", "error": first, "relaunch": action}
    return {**row, "state": "dead", "detail": f"unfinished and no process holds it: {note}", "relaunch": action}


def resume_of(run_dir: Path, progress: dict | None) -> tuple[str, str]:
    """What a relaunch does with an unfinished folder (`run.folder.resume_or_start`): the words for
    the detail column, and the action for `planned_report`'s `would`."""
    if (run_dir / CHECKPOINT).is_file():
        step = (progress or {}).get("checkpoint_step")
        where = f"from step {step}" if step is not None else "from its checkpoint"
        return f"will resume {where}", f"resume {where}"
    if (run_dir / "grades.parquet").is_file() and not (run_dir / "steps.parquet").is_file():
        return (f"will resume its first read-out after {_graded_benchmarks(run_dir)} graded benchmark(s)",
                "resume the first read-out")
    return "will be moved aside and started over (no checkpoint)", "move aside, start over"


def job_state(job: dict) -> dict:
    """A recorded job (`latest_jobs`) whose run folder does not exist (yet)."""
    record, where = job["record"], job["where"]
    row = {**{k: job.get(k) for k in FIELDS}, "run_dir": str(where), "sweep_record": record["path"],
           **({"overrides": job["overrides"]} if isinstance(job.get("overrides"), list) else {}),
           **({"problems": job["problems"]} if job.get("problems") else {})}
    holder = lock_holder(where) if where.is_dir() else None
    if holder is not None:
        return {**row, **_loading(holder)}
    if job["scheduler"] == "slurm":
        if job["job"] is None:
            return {**row, "state": "queued", "detail": "SLURM job ? (its record lacks the id, so squeue is not asked)"}
        return {**row, "state": "queued", "detail": f"SLURM job {job['job']}", "slurm_job": job["job"]}
    how, pid, number = launcher(record), record["pid"], "?" if job["number"] is None else job["number"]
    if job["job"] is not None and how != "alive" and job["scheduler"] == "local":  # a local job ends with its sweep
        return {**row, "state": "not started", "detail": f"its sweep (pid {pid}) has ended and its {_scheduler(job)} "
                f"job {job['job']} made no run folder (it failed first: the sweep's summary said why); relaunch it"}
    if job["job"] is not None:
        return {**row, "state": "queued", "detail": f"{_scheduler(job)} job {job['job']}"}
    if how == "alive" and record["state"] == CHECKING:
        return {**row, "state": "checking", "detail": f"job {number} of {record['n_jobs']} of the sweep whose "
                f"preflight (pid {pid}) is checking its jobs; none is launched yet"}
    if how == "alive":
        return {**row, "state": "queued", "detail": f"job {number} of {record['n_jobs']} of the sweep run by "
                f"pid {pid} (basic launcher: one job after another)"}
    during = " in its preflight" if record["state"] == CHECKING else ""
    detail = {"ended": f"its sweep (pid {pid}) has ended{during}; relaunch it",
              "reused": f"its sweep (pid {pid}) has ended{during}: pid {pid} is now a process started after the "
                        "sweep's record; relaunch it",
              "elsewhere": f"its sweep (pid {pid} on {record['host']}) cannot be asked from this machine; relaunch "
                           "it once it has ended",
              "unknown": "its record does not say which process wrote it, where or when (named below); relaunch it "
                         "once its sweep has ended"}[how]
    return {**row, "state": "not started", "detail": detail}


def _loading(holder: dict) -> dict:
    """A folder locked before its run.json is written: its process is importing and loading."""
    return {"state": "starting", "detail": "its folder is locked, no run.json yet (loading the model)", "holder": holder}


def _scheduler(job: dict) -> str:
    return "SLURM" if job.get("scheduler") == "slurm" else (job.get("scheduler") or "an unrecorded scheduler's")


def planned_report(jobs: list[dict]) -> tuple[list[dict], Problems]:
    """For the jobs a sweep command would make (`preflight.located_jobs`): each one's state, as `status
    ROOT` says it (a job a live sweep has queued is queued here too), and what a relaunch now would do
    with it (`would`: skip, leave alone, resume, start over, start); and every problem met."""
    problems = Problems()
    recorded: dict = {}
    for root in dict.fromkeys(str(job["out_root"]) for job in jobs):
        for job in latest_jobs(read_records(Path(root), problems, parent=False)):
            recorded[place(job["where"])] = job
            if job["run_hash"]:
                recorded[("hash", job["run_hash"])] = job
    rows = []
    for job in jobs:
        run_dir = Path(job["run_dir"])
        known = recorded.get(place(run_dir)) or recorded.get(("hash", job.get("run_hash")))
        fields = {**{k: job.get(k) for k in FIELDS}, "run_dir": str(run_dir), "overrides": job.get("overrides"),
                  **({"memory": job["memory"]} if "memory" in job else {})}
        if (run_dir / RUN_JSON).is_file():  # labelled as composed: its run.json may say otherwise (named)
            row = {**_with_job(folder_state(run_dir, problems), known), **fields}
        elif known is not None:
            row = {**job_state(known), **fields}
        elif run_dir.is_dir() and lock_holder(run_dir) is not None:
            row = {**fields, **_loading(lock_holder(run_dir))}
        else:
            row = {**fields, "state": "new", "detail": "no run folder yet"}
        rows.append(row)
    _add_squeue(rows)
    for row in named(rows):
        row["would"] = _would(row)
    return rows, problems


def _would(row: dict) -> str:
    state = row["state"]
    if state == "finished":
        return "skip"
    if state in ("running", "busy") or (state == "starting" and row.get("holder") is not None):
        return "leave alone (busy)"
    if state in ("queued", "checking", "starting"):  # its own sweep will run it as well
        return f"start it (also {state} in its sweep)"
    return row.get("relaunch", "start")  # dead, failed; new, lost, not started: start


def totals(rows: list[dict]) -> tuple[dict, dict]:
    """Runs per state, and per arm row (its name, `named`) and horizon the runs per state."""
    by_state: dict[str, int] = {}
    by_arm: dict[str, dict[str, int]] = {}
    for row in rows:
        by_state[row["state"]] = by_state.get(row["state"], 0) + 1
        arm = by_arm.setdefault(f"{row.get('row', row.get('arm'))} h{row.get('horizon')}", {})
        arm[row["state"]] = arm.get(row["state"], 0) + 1
    return by_state, by_arm


# ---------------------------------------------------------------------------------------------


def _inside(path, root) -> bool:
    path, root = place(path), place(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _add_squeue(rows: list[dict]) -> None:
    """SLURM's own word on queued jobs (`squeue -r`: one line per array element), when squeue is here;
    when it fails (a client without a controller, a broken configuration) each row says so."""
    queued = [r for r in rows if r.get("slurm_job")]
    if not queued:
        return
    if not shutil.which("squeue"):
        for r in queued:
            r["detail"] += " (squeue is not on this machine)"
        return
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T|%R"], capture_output=True, text=True,
                             errors="replace", timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        why = "no answer in 20s" if isinstance(err, subprocess.TimeoutExpired) else (err.strerror or str(err))
        out = subprocess.CompletedProcess([], 1, "", why)
    if out.returncode != 0:
        said = (out.stderr.strip() or out.stdout.strip()).splitlines()
        first = said[0].strip()[:200] if said else f"exit status {out.returncode}"
        for r in queued:
            r["detail"] += f" (squeue failed: {first})"
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
        else:
            r.update(state="lost", detail=r["detail"] + " is no longer in the queue and made no run folder "
                     "(see its submitit log); relaunch the sweep to run it")


def _accuracy_line(info: dict, source: Path, problems: Problems) -> str:
    """`toy_heldout 13.0 -> 18.5`: base -> trained (or the read-out's) accuracy on the first benchmark; a
    value that is not a number is `?`, and named."""
    accuracy = info.get("accuracy")
    if not isinstance(accuracy, dict):
        return ""  # absent, or named by check_fields
    key = "trained" if accuracy.get("trained") else "eval"
    trained = accuracy.get(key)
    if not trained:
        return ""
    if not isinstance(trained, dict):
        problems.wrong(source, f"accuracy.{key}", wrong_type(trained, "object"))
        return ""
    base = accuracy.get("base") or {}
    if not isinstance(base, dict):
        problems.wrong(source, "accuracy.base", wrong_type(base, "object"))
        base = {}
    bench = next(iter(trained))

    def pct(value, field: str) -> str:
        why = wrong_type(value, "number")
        if why:
            problems.wrong(source, field, why)
            return "?"
        return f"{100 * value:.1f}"

    now = pct(trained[bench], f"accuracy.{key}.{bench}")
    if base.get(bench) is None:
        return f"{bench} {now}"
    return f"{bench} {pct(base[bench], f'accuracy.base.{bench}')} -> {now}"


def _progress_line(p: dict) -> str:
    """The progress file's fields (checked: a wrong one is None, and left out of the line)."""
    count = lambda v: "?" if v is None else f"{v:g}" if isinstance(v, float) else str(v)  # noqa: E731
    parts = [f"{p['phase'] or '?'} {count(p['done'])}/{count(p['total'])} {p['unit'] or ''}".rstrip()
             if p["total"] is not None else str(p["phase"] or "?")]  # before its first step or item: "starting"
    if p["last_seconds"] is not None:
        parts.append(f"last {p['last_seconds']:.2f}s")
    if p["tokens_per_s"]:
        parts.append(f"{p['tokens_per_s']:,.0f} tok/s")
    if p["eta_s"] is not None:
        parts.append(f"ETA {_duration(p['eta_s'])}")
    if p.get("entropy") is not None:  # the last update's health signals (docs/health.md)
        parts.append(f"entropy {p['entropy']:.3f}")
    if p.get("kl_ref") is not None:
        parts.append(f"KL {p['kl_ref']:.2g}")
    if p.get("clip_low") is not None and p.get("clip_high") is not None:
        parts.append(f"clipped {100 * p['clip_low']:.1f}% low / {100 * p['clip_high']:.1f}% high")
    parts.append(f"pid {p['pid']} on {p['host']}")
    if p["updated_at"]:
        parts.append(f"updated {_duration(time.time() - p['updated_at'])} ago")
    return ", ".join(parts)


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(min(seconds, 1e9))))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _since(started) -> str:
    if not started:
        return ""
    try:
        return f" since {time.strftime('%H:%M:%S', time.localtime(started))}"
    except (OverflowError, OSError, ValueError):  # a time past what the C library holds
        return ""


def _graded_benchmarks(run_dir: Path) -> int:
    import pyarrow.parquet as pq

    try:
        return len(set(pq.read_table(run_dir / "grades.parquet", columns=["benchmark"]).column(0).to_pylist()))
    except Exception:  # noqa: BLE001  (a damaged table: the run starts over, as `run.folder.graded_so_far` decides)
        return 0


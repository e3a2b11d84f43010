"""What a sweep launched: one JSON record per launch, under `<run.out_root>/.sweeps/`, for `status`.

A run folder exists only once its job starts; until then `status` finds the job here. The preflight
writes the record as soon as it has located the sweep's first job, marked `"state": "checking"`, adds
every job as it is located (each one's overrides, arm, seed, horizon, `run_hash` and run folder), and marks
it `"launched"` once every job passed its check; a preflight that refuses the sweep (or is interrupted)
removes it. So a sweep is visible from the start of a long preflight. The SLURM launchers add each job's
SLURM id (`123_4`: array 123, index 4) once submitit has submitted the array.

A job's `run_dir` is stored relative to the root the record lives under (`smoke/ra_flat/h512_s42_<hash>`),
so a moved or copied root reads the same; records written before this held absolute paths, which are read
relative to the `out_root` they name. The launching process's pid, host and start (`pid_start`: the boot's
id and the start in clock ticks since boot, from `/proc`) are kept: a basic-launcher sweep's job is still
queued only while that very process runs, not merely some process that was given its pid since.

Every record is untrusted input (CONVENTIONS #21): `read_records` checks each field it uses, keeps what
it can and names each problem in one line (`Problems`: file, field, what was wrong); a record it cannot
read at all is named too. Records are JSON (read with `json`), never pickles.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from pathlib import Path

from rlvr_sweep.io import atomic_write_json

SWEEPS = ".sweeps"
LAUNCH_ENV = "RLVR_SWEEP_LAUNCH"  # the launch's record name (`<stamp>`), inherited by its jobs' processes
CHECKING, LAUNCHED = "checking", "launched"
_written: list[Path] = []  # this process's records, which its launcher completes


# --- what a reader found wrong ----------------------------------------------------------------

class Problems:
    """What `status` could not read (files, folders) and the fields it found missing or of the wrong type,
    one line each (`<file>: <field>: <what was wrong>`), in the order met; the rows are shown as far as they
    could be read."""

    def __init__(self):
        self.lines: list[str] = []
        self.unread: dict[str, int] = {}  # "file" / "folder" -> how many could not be read
        self.in_part: set[str] = set()  # files read with a wrong field

    def not_read(self, path, why: str, kind: str = "file") -> None:
        self.lines.append(f"{path}: not read: {why}")
        self.unread[kind] = self.unread.get(kind, 0) + 1

    def wrong(self, path, field: str, what: str) -> None:
        self.lines.append(f"{path}: {field}: {what}")
        self.in_part.add(str(path))

    def summary(self) -> str:
        """`not read: 1 file, 1 folder; read in part: 2 files` (empty when all was read)."""
        plural = lambda n, word: f"{n} {word}{'' if n == 1 else 's'}"  # noqa: E731
        parts = []
        if self.unread:
            parts.append("not read: " + ", ".join(plural(n, kind) for kind, n in sorted(self.unread.items())))
        if self.in_part:
            parts.append(f"read in part: {plural(len(self.in_part), 'file')} (a field missing or of the wrong "
                         "type; shown as far as it could be)")
        return "; ".join(parts)


KINDS = {"int": "a whole number", "number": "a number", "str": "a string", "label": "a string or a number",
         "id": "a job id (a string or a number)", "object": "an object", "list": "a list"}


def wrong_type(value, kind: str) -> str | None:
    """Why `value`, read from a JSON file, is not of `kind` (a key of KINDS), or None when it is. A bool is no
    number and neither is NaN or infinity (JSON lets them through; arithmetic on them fails later)."""
    try:
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    except OverflowError:  # an integer past what a float holds
        number = False
    ok = {"int": number and isinstance(value, int), "number": number, "str": isinstance(value, str),
          "label": isinstance(value, str) or number, "id": (isinstance(value, str) and value.strip() != "") or number,
          "object": isinstance(value, dict), "list": isinstance(value, list)}[kind]
    return None if ok else f"{shown(value)} is not {KINDS[kind]}"


def shown(value) -> str:
    """A value as it stands in its JSON file, cut to 60 characters."""
    try:
        text = json.dumps(value, default=str)
    except (ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_fields(info: dict, spec: dict[str, str], source, problems: Problems, prefix: str = "",
                 required: tuple[str, ...] = ()) -> dict:
    """`info`'s fields of `spec` ({field: kind}) whose value is of its kind, the others None; each wrong
    field (or missing `required` one) is named in `problems` as `source: <prefix><field>: what was wrong`."""
    good = {}
    for key, kind in spec.items():
        value = info.get(key)
        why = "missing" if value is None and key in required else (None if value is None else wrong_type(value, kind))
        if why:
            problems.wrong(source, prefix + key, why)
        good[key] = None if why or value is None else value
    return good


def read_json(path: Path, problems: Problems, missing_ok: bool = False):
    """The JSON object in `path`, or None when it could not be read (named in `problems`, unless it is
    absent and `missing_ok`): not there, not UTF-8, not JSON, not an object."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
        value = json.loads(text)
    except FileNotFoundError:
        if not missing_ok:
            problems.not_read(path, "no such file (moved or removed by a writer while it was read, or a broken link)")
        return None
    except OSError as err:
        problems.not_read(path, str(err.strerror or err))
        return None
    except UnicodeDecodeError as err:
        problems.not_read(path, f"not UTF-8 (byte {err.object[err.start]:#04x} at offset {err.start})")
        return None
    except (ValueError, RecursionError) as err:
        problems.not_read(path, f"not JSON ({str(err).splitlines()[0] if str(err) else type(err).__name__})")
        return None
    if not isinstance(value, dict):
        problems.not_read(path, f"not a JSON object (a {type(value).__name__})")
        return None
    return value


# --- writing ---------------------------------------------------------------------------------

class Launch:
    """This process's records while its preflight locates and checks the jobs: one per run root the jobs
    write under, written when a root's first job is located, rewritten at most once a second while more
    are and once all are (still `checking`), and marked `launched` by `finish`."""

    def __init__(self, command: list[str]):
        self.head = {"created_at": time.time(), "pid": os.getpid(), "host": socket.gethostname(),
                     "pid_start": process_start(os.getpid()), "command": command, "state": CHECKING}
        self.stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        self.jobs: dict[Path, list[dict]] = {}
        self.n_jobs, self.last = 0, 0.0
        self.made: list[Path] = []  # folders the records needed, removed again if the sweep is refused

    def add(self, job: dict, n_jobs: int) -> None:
        """One located job (`preflight.job_record`, with absolute `out_root` and `run_dir`)."""
        root = Path(job["out_root"])
        first = root not in self.jobs
        self.jobs.setdefault(root, []).append(stored_job(job, root))
        self.n_jobs = n_jobs
        last = sum(map(len, self.jobs.values())) == n_jobs  # every job located: whole before any is checked
        if first or last or time.monotonic() - self.last >= 1.0:
            self.write()

    def write(self, state: str = CHECKING) -> list[Path]:
        paths = []
        for root, jobs in self.jobs.items():
            path = root / SWEEPS / f"{self.stamp}.json"
            missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
            path.parent.mkdir(parents=True, exist_ok=True)
            self.made += reversed(missing)
            atomic_write_json(path, {**self.head, "state": state, "n_jobs": self.n_jobs, "jobs": jobs})
            paths.append(path)
        self.last = time.monotonic()
        _written[:] = paths
        return paths

    def finish(self) -> list[Path]:
        """Every job passed: the records say so (`launched`), and the jobs' processes can find them
        (`LAUNCH_ENV`: each job checks it runs what was planned, `sweep.planned`)."""
        os.environ[LAUNCH_ENV] = self.stamp
        return self.write(LAUNCHED)

    def forget(self) -> None:
        """The sweep was not launched: its records go, and the folders made for them (a refused sweep
        writes nothing)."""
        for path in _written:
            path.unlink(missing_ok=True)
        _written.clear()
        for folder in reversed(self.made):
            try:
                folder.rmdir()
            except OSError:  # no longer empty: something else writes there now
                pass


def stored_job(job: dict, root: Path) -> dict:
    """A job as its record keeps it: the run folder relative to the record's root, no absolute path."""
    stored = {k: v for k, v in job.items() if k != "out_root"}
    try:
        stored["run_dir"] = Path(job["run_dir"]).relative_to(root).as_posix()
    except ValueError:  # a run folder outside its out_root (not made by `run_dir_for`): kept as it is
        pass
    return stored


def write_records(jobs: list[dict], command: list[str]) -> list[Path]:
    """The records of a launch whose jobs are all located and checked (`jobs`: {overrides, out_root,
    run_dir, arm, ...}); their paths."""
    launch = Launch(command)
    for job in jobs:
        launch.add(job, len(jobs))
    return launch.finish()


def add_job_ids(ids_by_overrides: dict[tuple[str, ...], str], scheduler: str) -> None:
    """Note each submitted job's id (SLURM's `123_4`, or the local executor's) and the scheduler
    (`slurm`, `local`) in this process's records; jobs are matched by their overrides."""
    for path in _written:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for job in record.get("jobs", []) if isinstance(record, dict) else []:
            job_id = isinstance(job, dict) and ids_by_overrides.get(tuple(job.get("overrides") or ()))
            if job_id:
                job.update(job=str(job_id), scheduler=scheduler)
        atomic_write_json(path, record)


# --- reading ---------------------------------------------------------------------------------

RECORD_FIELDS = {"created_at": "number", "pid": "int", "host": "str", "state": "str", "n_jobs": "int",
                 "pid_start": "list"}
JOB_FIELDS = {"number": "int", "arm": "str", "paper_arm": "label", "seed": "int", "horizon": "int", "profile": "str",
              "run_hash": "str", "job": "id", "scheduler": "str", "out_root": "str"}
JOB_REQUIRED = ("number", "arm", "seed", "horizon", "profile")  # what every record has held


def read_records(root: Path, problems: Problems, parent: bool = True) -> list[dict]:
    """Every record under `root/.sweeps` (and, with `parent`, a profile folder's parent's), oldest first:
    {path, created_at, pid, host, state, n_jobs, pid_start, jobs}, each job with `where`, the run folder
    it locates relative to the record's root, and its checked fields. A wrong field is kept out (named in
    `problems`); a job that names no run folder is left out, and named."""
    found = []
    folders = [Path(root) / SWEEPS] + ([Path(root).parent / SWEEPS] if parent else [])
    for folder in dict.fromkeys(p.resolve() for p in folders):
        try:
            paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
        except OSError as err:
            problems.not_read(folder, f"cannot be read ({err.strerror or err})", kind="folder")
            continue
        for path in paths:
            record = read_json(path, problems)
            if record is not None:
                found.append(_checked_record(path, record, problems))
    return sorted(found, key=lambda r: r["order"])


def latest_jobs(records: list[dict]) -> list[dict]:
    """Each recorded run folder's latest job (`records` oldest first), with its record's head (`record`)."""
    latest = {}
    for record in records:
        head = {k: v for k, v in record.items() if k != "jobs"}
        for job in record["jobs"]:
            latest[place(job["where"])] = {**job, "record": head}
    return list(latest.values())


def place(path) -> str:
    """A folder's place, whatever path led to it (symlinks resolved): records and folders meet here."""
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError):  # a symlink loop
        return str(Path(path).absolute())


def _checked_record(path: Path, record: dict, problems: Problems) -> dict:
    head = check_fields(record, RECORD_FIELDS, path, problems, required=("created_at", "pid", "host"))
    order = head["created_at"]
    if order is None:  # the file's time orders it among the others (never to tell its launcher alive)
        try:
            order = path.stat().st_mtime
        except OSError:
            order = 0.0
    if head["pid"] is not None and head["pid"] <= 0:
        problems.wrong(path, "pid", f"{head['pid']} is not a process id")
        head["pid"] = None
    if head["state"] not in (None, CHECKING, LAUNCHED):
        problems.wrong(path, "state", f"{shown(head['state'])} is neither {CHECKING!r} nor {LAUNCHED!r}")
    raw_jobs = record.get("jobs")
    if not isinstance(raw_jobs, list):
        problems.wrong(path, "jobs", "missing; no job of this launch is shown" if raw_jobs is None
                       else f"{wrong_type(raw_jobs, 'list')}; no job of this launch is shown")
        raw_jobs = []
    jobs = []
    for i, job in enumerate(raw_jobs):
        if not isinstance(job, dict):
            problems.wrong(path, f"jobs[{i}]", f"{wrong_type(job, 'object')}; left out")
            continue
        start = len(problems.lines)
        fields = check_fields(job, JOB_FIELDS, path, problems, prefix=f"jobs[{i}].", required=JOB_REQUIRED)
        where = _located(path, job, fields, problems, i)
        if where is None:
            continue
        if job.get("scheduler") == "slurm" and "job" not in job:
            problems.wrong(path, f"jobs[{i}].job", "missing for a SLURM job (squeue cannot be asked about it)")
        jobs.append({**{k: job.get(k) for k in ("arm", "paper_arm", "seed", "horizon", "profile")},  # shown as read
                     **{k: fields[k] for k in ("number", "run_hash", "scheduler")},
                     "job": None if fields["job"] is None else str(fields["job"]), "where": where,
                     **({"overrides": job["overrides"]} if _strings(job.get("overrides")) else {}),  # names its row
                     **({"problems": problems.lines[start:]} if len(problems.lines) > start else {})})
    n_jobs = head["n_jobs"] if head["n_jobs"] is not None else len(raw_jobs)
    return {**head, "state": head["state"] if head["state"] == CHECKING else LAUNCHED, "n_jobs": n_jobs,
            "path": str(path), "order": order, "jobs": jobs}


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _located(path: Path, job: dict, fields: dict, problems: Problems, i: int) -> Path | None:
    """The run folder a recorded job writes, under the root the record now lives in (`.sweeps`' parent):
    its relative `run_dir`, or an absolute one (records written before) relative to its `out_root`."""
    run_dir, home = job.get("run_dir"), path.parent.parent
    why = "missing" if run_dir is None else wrong_type(run_dir, "str")
    if why is None and not run_dir.strip():
        why = "empty"
    if why:
        problems.wrong(path, f"jobs[{i}].run_dir", f"{why}; the job is left out (it names no run folder)")
        return None
    if not Path(run_dir).is_absolute():
        return home / run_dir
    if fields["out_root"] is not None:
        try:
            return home / Path(run_dir).relative_to(fields["out_root"])
        except ValueError:
            pass
    return Path(run_dir)  # outside the root it names: looked for where it was


# --- the launching process -------------------------------------------------------------------

def process_start(pid: int) -> list | None:
    """[boot id, start in clock ticks since boot] of the live process `pid`, from /proc; None when there is
    no such process (or no /proc). A pid given to another process since has another start."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except (OSError, ValueError):
        return None
    try:
        fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
        return [boot, int(fields[19])]  # field 22 of proc(5): starttime
    except (ValueError, IndexError):
        return None


def _started_at(ticks: int) -> float | None:
    """A start in clock ticks since boot as seconds since the epoch (`btime` of /proc/stat: whole seconds,
    so at most one second early)."""
    try:
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime "))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def launcher(record: dict) -> str:
    """Whether the process that wrote a record still runs: `alive` (that very process: its start matches
    the recorded one, or for a record without it, it started before the record was written), `reused` (a
    later process has its pid), `ended`, `elsewhere` (another host: it cannot be asked) or `unknown` (the
    record's pid or host, or when it was written, is not readable)."""
    pid, host, recorded = record.get("pid"), record.get("host"), record.get("pid_start")
    recorded = recorded if isinstance(recorded, list) and len(recorded) == 2 else None
    if pid is None or host is None or (recorded is None and record.get("created_at") is None):
        return "unknown"
    if host != socket.gethostname():
        return "elsewhere"
    if not Path("/proc/self/stat").exists():  # no /proc (macOS): the pid alone, as best it can be told
        try:
            os.kill(pid, 0)
        except (OSError, OverflowError):
            return "ended"
        return "alive"
    now = process_start(pid)
    if now is None:
        return "ended"
    if recorded is not None:
        return "alive" if list(recorded) == now else "reused"
    started = _started_at(now[1])
    return "alive" if started is not None and started <= record["created_at"] else "reused"

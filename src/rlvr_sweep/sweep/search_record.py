"""What a search did, kept per search launch under the runs' root (docs/search.md).

Each launch of a search gets a record folder of its own, `<run.out_root>/.searches/<search>/`: the first
free name among `<date>_<time>` (Hydra's sweep folder, its date folder and its own name joined), then
`<date>_<time>-2`, `-3`, ... so a second search launched into a used sweep folder (or one whose last two
path parts match another's) never joins or overwrites an earlier record. In it: `search.json` (the line,
the objective, the sweeper, the swept keys and how many trials were asked for; written as the search
starts), one `trial_<n>.json` per trial (written as it starts, `started`, and again as it ends, `ok` or
`failed`), and `summary.json` at the end (the best trial).

While a search runs, its process holds two locks (`store.lock.take_lock`, dropped by the kernel when the
process dies): `running.lock` in its record, which tells `status` a search still running from one cut off
(no `summary.json` and no holder), and `.search.lock` in its sweep folder, which refuses a second search
into that folder while the first runs. The sweep folder's `.search_record` names the launch's record for
its trials (the job processes).

Every file and field is checked as it is read (CONVENTIONS #21): what cannot be read is a line of
`status`'s problems, never an exception.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from rlvr_sweep.io import atomic_write_json
from rlvr_sweep.store.lock import held_by, take_lock
from rlvr_sweep.sweep.records import Problems
from rlvr_sweep.sweep.search_noise import compared, noise_line

SEARCHES = ".searches"
RECORD_POINTER = ".search_record"  # in the sweep folder: the name of its running search's record
SWEEP_LOCK = ".search.lock"  # in the sweep folder: held by the process of the search launched into it
RUNNING = "running.lock"  # in the record folder: held while the search runs
STATES = ("ok", "failed", "started")  # a trial's status: `started` until it ends


class SearchBusyError(RuntimeError):
    """Another search runs into the same sweep folder; the message names its process."""


def search_id(sweep_dir) -> str:
    """The first name of a search's record: Hydra's sweep folder, its date folder and its own name joined
    (`2026-12-03_10-22-01`)."""
    path = Path(sweep_dir)
    return f"{path.parent.name}_{path.name}" if path.parent.name else path.name


class StartedSearch:
    """A search launch's record folder, with the locks its process holds until `close`."""

    def __init__(self, folder: Path, fds: list[int]):
        self.folder, self._fds = folder, fds

    def close(self) -> None:
        while self._fds:
            os.close(self._fds.pop())


def start_search(out_root, sweep_dir, start: dict) -> StartedSearch:
    """Claim the sweep folder (SearchBusyError while another search runs into it), make this launch's own
    record folder and write its `search.json` (`start`: line, objective, direction, sweeper, swept, asked)
    and the sweep folder's pointer to it."""
    sweep_dir = Path(sweep_dir)
    sweep_fd = take_lock(sweep_dir / SWEEP_LOCK)
    if sweep_fd is None:
        who = held_by(sweep_dir / SWEEP_LOCK) or {}
        raise SearchBusyError(f"hydra.sweep.dir={sweep_dir}: another search runs into this folder (pid "
                              f"{who.get('pid', '?')} on host {who.get('host', '?')}); give this one its own "
                              "hydra.sweep.dir, or wait for it")
    try:
        home = Path(out_root) / SEARCHES
        home.mkdir(parents=True, exist_ok=True)
        first, n = search_id(sweep_dir), 1
        while True:
            folder = home / (first if n == 1 else f"{first}-{n}")
            try:
                folder.mkdir()
                break
            except FileExistsError:
                n += 1
        running = take_lock(folder / RUNNING)
        atomic_write_json(folder / "search.json", {**start, "sweep_dir": str(sweep_dir.resolve()),
                                                   "started": time.time()})
        atomic_write_json(sweep_dir / RECORD_POINTER, {"record": str(folder.resolve())})
    except BaseException:
        os.close(sweep_fd)
        raise
    return StartedSearch(folder, [sweep_fd, running])


def record_of(sweep_dir) -> Path:
    """A trial's record folder: the one its sweep folder's pointer names (ValueError when it names none)."""
    pointer = Path(sweep_dir) / RECORD_POINTER
    try:
        record = json.loads(pointer.read_text()).get("record")
    except (OSError, ValueError, AttributeError) as err:
        raise ValueError(f"{pointer}: the search's record pointer cannot be read ({err})") from None
    folder = Path(str(record))
    if not folder.is_absolute() or folder.parent.name != SEARCHES or not (folder / "search.json").is_file():
        raise ValueError(f"{pointer}: {record!r} is not a search record folder")
    return folder


def write_trial(folder: Path, number: int, record: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(folder / f"trial_{number}.json", {"number": number, **record})


def search_state(folder: Path) -> str:
    """`ended` (its summary written), `running` (its process holds `running.lock`) or `cut off` (neither: its
    process ended before the search did)."""
    if (folder / "summary.json").is_file():
        return "ended"
    return "running" if held_by(folder / RUNNING) is not None else "cut off"


# ---------------------------------------------------------------- reading (untrusted, CONVENTIONS #21)
def read_search(folder: Path, problems: Problems | None = None) -> tuple[dict, list[dict], Problems]:
    """(search.json, the trials in number order, problems): each file and field checked as it is read; a
    file or field that cannot be read is a line of `problems` (`sweep.records.Problems`), never an exception."""
    problems = Problems() if problems is None else problems
    meta = _read_json(folder / "search.json", problems) or {}
    trials = []
    for path in sorted(folder.glob("trial_*.json")):
        trial = _read_json(path, problems)
        if trial is None:
            continue
        number, status = trial.get("number"), trial.get("status")
        value = trial.get("value")
        if isinstance(number, bool) or not isinstance(number, int):
            problems.wrong(path, "number", f"{number!r} is not a trial number")
            continue
        if status not in STATES:
            problems.wrong(path, "status", f"{status!r} is none of {', '.join(map(repr, STATES))}")
            continue
        if status == "ok" and (isinstance(value, bool) or not isinstance(value, (int, float))
                               or not math.isfinite(value)):
            problems.wrong(path, "value", f"{value!r} is not a number")
            continue
        overrides = trial.get("overrides")
        trials.append({"number": number, "status": status, "value": value if status == "ok" else None,
                       "overrides": [str(o) for o in overrides] if isinstance(overrides, list) else [],
                       "error": str(trial.get("error", "")) if status == "failed" else "",
                       "runs": trial.get("runs") if isinstance(trial.get("runs"), list) else []})
    trials.sort(key=lambda t: t["number"])
    return meta, trials, problems


def _read_json(path: Path, problems: Problems) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        problems.not_read(path, f"{type(err).__name__}: {err}")
        return None
    except RecursionError:  # a crafted record nested deeper than the parser goes
        problems.not_read(path, "nested too deep to read (a crafted or damaged record)")
        return None
    if not isinstance(data, dict):
        problems.not_read(path, "not a JSON object")
        return None
    return data


def asked_of(meta: dict) -> int | None:
    """How many trials the search asked for, as its search.json says (None when unknown)."""
    asked = meta.get("asked")
    return asked if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else None


def best_trial(trials: list[dict], direction: str) -> dict | None:
    done = [t for t in trials if t["status"] == "ok"]
    if not done:
        return None
    pick = max if direction != "minimize" else min
    return pick(done, key=lambda t: (t["value"], -t["number"]) if pick is max else (t["value"], t["number"]))


def counts(trials: list[dict]) -> str:
    """`3 trial(s), 2 done, 1 failed` (and `, 1 unfinished` where a trial started and never ended)."""
    by = {s: sum(t["status"] == s for t in trials) for s in STATES}
    unfinished = f", {by['started']} unfinished" if by["started"] else ""
    return f"{len(trials)} trial(s), {by['ok']} done, {by['failed']} failed{unfinished}"


def summary_lines(meta: dict, trials: list[dict], root=None) -> list[str]:
    """The end-of-search summary: one line per trial (its value or why it failed, with the settings that
    tell it apart: `differing`), the best trial and, with the runs' `root`, whether it is within noise of the
    others (`search_noise`)."""
    objective, direction = meta.get("objective", "?"), meta.get("direction", "maximize")
    shown = differing(meta)
    lines = [f"Search summary: {counts(trials)}; objective {objective} ({direction})"]
    for t in trials:
        value = {"ok": lambda: f"{t['value']:.4f}", "failed": lambda: f"failed: {t['error']}",
                 "started": lambda: "did not finish"}[t["status"]]()
        lines.append(f"  trial {t['number']}: {shown(t)}: {value}")
    best = best_trial(trials, direction)
    lines.append(f"best: trial {best['number']}, {objective} = {best['value']:.4f} ({shown(best)})" if best
                 else "best: none (no trial completed)")
    noise = compared(Path(root), trials, best, str(objective)) if best and root is not None else None
    return lines + ([noise_line(noise)] if noise else [])


def swept_keys(meta: dict) -> set[str]:
    """The keys the search varies (`train.lr` of `train.lr=interval(...)`), as search.json names them."""
    swept = meta.get("swept")
    return {str(k).lstrip("+~") for k in swept} if isinstance(swept, list) else set()


def differing(meta: dict):
    """A trial's overrides of the swept keys only (what differs between trials)."""
    keys = swept_keys(meta)

    def shown(trial: dict) -> str:
        own = [o for o in trial["overrides"] if o.split("=", 1)[0].lstrip("+~") in keys]
        return " ".join(own or trial["overrides"])

    return shown


def searches(root, problems) -> list[dict]:
    """Each search recorded under `root/.searches` (for `status`): its objective, its trials' counts, its
    state (`search_state`) and its best trial; what could not be read goes to `problems`."""
    home = Path(root) / SEARCHES
    found = []
    for folder in sorted(p for p in home.iterdir() if p.is_dir()) if home.is_dir() else []:
        meta, trials, _ = read_search(folder, problems)
        direction = meta.get("direction") if meta.get("direction") in ("maximize", "minimize") else "maximize"
        best = best_trial(trials, direction)
        noise = compared(Path(root), trials, best, str(meta.get("objective", ""))) if best else None
        found.append({"tied": len(noise["tied"]) if noise else None,"search": folder.name, "objective": str(meta.get("objective", "?")), "direction": direction,
                      "counts": counts(trials), "trials": len(trials), "state": search_state(folder),
                      "asked": asked_of(meta), "best": differing(meta)(best) if best else None,
                      "best_value": best["value"] if best else None})
    return found


def state_words(found: dict) -> str:
    """`running`, or `cut off after 2 of 5 trials asked for` (nothing for a search that ended)."""
    of = f" of {found['asked']}" if found["asked"] else ""
    if found["state"] == "running":
        return f"; running ({found['trials']}{of} trial(s) so far)"
    if found["state"] == "cut off":
        return (f"; cut off after {found['trials']}{of} trial(s){' asked for' if of else ''} (its process "
                "ended before the search did; relaunch the line to go on: finished runs are read, not rerun)")
    return ""


def search_lines(found: list[dict]) -> list[str]:
    """`status`'s lines for the searches `searches` found."""
    lines = []
    for s in found:
        best = (f"best {s['objective']} = {s['best_value']:.4f} ({s['best']})" if s["best"] is not None
                else "no trial completed")
        if s.get("tied"):
            best += f", within noise of {s['tied']} other trial(s)"
        lines.append(f"  {s['search']}: {s['counts']}; {s['direction']}; {best}{state_words(s)}")
    return [f"{len(found)} search{'' if len(found) == 1 else 'es'} (.searches):", *lines] if found else []

"""Hyperparameter search under Hydra's search sweepers (`hydra/sweeper=optuna`; docs/search.md).

A search sweeper (any sweeper but the grid's `checked` / basic one) launches trials one batch at a time and
needs each trial's value as a float. A trial is a job like a grid's: its config built and its run planned
(`run.plan`) before anything runs, its run identity-hashed, a finished one skipped. Its value is the
objective (`sweep.objective`, `objective_of`) read from its run's record, averaged over
`sweep.objective_seeds` when given (each seed its own run). A trial that is refused or whose run fails
returns a failure marker that no sweeper can take for a number (`failed_trial`): Optuna records the trial
as failed and the search goes on.

Tuning on a benchmark the paper reports on (MATH-500, Ext240 and its parts, Pool950) would select on the
test set; such an objective is refused unless `sweep.allow_test_objective=true`. The documented default is
the validation split (`math_val210`, or the toy task's held-out split on the smoke profile).

What a search did is kept under the runs' root, `<run.out_root>/.searches/<search>/`: `search.json` (the
line, the objective, the sweeper; written as the search starts), one `trial_<n>.json` per trial as it ends
(its overrides, value or error, and its runs), and `summary.json` at the end (the best trial). `status` and
the sweep's summary read them; every field is checked as it is read (CONVENTIONS #21).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from rlvr_sweep.config import ConfigError
from rlvr_sweep.io import atomic_write_json
from rlvr_sweep.sweep.records import Problems

SEARCHES = ".searches"
GRID_SWEEPERS = ("hydra_plugins.rlvr_sweep_launchers.sweeper.CheckedSweeper",
                 "hydra._internal.core_plugins.basic_sweeper.BasicSweeper")
# benchmarks the paper reports its results on: never the objective of a search by accident
TEST_BENCHMARKS = {"math500": "MATH-500", "ext240": "Ext240", "gsm8k200": "GSM8K-200 (part of Ext240)",
                   "amc23": "AMC23-40 (part of Ext240)", "pool950": "Pool950"}
VALIDATION_SPLITS = ("math_val210", "toy_heldout")  # the default objective: the first of these read out
ACCURACY_PARTS = ("trained", "base", "eval")  # `<part>.<benchmark>`: run.json `accuracy.<part>.<benchmark>`
FAILED = "trial failed"


def is_search(sweeper_target: str | None) -> bool:
    """Whether a sweeper (its `_target_`) searches, trial by trial, rather than launching a grid."""
    return bool(sweeper_target) and sweeper_target not in GRID_SWEEPERS


def objective_of(cfg) -> str:
    """The dotted key a trial's value is read at (`trained.math_val210`), checked against what the run reads
    out and against the test benchmarks (ConfigError naming the problem)."""
    name = cfg.sweep.objective
    if name is None:
        split = next((b for b in VALIDATION_SPLITS if b in cfg.eval.benchmarks), None)
        if split is None:
            raise ConfigError(f"sweep.objective: not given, and no validation split ({', '.join(VALIDATION_SPLITS)}) "
                              f"is read out (eval.benchmarks={list(cfg.eval.benchmarks)}): name the objective, "
                              "e.g. sweep.objective=trained.<benchmark>")
        name = f"{'eval' if cfg.task == 'evaluate' else 'trained'}.{split}"
    seeds = list(cfg.sweep.objective_seeds or [])
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise ConfigError(f"sweep.objective_seeds={seeds}: seed {twice[0]} given twice (each seed is one run, "
                          "counted once in the trial's mean)")
    parts = name.split(".")
    from rlvr_sweep.data.tasks import declared_test_sets

    declared = declared_test_sets()
    tested = [p for p in parts if p in TEST_BENCHMARKS or p in declared]
    if tested and not cfg.sweep.allow_test_objective:
        what = (f"{TEST_BENCHMARKS[tested[0]]} is a benchmark the paper reports on" if tested[0] in TEST_BENCHMARKS
                else f"{tested[0]} is a test set of task {declared[tested[0]]!r} (its test_sets)")
        raise ConfigError(f"sweep.objective={name}: {what}; tuning on it selects on the test set. Tune on the "
                          "validation split (sweep.objective=trained.math_val210), or say so with "
                          "sweep.allow_test_objective=true")
    if parts[0] in ACCURACY_PARTS:
        if len(parts) != 2:
            raise ConfigError(f"sweep.objective={name}: an accuracy is named <part>.<benchmark>, e.g. "
                              "trained.math_val210")
        part, bench = parts
        if bench not in cfg.eval.benchmarks:
            raise ConfigError(f"sweep.objective={name}: {bench!r} is not read out (eval.benchmarks="
                              f"{list(cfg.eval.benchmarks)})")
        wanted = {"trained": cfg.task == "train" and cfg.eval.after, "base": cfg.task == "train" and cfg.eval.before,
                  "eval": cfg.task == "evaluate"}[part]
        if not wanted:
            raise ConfigError(f"sweep.objective={name}: this run reads out no {part!r} accuracy "
                              f"(task={cfg.task}, eval.before={cfg.eval.before}, eval.after={cfg.eval.after})")
    return name


def value_of(info: dict, objective: str) -> float:
    """The objective's value in a run's record (run.json), ValueError naming what is missing."""
    node = info.get("accuracy", {}) if objective.split(".")[0] in ACCURACY_PARTS else info
    for part in objective.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ValueError(f"the run's record has no {objective} ({info.get('run_dir', 'run.json')})")
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, (int, float)) or not math.isfinite(node):
        raise ValueError(f"{objective} in the run's record is {node!r}, not a number")
    return float(node)


def failed_trial(why: str) -> str:
    """What a failed trial returns: text no sweeper can read as a number, so Optuna records the trial as
    failed (and says why in its warning) and goes on."""
    return f"{FAILED}: {why}"


def search_id(sweep_dir) -> str:
    """A search's name under `.searches`: Hydra's sweep folder, its date folder and its own name joined
    (`2026-12-03_10-22-01_4242`)."""
    path = Path(sweep_dir)
    return f"{path.parent.name}_{path.name}" if path.parent.name else path.name


def search_dir(out_root, sweep_dir) -> Path:
    return Path(out_root) / SEARCHES / search_id(sweep_dir)


def write_start(folder: Path, line: list[str], objective: str, direction: str, sweeper: str, sweep_dir,
                swept: list[str]) -> None:
    """search.json, once, as the search starts (a relaunch into the same folder keeps the first); `swept`:
    the keys the search varies, which tell its trials apart in the summaries."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "search.json").is_file():
        atomic_write_json(folder / "search.json", {
            "line": line, "objective": objective, "direction": direction, "sweeper": sweeper, "swept": swept,
            "sweep_dir": str(Path(sweep_dir).resolve()), "started": time.time()})


def write_trial(folder: Path, number: int, record: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(folder / f"trial_{number}.json", {"number": number, **record})


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
        if status not in ("ok", "failed"):
            problems.wrong(path, "status", f"{status!r} is neither 'ok' nor 'failed'")
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


def best_trial(trials: list[dict], direction: str) -> dict | None:
    done = [t for t in trials if t["status"] == "ok"]
    if not done:
        return None
    pick = max if direction != "minimize" else min
    return pick(done, key=lambda t: (t["value"], -t["number"]) if pick is max else (t["value"], t["number"]))


def summary_lines(meta: dict, trials: list[dict]) -> list[str]:
    """The end-of-search summary: one line per trial (its value or why it failed, with the settings that
    tell it apart: `differing`) and the best trial."""
    objective, direction = meta.get("objective", "?"), meta.get("direction", "maximize")
    shown = differing(meta)
    failed = sum(t["status"] == "failed" for t in trials)
    lines = [f"Search summary: {len(trials)} trial(s), {len(trials) - failed} done, {failed} failed; "
             f"objective {objective} ({direction})"]
    for t in trials:
        value = f"{t['value']:.4f}" if t["status"] == "ok" else f"failed: {t['error']}"
        lines.append(f"  trial {t['number']}: {shown(t)}: {value}")
    best = best_trial(trials, direction)
    lines.append(f"best: trial {best['number']}, {objective} = {best['value']:.4f} ({shown(best)})" if best
                 else "best: none (no trial completed)")
    return lines


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
    """Each search recorded under `root/.searches` (for `status`): its objective, its trials' counts and
    its best trial ({search, objective, direction, trials, done, failed, best, best_value}); what could not
    be read goes to `problems` (`sweep.records.Problems`)."""
    home = Path(root) / SEARCHES
    found = []
    for folder in sorted(p for p in home.iterdir() if p.is_dir()) if home.is_dir() else []:
        meta, trials, _ = read_search(folder, problems)
        direction = meta.get("direction") if meta.get("direction") in ("maximize", "minimize") else "maximize"
        best = best_trial(trials, direction)
        found.append({"search": folder.name, "objective": str(meta.get("objective", "?")), "direction": direction,
                      "trials": len(trials), "done": sum(t["status"] == "ok" for t in trials),
                      "failed": sum(t["status"] == "failed" for t in trials),
                      "best": differing(meta)(best) if best else None,
                      "best_value": best["value"] if best else None})
    return found


def search_lines(found: list[dict]) -> list[str]:
    """`status`'s lines for the searches `searches` found."""
    lines = []
    for s in found:
        best = (f"best {s['objective']} = {s['best_value']:.4f} ({s['best']})" if s["best"] is not None
                else "no trial completed")
        lines.append(f"  {s['search']}: {s['trials']} trial(s), {s['done']} done, {s['failed']} failed; "
                     f"{s['direction']}; {best}")
    return [f"{len(found)} search{'' if len(found) == 1 else 'es'} (.searches):", *lines] if found else []

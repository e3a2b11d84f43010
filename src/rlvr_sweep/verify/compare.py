"""Compare the two graders, and the run-folder reading `verify` shares with them.

Implements `python -m rlvr_sweep.verify compare` and `compare-run` (see `rlvr_sweep.verify.cli` for
the command line; the public names are also importable from `rlvr_sweep.verify`):
- `compare` / `compare_golds`: for each gold answer, the four checks of `GOLD_CHECKS`, i.e. each
  grader on gold vs itself, and each grader on gold vs the *other* verifier's normal form of it.
- `compare_run` / `compare_run_dir`: both graders on the same re-extracted stored eval responses.
Both need math-verify (`pip install math-verify`); `BadInput` marks input the CLI exits 2 on.
Run folders and tables (`find_runs`, `_read_run_json`, `_read_table`, `_value`, `_label`) live here
too, so that `regrade` imports this module and not the other way round.
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from rlvr_sweep import data
from rlvr_sweep.reward import graders, grading
from rlvr_sweep.store import DONE_MARKER, RUN_JSON, is_finished, read_table, walk

GRADES_KEY = ("phase", "benchmark", "item_id", "index")
COMPARE_FILES = {"math500": "math500.jsonl", "gsm8k": "gsm8k_test.jsonl", "amc23": "amc23.jsonl",
                 "math_train": "math_train.jsonl"}
# check name -> (grader, what the gold is compared with)
GOLD_CHECKS = {
    "baseline:self": ("baseline", "gold"),
    "math_verify:self": ("math_verify", "gold"),
    "baseline:math_verify_form": ("baseline", "math_verify normal form"),
    "math_verify:baseline_form": ("math_verify", "baseline normal form"),
}
DEFAULT_SHOW = 20


class BadInput(ValueError):
    """The input cannot be checked (missing folder, no runs, unreadable file); CLI exit 2."""


# ---------------------------------------------------------------- run folders and tables
def find_runs(path, finished_only: bool = True) -> list[Path]:
    """Run folders (holding a run.json) at or below `path`, sorted; finished ones by default."""
    root = Path(path)
    if not root.exists():
        raise BadInput(f"no such folder: {root}")
    if not root.is_dir():
        raise BadInput(f"not a folder: {root}")
    runs = walk(root).runs
    if not runs:
        raise BadInput(f"no run folder (one holding {RUN_JSON}) at or below {root}")
    chosen = [r for r in runs if not finished_only or is_finished(r)]
    if not chosen:
        raise BadInput(f"{len(runs)} run folder(s) below {root}, none finished (no {DONE_MARKER} "
                       f"marker); pass --all to check unfinished runs")
    return chosen


def _read_run_json(run_dir: Path) -> dict:
    try:
        info = json.loads((run_dir / RUN_JSON).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadInput(f"cannot read {run_dir / RUN_JSON}: {err}") from None
    if not isinstance(info, dict):
        raise BadInput(f"{run_dir / RUN_JSON}: expected a JSON object")
    return info


def _read_table(run_dir: Path, name: str, columns, read=None) -> pd.DataFrame | None:
    """The table, None if its file is absent; BadInput if unreadable or missing a column. `read`: decode
    only these columns (those the table has) besides `columns` (default: all)."""
    path = run_dir / f"{name}.parquet"
    if not path.is_file():
        return None
    try:
        frame = read_table(run_dir, name, None if read is None else [*columns, *read])
    except Exception as err:  # pyarrow raises its own types (ArrowInvalid, ...)
        raise BadInput(f"cannot read {path}: {type(err).__name__}: {err}") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise BadInput(f"{path}: missing column(s) {missing}")
    return frame


def _value(v):
    """A cell as a plain Python value; pandas/numpy missing values become None."""
    kind = type(v)
    if kind is str or kind is bool or kind is int:  # most cells: no pandas call (millions per sweep)
        return v
    if kind is float:
        return None if v != v else v
    if v is None:
        return None
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):  # array-like cell
        return v
    return v.item() if hasattr(v, "item") else v


def _label(run_dir: Path, root: Path) -> str:
    try:
        rel = run_dir.relative_to(root)
    except ValueError:
        return str(run_dir)
    return str(rel) if str(rel) != "." else str(run_dir)


# ---------------------------------------------------------------- formatting
def _short(v, limit: int = 160) -> str:
    text = repr(v)
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} chars)"


def _fmt_key(key: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in key.items())


# ---------------------------------------------------------------- compare graders on golds
def _check_gold(item: dict) -> dict:
    gold = item["gold"]
    base_form = graders.baseline_normal_form(gold)
    mv_form = graders.math_verify_normal_form(gold)
    results = {
        "baseline:self": grading.grade(gold, gold),
        "math_verify:self": graders.math_verify_grade(gold, gold),
        "baseline:math_verify_form": mv_form is not None and grading.grade(mv_form, gold),
        "math_verify:baseline_form": graders.math_verify_grade(base_form, gold),
    }
    return {"id": item["id"], "gold": gold, "baseline_form": base_form, "math_verify_form": mv_form,
            "failed": [name for name, ok in results.items() if not ok]}


def compare_golds(items, show: int | None = DEFAULT_SHOW, threads: int = 2) -> dict:
    """Run `GOLD_CHECKS` on `items` (dicts with `id` and `gold`).

    Returns {"items", "failures": {check: count}, "disagreeing": count of items with any failed
    check, "listed": the first `show` (None/0 = all) of them}. The two graders have separate
    workers, so `threads=2` overlaps their waits.
    """
    graders.get_grader("math_verify")  # ImportError up front
    items = list(items)
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        checked = list(pool.map(_check_gold, items))
    bad = [c for c in checked if c["failed"]]
    return {"items": len(checked),
            "failures": {name: sum(name in c["failed"] for c in checked) for name in GOLD_CHECKS},
            "disagreeing": len(bad), "listed": bad[:show] if show else bad}


def compare(data_root=None, benchmarks=tuple(COMPARE_FILES), limit: int | None = None,
            show: int | None = DEFAULT_SHOW, echo=None) -> dict:
    """`compare_golds` on each benchmark's gold answers; {benchmark: result}."""
    root = Path(data_root or os.environ.get("RLVR_SWEEP_DATA") or "data")
    unknown = [b for b in benchmarks if b not in COMPARE_FILES]
    if unknown:
        raise BadInput(f"unknown benchmark(s) {unknown}; valid: {list(COMPARE_FILES)}")
    graders.get_grader("math_verify")
    out = {}
    for name in benchmarks:
        try:
            rows = data.read_jsonl(root / COMPARE_FILES[name])
        except data.DataError as err:
            raise BadInput(str(err)) from None
        rows = rows[:limit] if limit is not None else rows
        before = {"baseline": grading.stats(), "math_verify": graders.stats()}
        out[name] = compare_golds([{"id": r["id"], "gold": r["answer"]} for r in rows], show)
        after = {"baseline": grading.stats(), "math_verify": graders.stats()}
        out[name]["timeouts"] = {g: after[g]["timeouts"] - before[g]["timeouts"] for g in after}
        if echo:
            echo(name, out[name])
    return out


def format_compare(name: str, r: dict) -> list[str]:
    lines = [f"== {name}: {r['items']} golds, {r['disagreeing']} with a failed check"]
    for check, count in r["failures"].items():
        grader, against = GOLD_CHECKS[check]
        lines.append(f"   {grader:<12} gold vs {against:<24} {count:>6} disagree")
    if any(r.get("timeouts", {}).values()):
        lines.append(f"   note: grader timeouts (each fails its check): {r['timeouts']}")
    for c in r["listed"]:
        lines.append(f"   {c['id']}: gold={_short(c['gold'], 80)} baseline_form="
                     f"{_short(c['baseline_form'], 80)} math_verify_form="
                     f"{_short(c['math_verify_form'], 80)} failed={','.join(c['failed'])}")
    if r["disagreeing"] > len(r["listed"]):
        lines.append(f"   ... {r['disagreeing'] - len(r['listed'])} more not listed "
                     f"({r['disagreeing']} in total)")
    return lines


def compare_verdict(results: dict) -> tuple[bool, str]:
    """(ok, the verdict line) of `compare`'s results: ok when each grader accepts every gold as equal
    to itself. A gold the other grader's normal form of it does not match is expected (the forms are
    not interchangeable: `Interval(-9, 9)` is not baseline syntax, `x**2` not LaTeX) and counted."""
    golds = sum(r["items"] for r in results.values())
    count = lambda check: sum(r["failures"].get(check, 0) for r in results.values())  # noqa: E731
    selves = count("baseline:self") + count("math_verify:self")
    cross = {"baseline": count("baseline:math_verify_form"), "math_verify": count("math_verify:baseline_form")}
    if selves:
        return False, (f"== verdict: FAILED: a grader rejects {selves} gold(s) as equal to itself "
                       f"(of {golds}; listed above under :self)")
    return True, (f"== verdict: ok: both graders accept each of the {golds} golds as equal to itself; on the other "
                  f"grader's normal form of a gold, baseline differs for {cross['baseline']} and math_verify for "
                  f"{cross['math_verify']} (the two normal forms are not interchangeable, so a run grades with one "
                  "grader throughout: grader.name)")


# ---------------------------------------------------------------- compare graders on a run
def _grade_both(row: dict) -> dict:
    extracted = grading.extract_answer(_value(row["response"]))
    gold = _value(row["gold"])
    return {"baseline": grading.grade(extracted, gold),
            "math_verify": graders.math_verify_grade(extracted, gold), "extracted": extracted}


def compare_run_dir(run_dir, label: str | None = None, show: int | None = DEFAULT_SHOW,
                    threads: int = 2) -> dict:
    """Both graders on one run's stored eval responses (re-extracted with the default fallback)."""
    run_dir = Path(run_dir)
    label = label or str(run_dir)
    _read_run_json(run_dir)
    frame = _read_table(run_dir, "grades", ("response", "gold"))
    if frame is None:
        return {"run": label, "run_dir": str(run_dir), "items": 0, "groups": {}, "disagreeing": 0,
                "counts": {}, "listed": [], "timeouts": {}, "note": "no grades.parquet"}
    rows = frame.to_dict("records")
    before = {"baseline": grading.stats(), "math_verify": graders.stats()}
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        graded = list(pool.map(_grade_both, rows))
    after = {"baseline": grading.stats(), "math_verify": graders.stats()}
    timeouts = {g: after[g]["timeouts"] - before[g]["timeouts"] for g in after}
    groups: dict = {}
    counts = dict.fromkeys(("both_correct", "both_wrong", "baseline_only", "math_verify_only"), 0)
    bad = []
    key_columns = [c for c in GRADES_KEY if c in frame.columns]
    for row, g in zip(rows, graded):
        b, m = g["baseline"], g["math_verify"]
        group = groups.setdefault(f"{_value(row.get('phase'))}/{_value(row.get('benchmark'))}",
                                  {"items": 0, "baseline": 0, "math_verify": 0})
        group["items"] += 1
        group["baseline"] += b
        group["math_verify"] += m
        counts["both_correct" if b and m else "both_wrong" if not (b or m)
               else "baseline_only" if b else "math_verify_only"] += 1
        if b != m:
            bad.append({"run": label, "key": {c: _value(row[c]) for c in key_columns},
                        "extracted": g["extracted"], "gold": _value(row["gold"]),
                        "baseline": b, "math_verify": m})
    return {"run": label, "run_dir": str(run_dir), "items": len(rows), "groups": groups,
            "counts": counts, "disagreeing": len(bad), "listed": bad[:show] if show else bad,
            "timeouts": timeouts,
            "note": (f"grader timeouts (each grades False): {timeouts}"
                     if any(timeouts.values()) else None)}


def compare_run(path, finished_only: bool = True, show: int | None = DEFAULT_SHOW,
                echo=None) -> dict:
    """`compare_run_dir` on every run under `path`; {"runs": [...], "items", "disagreeing"}."""
    graders.get_grader("math_verify")
    root = Path(path)
    results = []
    for run_dir in find_runs(root, finished_only):
        results.append(compare_run_dir(run_dir, _label(run_dir, root), show))
        if echo:
            echo(results[-1])
    return {"path": str(root), "runs": results, "items": sum(r["items"] for r in results),
            "disagreeing": sum(r["disagreeing"] for r in results)}


def format_compare_run(r: dict) -> list[str]:
    lines = [f"== {r['run']}: {r['items']} eval items, graders disagree on {r['disagreeing']}"]
    if r["note"]:
        lines.append(f"   note: {r['note']}")
    for name, g in r["groups"].items():
        lines.append(f"   {name:<32}{g['items']:>6} items  baseline {g['baseline'] / g['items']:.3f}"
                     f"  math_verify {g['math_verify'] / g['items']:.3f}")
    if r["counts"]:
        lines.append("   " + "  ".join(f"{k}={v}" for k, v in r["counts"].items()))
    for d in r["listed"]:
        lines.append(f"   DIFFER [{_fmt_key(d['key'])}] extracted={_short(d['extracted'], 80)} "
                     f"gold={_short(d['gold'], 80)} baseline={d['baseline']} "
                     f"math_verify={d['math_verify']}")
    if r["disagreeing"] > len(r["listed"]):
        lines.append(f"   ... {r['disagreeing'] - len(r['listed'])} more not listed")
    return lines

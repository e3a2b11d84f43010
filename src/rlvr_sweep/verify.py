"""Check stored grades against the verifier, and compare graders.

`python -m rlvr_sweep.verify regrade OUTPUT_DIR [--all]`
    Every run folder under OUTPUT_DIR (one with a `run.json`; finished runs only, i.e. with the
    `DONE` marker, unless --all). grades.parquet: each stored eval response is re-extracted with
    `extract_answer(response)` (default fallback) and re-graded with `grade(extracted, gold)`;
    both are compared with the stored `extracted` and `correct`. rollouts.parquet: with its `gold`
    column, `training_reward(text, gold)` (ungated) is compared with the stored `correct` and
    `training_reward(text, gold, gate_chars)` with run.json's `gate_chars` (the gate actually
    used; null = none) with the stored `reward`. A table without a `gold` column, a missing table,
    rows without a gold and a run.json without `gate_chars` (unfinished run) are reported as not
    checked. One row is one item; it agrees when every recomputed field equals the stored one.
    Grader: by default each run's own, `grader.name` in its config.yaml (`baseline` when absent):
    for `baseline` the calls are exactly the ones above; for another grader `grade` is that grader
    and the rollout reward is the same §5 formula with it (`extract_answer(text, fallback=None)`
    non-empty and graded equal; gated: also `passes_gate`). `--grader NAME` forces one grader.
    Prints per run and in total: items checked, agreements, agreement %, and every disagreement.
    Exit 0: everything checked agrees; 1: any disagreement; 2: bad input (missing folder, no run
    found, unreadable run.json or table, missing column), with a message on stderr.

`python -m rlvr_sweep.verify compare [--data-root DIR] [--benchmarks math500,gsm8k,amc23,math_train]`
    For each gold answer of the benchmark files (DIR defaults to $RLVR_SWEEP_DATA, else `data`):
    the four checks of `GOLD_CHECKS`, i.e. each grader on gold vs itself, and each grader on gold
    vs the *other* verifier's normal form of it (graders.py defines both normal forms: baseline =
    `grading.normalize(gold)`, math_verify = `str()` of Math-Verify's parsed value of `$gold$`).
    A check that returns False is a disagreement; prints the counts per benchmark and check, and
    the first `--show` (20) disagreeing items per benchmark with their total.

`python -m rlvr_sweep.verify compare-run OUTPUT_DIR [--all]`
    Re-extracts every stored eval response (default fallback) and grades the same extracted answer
    with both graders; prints per run and phase/benchmark the accuracy under each, and the items
    where they disagree (first `--show` per run, with the total).

compare/compare-run need math-verify (`pip install math-verify`); without it they exit 2. They
are implemented in `rlvr_sweep.verify_compare` (with the run-folder reading) and re-exported here.
The functions `find_runs`, `regrade_run`, `regrade`, `compare_golds`, `compare`, `compare_run`
return plain dicts for tests and notebooks and raise `BadInput` where the CLI exits 2.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from rlvr_sweep import graders, grading
from rlvr_sweep.results import RUN_JSON, is_finished
from rlvr_sweep.verify_compare import (  # noqa: F401  (re-exported: the public API lives here)
    COMPARE_FILES, DEFAULT_SHOW, GOLD_CHECKS, GRADES_KEY, BadInput, _fmt_key, _label,
    _read_run_json, _read_table, _short, _value, compare, compare_golds, compare_run,
    compare_run_dir, find_runs, format_compare, format_compare_run)

EXIT_OK, EXIT_DISAGREE, EXIT_BAD_INPUT = 0, 1, 2
CONFIG_YAML = "config.yaml"
FROM_RUN = "run"  # regrade with the grader each run was configured with
GRADES_COLUMNS = ("response", "gold", "extracted", "correct")
ROLLOUTS_COLUMNS = ("text", "correct", "reward")
ROLLOUTS_KEY = ("step", "index", "question_id")


# ---------------------------------------------------------------- run.json and cells
def _as_float(v) -> float | None:
    try:
        return None if v is None or isinstance(v, str) else float(v)
    except (TypeError, ValueError):
        return None


def _gate(info: dict, run_dir: Path) -> tuple[bool, int | None]:
    """(known, gate_chars) from run.json."""
    if "gate_chars" not in info:
        return False, None
    gate = info["gate_chars"]
    if gate is None:
        return True, None
    if isinstance(gate, float) and gate.is_integer():
        gate = int(gate)
    if isinstance(gate, bool) or not isinstance(gate, int):
        raise BadInput(f"{run_dir / RUN_JSON}: gate_chars must be an int or null, got {gate!r}")
    return True, gate


# ---------------------------------------------------------------- regrade
def run_grader(run_dir) -> tuple[str, str | None]:
    """(grader name, note) from the run's config.yaml `grader.name`; `baseline` when absent."""
    path = Path(run_dir) / CONFIG_YAML
    if not path.is_file():
        return graders.DEFAULT_GRADER, f"no {CONFIG_YAML}: assumed the {graders.DEFAULT_GRADER} grader"
    try:
        cfg = OmegaConf.to_container(OmegaConf.load(path))
    except Exception as err:  # yaml / omegaconf errors
        raise BadInput(f"cannot read {path}: {type(err).__name__}: {err}") from None
    grader = cfg.get("grader") if isinstance(cfg, dict) else None
    name = grader.get("name") if isinstance(grader, dict) else None
    if name is None:
        return graders.DEFAULT_GRADER, None  # written before graders were configurable
    if name not in graders.GRADERS:
        raise BadInput(f"{path}: unknown grader {name!r}; valid: {sorted(graders.GRADERS)}")
    return name, None


def _reward_fn(grader: str):
    """(text, gold, gate_chars) -> spec §5 reward with `grader`; `training_reward` for the baseline."""
    if grader == "baseline":
        return grading.training_reward
    grade = graders.get_grader(grader)

    def reward(text, gold, gate_chars=None) -> float:
        if not isinstance(text, str) or not grading.passes_gate(text, gate_chars):
            return 0.0
        pred = grading.extract_answer(text, fallback=None)
        return 1.0 if pred and grade(pred, gold) else 0.0

    return reward


def _check_grades(frame: pd.DataFrame, grade=grading.grade) -> tuple[int, int, list[dict]]:
    checked, agree, found = 0, 0, []
    key_columns = [c for c in GRADES_KEY if c in frame.columns]
    for row in frame.to_dict("records"):
        response, gold = _value(row["response"]), _value(row["gold"])
        extracted = grading.extract_answer(response)  # "" for a missing response
        correct = bool(grade(extracted, gold))
        stored_extracted, stored_correct = _value(row["extracted"]), _value(row["correct"])
        diffs = {}
        if stored_extracted != extracted:
            diffs["extracted"] = {"stored": stored_extracted, "recomputed": extracted}
        if stored_correct is None or bool(stored_correct) != correct:
            diffs["correct"] = {"stored": stored_correct, "recomputed": correct}
        checked += 1
        if diffs:
            found.append({"key": {c: _value(row[c]) for c in key_columns}, "diffs": diffs})
        else:
            agree += 1
    return checked, agree, found


def _check_rollouts(frame: pd.DataFrame, gate_known: bool, gate: int | None,
                    reward=grading.training_reward):
    checked, agree, no_gold, found = 0, 0, 0, []
    key_columns = [c for c in ROLLOUTS_KEY if c in frame.columns]
    for row in frame.to_dict("records"):
        text, gold = _value(row["text"]), _value(row["gold"])
        if not isinstance(gold, str):
            no_gold += 1
            continue
        diffs = {}
        ungated = reward(text, gold)
        stored_correct = _value(row["correct"])
        if _as_float(stored_correct) != ungated:
            diffs["correct"] = {"stored": stored_correct, "recomputed": ungated}
        if gate_known:
            gated = ungated if not isinstance(text, str) or grading.passes_gate(text, gate) else 0.0  # no second grade
            stored_reward = _value(row["reward"])
            if _as_float(stored_reward) != gated:
                diffs["reward"] = {"stored": stored_reward, "recomputed": gated}
        checked += 1
        if diffs:
            found.append({"key": {c: _value(row[c]) for c in key_columns}, "diffs": diffs})
        else:
            agree += 1
    return checked, agree, no_gold, found


def _table_result(checked: int, agree: int, note: str | None = None) -> dict:
    return {"checked": checked, "agree": agree, "agreement_pct": _pct(agree, checked), "note": note}


def _pct(part: int, whole: int) -> float | None:
    return 100.0 * part / whole if whole else None


def regrade_run(run_dir, label: str | None = None, grader: str = FROM_RUN) -> dict:
    """Regrade one run folder's grades.parquet and rollouts.parquet (see module docstring).

    `grader`: "run" (the run's configured grader) or a name in `graders.GRADERS`."""
    run_dir = Path(run_dir)
    label = label or str(run_dir)
    info = _read_run_json(run_dir)
    gate_known, gate = _gate(info, run_dir)
    grader_note = None
    if grader == FROM_RUN:
        grader, grader_note = run_grader(run_dir)
    grade, reward = graders.get_grader(grader), _reward_fn(grader)
    grades = _read_table(run_dir, "grades", GRADES_COLUMNS)
    rollouts = _read_table(run_dir, "rollouts", ROLLOUTS_COLUMNS)
    before = grading.stats()
    tables, notes, disagreements = {}, [], []

    def collect(table: str, found: list[dict]) -> None:
        disagreements.extend({"run": label, "run_dir": str(run_dir), "table": table, **d}
                             for d in found)

    if grades is None:
        tables["grades"] = _table_result(0, 0, "no grades.parquet")
    else:
        checked, agree, found = _check_grades(grades, grade)
        tables["grades"] = _table_result(checked, agree)
        collect("grades", found)
    if rollouts is None:
        tables["rollouts"] = _table_result(0, 0, "no rollouts.parquet")
    elif "gold" not in rollouts.columns:
        tables["rollouts"] = _table_result(
            0, 0, f"not checked: rollouts.parquet has no 'gold' column ({len(rollouts)} rows); "
                  "rollouts cannot be regraded without it")
    else:
        checked, agree, no_gold, found = _check_rollouts(rollouts, gate_known, gate, reward)
        parts = []
        if no_gold:
            parts.append(f"{no_gold} row(s) without a gold not checked")
        if not gate_known:
            parts.append(f"{RUN_JSON} has no gate_chars (unfinished run?): reward not checked, "
                         "only correct")
        tables["rollouts"] = _table_result(checked, agree, "; ".join(parts) or None)
        collect("rollouts", found)
    notes = [f"{name}: {t['note']}" for name, t in tables.items() if t["note"]]
    if grader_note:
        notes.append(grader_note)
    grader_events = {k: v - before.get(k, 0) for k, v in grading.stats().items()
                     if v - before.get(k, 0) and k != "worker_starts"}
    if grader_events:
        notes.append(f"grader events during the regrade (a timeout grades False): {grader_events}")
    checked = sum(t["checked"] for t in tables.values())
    agree = sum(t["agree"] for t in tables.values())
    return {"run": label, "run_dir": str(run_dir), "finished": is_finished(run_dir),
            "grader": grader, "gate_chars": gate if gate_known else "unknown", "tables": tables,
            "checked": checked, "agree": agree, "agreement_pct": _pct(agree, checked),
            "disagreements": disagreements, "notes": notes, "grader_events": grader_events}


def _total(path, results: list[dict]) -> dict:
    checked = sum(r["checked"] for r in results)
    agree = sum(r["agree"] for r in results)
    disagreements = [d for r in results for d in r["disagreements"]]
    return {"path": str(path), "runs": results, "checked": checked, "agree": agree,
            "agreement_pct": _pct(agree, checked), "disagreements": disagreements,
            "ok": not disagreements}


def regrade(path, finished_only: bool = True, grader: str = FROM_RUN) -> dict:
    """Regrade every run under `path`. `ok` is True when no disagreement was found."""
    root = Path(path)
    return _total(root, [regrade_run(r, _label(r, root), grader)
                         for r in find_runs(root, finished_only)])


# ---------------------------------------------------------------- printing


# ---------------------------------------------------------------- printing
def _fmt_pct(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2f}%"


def format_disagreement(d: dict) -> str:
    diffs = "; ".join(f"{field} stored={_short(x['stored'])} recomputed={_short(x['recomputed'])}"
                      for field, x in d["diffs"].items())
    return f"DISAGREE {d['run']} {d['table']} [{_fmt_key(d['key'])}]: {diffs}"


def format_run(r: dict) -> list[str]:
    state = "finished" if r["finished"] else "unfinished"
    lines = [f"== {r['run']} ({state}, grader={r['grader']}, gate_chars={r['gate_chars']})"]
    for name, t in r["tables"].items():
        lines.append(f"   {name:<9}{t['checked']:>8} checked {t['agree']:>8} agree "
                     f"{_fmt_pct(t['agreement_pct']):>8}")
    lines += [f"   note: {n}" for n in r["notes"]]
    lines += [f"   {format_disagreement(d)}" for d in r["disagreements"]]
    return lines


def _print(lines) -> None:
    for line in lines:
        print(line, flush=True)


# ---------------------------------------------------------------- command line
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rlvr_sweep.verify", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("regrade", help="recompute stored grades and rewards; exit 1 on disagreement")
    p.add_argument("output_dir", help="one run folder or a sweep root")
    p.add_argument("--all", action="store_true", help="include unfinished runs (no DONE marker)")
    p.add_argument("--grader", default=FROM_RUN, choices=[FROM_RUN, *graders.GRADERS],
                   help="grader to regrade with (default: each run's configured grader.name)")
    p = sub.add_parser("compare", help="baseline vs math_verify on the benchmarks' gold answers")
    p.add_argument("--data-root", default=None,
                   help="folder of the JSONL files (default: $RLVR_SWEEP_DATA, else data)")
    p.add_argument("--benchmarks", default=",".join(COMPARE_FILES),
                   help=f"comma-separated, from {','.join(COMPARE_FILES)}")
    p.add_argument("--limit", type=int, default=None, help="first N golds of each benchmark")
    p.add_argument("--show", type=int, default=DEFAULT_SHOW,
                   help="disagreeing items listed per benchmark (0 = all)")
    p = sub.add_parser("compare-run", help="baseline vs math_verify on runs' stored eval responses")
    p.add_argument("output_dir", help="one run folder or a sweep root")
    p.add_argument("--all", action="store_true", help="include unfinished runs (no DONE marker)")
    p.add_argument("--show", type=int, default=DEFAULT_SHOW,
                   help="disagreeing items listed per run (0 = all)")
    return parser


def _run_regrade(args) -> int:
    root = Path(args.output_dir)
    results = []
    for run_dir in find_runs(root, finished_only=not args.all):
        results.append(regrade_run(run_dir, _label(run_dir, root), args.grader))
        _print(format_run(results[-1]))
    total = _total(root, results)
    n = len(total["disagreements"])
    print(f"== total: {len(results)} run(s), {total['checked']} checked, {total['agree']} agree "
          f"({_fmt_pct(total['agreement_pct'])}), {n} disagreement(s)")
    if not total["checked"]:
        print("   note: nothing was checked (see the notes above)")
    return EXIT_DISAGREE if n else EXIT_OK


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "regrade":
            return _run_regrade(args)
        if args.command == "compare":
            benchmarks = [b.strip() for b in args.benchmarks.split(",") if b.strip()]
            compare(args.data_root, benchmarks, args.limit, args.show,
                    echo=lambda name, r: _print(format_compare(name, r)))
        else:
            out = compare_run(args.output_dir, finished_only=not args.all, show=args.show,
                              echo=lambda r: _print(format_compare_run(r)))
            print(f"== total: {len(out['runs'])} run(s), {out['items']} eval items, graders "
                  f"disagree on {out['disagreeing']}")
        return EXIT_OK
    except (BadInput, ImportError) as err:
        print(f"verify: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `... | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

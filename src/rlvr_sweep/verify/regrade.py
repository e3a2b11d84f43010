"""PASS 1 of `verify`: every stored grade and rollout reward recomputed from the stored text.

`regrade_run` re-extracts each stored eval response and re-grades it, and recomputes each stored
rollout's (gated) reward; `regrade` does it for every run under a root. See `rlvr_sweep.verify.cli`
for the command line and the exact rules.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from rlvr_sweep.reward import graders, grading, sandbox
from rlvr_sweep.reward.overlong import overlong_penalty
from rlvr_sweep.verify import plugin_runs
from rlvr_sweep.verify.step_stats import STEPS_COLUMNS, std_problems
from rlvr_sweep.store import RUN_JSON, is_finished
from rlvr_sweep.verify.compare import (
    GRADES_KEY, BadInput, _fmt_key, _label, _read_run_json, _read_table, _short, _value, find_runs,
)

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


def _overlong(info: dict, run_dir: Path):
    """The run's overlong penalty as `length -> penalty` (DAPO's shaping, `reward.overlong`), or None."""
    buffer = (info.get("lengths") or {}).get("overlong_buffer") if isinstance(info.get("lengths"), dict) else None
    if buffer is None:
        return None
    cap, factor = info.get("horizon_tokens"), info.get("overlong_penalty")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (buffer, cap, factor)):
        raise BadInput(f"{run_dir / RUN_JSON}: lengths.overlong_buffer, horizon_tokens and overlong_penalty must be "
                       f"numbers (got {buffer!r}, {cap!r}, {factor!r})")
    return lambda length: overlong_penalty(length, int(cap), int(buffer), float(factor))


# ---------------------------------------------------------------- regrade
def run_config(run_dir) -> dict | None:
    """The run's config.yaml as a dict (None when absent; BadInput when unreadable)."""
    path = Path(run_dir) / CONFIG_YAML
    if not path.is_file():
        return None
    try:  # the stored config is plain YAML (resolved when the run wrote it): no OmegaConf needed to read it
        cfg = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise BadInput(f"cannot read {path}: {type(err).__name__}: {err}") from None
    return cfg if isinstance(cfg, dict) else {}


def run_grader(run_dir) -> tuple[str, str | None]:
    """(grader name, note) from the run's config.yaml `grader.name`; `baseline` when absent."""
    path = Path(run_dir) / CONFIG_YAML
    cfg = run_config(run_dir)
    if cfg is None:
        return graders.DEFAULT_GRADER, f"no {CONFIG_YAML}: assumed the {graders.DEFAULT_GRADER} grader"
    grader = cfg.get("grader") if isinstance(cfg, dict) else None
    name = grader.get("name") if isinstance(grader, dict) else None
    if name is None:
        return graders.DEFAULT_GRADER, None  # written before graders were configurable
    if name not in graders.GRADERS:
        raise BadInput(f"{path}: unknown grader {name!r}; valid: {sorted(graders.GRADERS)}")
    return name, None


def start_grader(run_dir) -> None:
    """Begin starting a worker of the run's grader, returning at once: its imports (some 0.6 s of CPU for
    sympy) run while the caller reads the runs, and the first symbolic check finds it ready or nearly so."""
    try:
        name, _ = run_grader(run_dir)
    except BadInput:
        return  # the run's own regrade reports it
    graders.STARTS[name]()


def _memoised(grade, cache: dict | None):
    """`grade` remembering each (pred, gold) outcome in `cache` (shared across a sweep's runs by `verify
    all`): the same wrong answer recurs across rollouts, and the base read-out is identical in every run,
    so most symbolic checks would be repeats. None: no memo."""
    if cache is None:
        return grade

    def remembered(pred, gold):
        key = (pred, gold)
        if key not in cache:
            cache[key] = bool(grade(pred, gold))
        return cache[key]

    return remembered


# Fewer round trips than this are asked one after another from one worker: a worker's start (its
# imports, some 0.6 s of CPU) costs more than a hundred typical round trips.
CONCURRENT_FROM = 64


def _grade_ahead(grader: str, grade, memo: dict, pairs) -> None:
    """Grade, into `memo`, the (pred, gold) pairs it lacks (`pred` None or empty: no grade). What the
    grader settles in-process is remembered at once; the rest are round trips to its workers, asked
    concurrently when there are `CONCURRENT_FROM` or more (one after another, all workers but one would
    wait): the pool warmed up first, up to one per worker (`sandbox.POOL_SIZE`) in flight. Fewer are
    left to the check loops, which ask them one at a time (one worker, started on demand). The check
    loops find every outcome remembered: the same `grade`, whatever the order."""
    todo = list(dict.fromkeys(key for key in pairs if key[0] and key not in memo))
    settle = graders.SETTLED_HERE.get(grader)
    if settle is not None:
        asked = []
        for key in todo:
            verdict = settle(*key)
            if verdict is None:
                asked.append(key)
            else:
                memo[key] = verdict
        todo = asked
    if len(todo) < CONCURRENT_FROM:
        return
    graders.WARM_UPS[grader]()  # no grade's deadline includes a worker's start
    with ThreadPoolExecutor(max_workers=sandbox.POOL_SIZE) as pool:
        for key, outcome in zip(todo, pool.map(lambda key: bool(grade(*key)), todo)):
            memo[key] = outcome


def _reward_fn(grader: str, grade=None):
    """(text, gold, gate_chars) -> spec §5 reward with `grader`; `training_reward` for the baseline,
    unless a (memoised) `grade` is given: then the same formula with that grade."""
    if grader == "baseline" and grade is None:
        return grading.training_reward
    grade = grade or graders.get_grader(grader)

    def reward(text, gold, gate_chars=None) -> float:
        if not isinstance(text, str) or not grading.passes_gate(text, gate_chars):
            return 0.0
        pred = grading.extract_answer(text, fallback=None)
        return 1.0 if pred and grade(pred, gold) else 0.0

    return reward


def _records(frame: pd.DataFrame, columns: list[str]):
    """The rows of `frame` as dicts of the named columns (those it has), as `to_dict("records")` gives them."""
    names = list(dict.fromkeys(c for c in columns if c in frame.columns))
    for values in zip(*(frame[c].tolist() for c in names)):
        yield dict(zip(names, values))


def _check_grades(frame: pd.DataFrame, grade=grading.grade, extractions=None) -> tuple[int, int, list[dict]]:
    """`extractions`: `grading.extract_answer` of each row's response, when the caller has taken them."""
    checked, agree, found = 0, 0, []
    key_columns = [c for c in GRADES_KEY if c in frame.columns]
    extractions = iter(extractions) if extractions is not None else None
    for row in _records(frame, ["response", "gold", "extracted", "correct", *key_columns]):
        response, gold = _value(row["response"]), _value(row["gold"])
        # "" for a missing response
        extracted = next(extractions) if extractions is not None else grading.extract_answer(response)
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
                    reward=grading.training_reward, grade=None, preds=None, shaping=None):
    """With `grade` and `preds` (each row's `extract_answer(text, fallback=None)`, None for a text that is
    not a string) the ungated reward is `reward`'s formula on them: 1.0 if pred and grade(pred, gold).
    `shaping(length) -> float`: the run's overlong penalty, added to the (gated) reward."""
    checked, agree, no_gold, found = 0, 0, 0, []
    key_columns = [c for c in ROLLOUTS_KEY if c in frame.columns]
    preds = iter(preds) if preds is not None else None
    for row in _records(frame, ["text", "gold", "correct", "reward", "length", *key_columns]):
        text, gold = _value(row["text"]), _value(row["gold"])
        pred = next(preds) if preds is not None else None
        if not isinstance(gold, str):
            no_gold += 1
            continue
        diffs = {}
        ungated = (1.0 if pred and grade(pred, gold) else 0.0) if preds is not None else reward(text, gold)
        stored_correct = _value(row["correct"])
        if _as_float(stored_correct) != ungated:
            diffs["correct"] = {"stored": stored_correct, "recomputed": ungated}
        if gate_known:
            gated = ungated if not isinstance(text, str) or grading.passes_gate(text, gate) else 0.0  # no second grade
            if shaping is not None:  # the run held its rewards as float32 (a group's reward tensor)
                gated = float(np.float32(gated + shaping(int(_value(row["length"])))))
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


def regrade_run(run_dir, label: str | None = None, grader: str = FROM_RUN, cache: dict | None = None,
                plugins: bool = False) -> dict:
    """Regrade one run folder's grades.parquet and rollouts.parquet (see module docstring).

    `grader`: "run" (the run's configured grader) or a name in `graders.GRADERS`. `cache`: a dict to
    remember grade outcomes per (grader, pred, gold) in, across runs (None: grade every item afresh).
    `plugins`: import the run's plugins to re-derive what they decided (`plugin_runs`); without it those
    parts are listed under `unchecked`."""
    run_dir = Path(run_dir)
    label = label or str(run_dir)
    info = _read_run_json(run_dir)
    gate_known, gate = _gate(info, run_dir)
    grader_note = None
    if grader == FROM_RUN:
        grader, grader_note = run_grader(run_dir)
    grade = raw_grade = graders.get_grader(grader)
    if cache is not None:
        grade = _memoised(grade, cache.setdefault(grader, {}))
    reward = _reward_fn(grader, grade if cache is not None else None)
    grades = _read_table(run_dir, "grades", GRADES_COLUMNS, read=GRADES_KEY)  # the columns read below
    plug = plugin_runs.parts_of(info)
    shaping = _overlong(info, run_dir)
    rollouts = _read_table(run_dir, "rollouts", ROLLOUTS_COLUMNS,
                           read=("gold", *ROLLOUTS_KEY, *(("tokens",) if plug.reward else ()),
                                 *(("length",) if shaping else ())))
    before = grading.stats()
    tables, notes, disagreements, unchecked = {}, [], [], []
    rules, why = None, None
    if plug:
        rules, why = plugin_runs.load(info, run_config(run_dir) or {}, grader, run_dir) if plugins else \
            (None, f"the run's plugin code is not imported (rerun with {plugin_runs.OPT_IN} to import the modules "
                   "its run.json names, checked against their recorded sha256)")

    def collect(table: str, found: list[dict]) -> None:
        disagreements.extend({"run": label, "run_dir": str(run_dir), "table": table, **d}
                             for d in found)

    own_grades = None  # the grades of benchmarks a plugin task reads out: checked with its rules, or not at all
    if grades is not None and plug.benchmarks and "benchmark" in grades.columns:
        mine = grades["benchmark"].isin(list(plug.benchmarks))
        grades, own_grades = grades[~mine], grades[mine]
    task_rollouts = plug.task is not None
    extractions = preds = None
    if cache is not None:  # extract once, grade what is new concurrently, then check against the memo
        extractions = ([grading.extract_answer(_value(v)) for v in grades["response"].tolist()]
                       if grades is not None else [])
        has_text = rollouts is not None and {"text", "gold"} <= set(rollouts.columns) and not task_rollouts
        preds = ([grading.extract_answer(t, fallback=None) if isinstance(t, str) else None
                  for t in map(_value, rollouts["text"].tolist())] if has_text else None)
        pairs = list(zip(extractions, map(_value, grades["gold"].tolist()))) if grades is not None else []
        if preds is not None:
            pairs += [(p, g) for p, g in zip(preds, map(_value, rollouts["gold"].tolist())) if isinstance(g, str)]
        _grade_ahead(grader, raw_grade, cache[grader], pairs)
    if grades is None:
        tables["grades"] = _table_result(0, 0, "no grades.parquet")
    else:
        checked, agree, found = _check_grades(grades, grade, extractions)
        if own_grades is not None and len(own_grades):
            for bench, part in own_grades.groupby("benchmark", sort=True):
                if rules is None:
                    unchecked.append(f"{len(part)} grades of benchmark {bench!r} come from plugin task "
                                     f"{plug.benchmarks[bench]!r} (its answer extraction and grader): not re-derived, "
                                     f"{why}")
                    continue
                answers = rules.benchmarks[bench]
                n, ok, more = _check_grades(part, answers.grade, [answers.extract(_value(v) or "")
                                                                  for v in part["response"].tolist()])
                checked, agree, found = checked + n, agree + ok, found + more
        tables["grades"] = _table_result(checked, agree)
        collect("grades", found)
    if rollouts is None:
        tables["rollouts"] = _table_result(0, 0, "no rollouts.parquet")
    elif "gold" not in rollouts.columns:
        tables["rollouts"] = _table_result(
            0, 0, f"not checked: rollouts.parquet has no 'gold' column ({len(rollouts)} rows); "
                  "rollouts cannot be regraded without it")
    elif task_rollouts and rules is None:
        unchecked.append(f"{len(rollouts)} rollouts of plugin task {plug.task!r}: their correctness and rewards "
                         f"come from its answer extraction and grader and were not re-derived, {why}")
        tables["rollouts"] = _table_result(0, 0, "plugin task: not re-derived")
    else:
        rollout_grade = grade
        if task_rollouts:
            rollout_grade = rules.train.grade
            preds = [rules.train.extract_reward(t) if isinstance(t, str) else None
                     for t in map(_value, rollouts["text"].tolist())]
        own_reward = plug.reward is not None
        checked, agree, no_gold, found = _check_rollouts(rollouts, gate_known and not own_reward, gate, reward,
                                                         rollout_grade, preds, shaping)
        parts = []
        if no_gold:
            parts.append(f"{no_gold} row(s) without a gold not checked")
        if not gate_known:
            parts.append(f"{RUN_JSON} has no gate_chars (unfinished run?): reward not checked, "
                         "only correct")
        if own_reward and rules is None:
            unchecked.append(f"{len(rollouts)} rollout rewards come from plugin reward {plug.reward!r} and were not "
                             f"re-derived (their correctness was), {why}")
        elif own_reward:
            found += plugin_reward_problems(rollouts, rules.reward)
        tables["rollouts"] = _table_result(checked, agree, "; ".join(parts) or None)
        collect("rollouts", found)
    steps_checked, found = std_problems(_read_table(run_dir, "steps", STEPS_COLUMNS)
                                        if (run_dir / "steps.parquet").is_file() else None)
    collect("steps", found)
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
            "disagreements": disagreements, "notes": notes, "grader_events": grader_events,
            "unchecked": unchecked, "steps_checked": steps_checked}


PLUGIN_REWARD_TOLERANCE = 1e-6  # relative (absolute below 1): a float32 stored, a float64 recomputed


def plugin_reward_problems(rollouts: pd.DataFrame, reward) -> list[dict]:
    """The stored reward of every rollout against the run's own (plugin) reward, recomputed group by group
    (a step's rollouts, in index order: a reward may depend on its group) from the stored texts and tokens."""
    found = []
    frame = rollouts.sort_values(["step", "index"], kind="stable")
    for step, group in frame.groupby("step", sort=True):
        texts = [_value(t) for t in group["text"].tolist()]
        golds = {_value(g) for g in group["gold"].tolist()}
        if len(golds) != 1 or not all(isinstance(t, str) for t in texts):
            found.append({"key": {"step": _value(step)}, "diffs": {"reward": {
                "stored": "a group", "recomputed": "not recomputable (texts or one gold missing)"}}})
            continue
        tokens = [list(map(int, t)) if t is not None else [] for t in group["tokens"].tolist()] \
            if "tokens" in group.columns else None
        rewards, _ = reward(texts, golds.pop(), tokens)
        for (_, row), value in zip(group.iterrows(), rewards):
            stored = _as_float(_value(row["reward"]))
            if stored is None or abs(stored - float(value)) > PLUGIN_REWARD_TOLERANCE * max(1.0, abs(float(value))):
                found.append({"key": {c: _value(row[c]) for c in ROLLOUTS_KEY if c in row.index},
                              "diffs": {"reward": {"stored": stored, "recomputed": float(value)}}})
    return found


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

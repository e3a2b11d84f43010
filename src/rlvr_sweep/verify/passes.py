"""`verify all`: PASS 1-4 of the paper's verification (§7) over a sweep, one line per pass.

PASS 1  every stored grade and rollout reward regraded (`regrade`) and every finished run folder
        intact (`integrity`: manifest, files, columns, run keys);
PASS 2  analytic checks that need no sweep (`analytic`: sampler laws by exact enumeration,
        Proposition 2, zero-gradient AdamW);
PASS 3  ledger laws (`ledgers`: pair conservation, step and run token totals) and Tables 1-3
        rebuilt from the stored rows (`rebuild`), the >512-token prefix audit re-derived (`audit`; with a
        saved tables folder, every saved table, the
        sweep chosen as its `selection.json` says); a finished run that cannot enter the tables, or
        ledgers of which nothing could be checked, fail it;
PASS 4  the test-time read-outs and probes (`testtime`): every sampled, fork and probe response regraded,
        fork positions, slots, tie gating, eff_cap arithmetic and probe cuts re-derived from the stored
        rows, stored margins against a fresh teacher-forced pass on a sample (loads the checkpoints),
        Tables 4 / 5A / 5B recounted (with a saved tables folder, 5A / 5B compared with their rebuilds);
        every counterfactual fork group's credit (Arms 14-19) replayed from its ledger, and its fork choice
        re-derived from the stored margins (`cf_replay`); every other group's stored advantages re-derived from
        its stored rewards with the run's estimator (`credit_replay`; a plugin's with --plugins); bfloat16 margins checked to be k/128
        (`dyadic`); every read-out and probe credited to the
        training run whose saved model has its model digest, and no other (`attribution`).
A pass fails on any problem; `run_all` returns the results, the CLI prints them and exits 1 on failure.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd

from rlvr_sweep.analysis import load_sweep
from rlvr_sweep.analysis.forked import COST, Beside, built, default_jobs
from rlvr_sweep.analysis.report import SELECTION, TABLES, TEST_TIME_TABLES, read_saved
from rlvr_sweep.store import CollectError
from rlvr_sweep.verify.attribution import attribution_problems
from rlvr_sweep.verify.audit import audit_problems
from rlvr_sweep.verify.beside import Pass2Beside
from rlvr_sweep.verify.cf_replay import replay_cf
from rlvr_sweep.verify.dyadic import dyadic_problems
from rlvr_sweep.verify.compare import _label, find_runs
from rlvr_sweep.verify.integrity import run_problems
from rlvr_sweep.verify.ledgers import pair_problems, step_problems
from rlvr_sweep.verify.rebuild import (
    markdown_problems, saved_problems, table1_problems, table2a_problems, table3_problems,
)
from rlvr_sweep.verify.regrade import format_disagreement, regrade_run, start_grader
from rlvr_sweep.verify.result import PassResult
from rlvr_sweep.verify.step_stats import NOT_REDERIVED

REGRADE_SHARE = 0.6  # of PASS 1's runs regraded here; a child regrades the rest and hashes every folder
# Below this many runs PASS 1 runs in one process: a forked child's own sympy worker (its start is some
# 0.6 s of CPU) and the fork cost more than the split gains while PASS 2 has the other core.
SPLIT_PASS1_FROM = 128


def pass1(root, jobs: int | None = None, plugins: bool = False, runs: list[Path] | None = None) -> PassResult:
    """With `jobs` > 1 (by default from `SPLIT_PASS1_FROM` runs, on more than one core), this process
    regrades the first `REGRADE_SHARE` of the runs and a forked child (`analysis.forked`) regrades the
    others and checks every folder's integrity (every file hashed, the weights included: about a third
    of a regrade's time); `jobs=1`: all here. Problems in run order. `plugins`: import each run's plugins to
    re-derive what they decided (`plugin_runs`); without it, those parts are the pass's `unchecked`.
    `runs`: the finished run folders under `root`, when the caller has found them."""
    root = Path(root)
    runs = find_runs(root, finished_only=True) if runs is None else runs
    if runs:
        start_grader(runs[0])  # the sweep's grader, as a rule: its worker's imports beside the first reads
    grades = rollouts = intact = stds = 0
    problems, cache, unchecked = [], {}, []
    jobs = (default_jobs() if len(runs) >= SPLIT_PASS1_FROM else 1) if jobs is None else jobs
    split = max(1, round(len(runs) * REGRADE_SHARE)) if jobs > 1 else len(runs)

    def part(name: str):
        regraded = [regrade_run(run_dir, _label(run_dir, root), cache=cache, plugins=plugins)
                    for run_dir in (runs[:split] if name == "here" else runs[split:])]
        return regraded if name == "here" else (regraded, [run_problems(run_dir) for run_dir in runs])

    done = built(["here", "beside"], part, min(jobs, 2))
    regraded, integrity = done["beside"]
    for r, damaged in zip(done["here"] + regraded, integrity):
        grades += r["tables"]["grades"]["checked"]
        rollouts += r["tables"]["rollouts"]["checked"]
        stds += r.get("steps_checked", 0)
        problems += [format_disagreement(d) for d in r["disagreements"]]
        problems += [f"{r['run']}: {n}" for n in r["notes"] if "not checked" in n]  # a finished run must be checkable
        unchecked += [f"{r['run']}: {u}" for u in r.get("unchecked", ())]
        intact += not damaged
        problems += damaged
    return PassResult("PASS 1", f"{len(runs)} finished runs; {grades} grades and {rollouts} rollout rewards regraded; "
                                f"{stds} step stds re-derived ({', '.join(NOT_REDERIVED)}: the update's own "
                                f"measurements, not re-derivable); {intact}/{len(runs)} run folders intact", problems,
                      unchecked=unchecked)


def pass2() -> PassResult:
    from rlvr_sweep.verify.analytic import run_pass2  # torch

    counts, problems = run_pass2()
    return PassResult("PASS 2", f"{counts['checks']} analytic checks: {counts['summary']}", problems)


def load_checked_sweep(root, tables_dir=None):
    """The sweep as the saved tables saw it (`selection.json` beside them: --profile / --where), else whole."""
    selection = {}
    if tables_dir is not None and (Path(tables_dir) / SELECTION).is_file():
        selection = json.loads((Path(tables_dir) / SELECTION).read_text())
    # decoded from the runs' files, whose bytes PASS 1 hashes: no snapshot of an earlier collection is trusted
    return load_sweep(root, profile=selection.get("profile"), where=selection.get("where") or None, kept=False)


def left_out_problems(sweep) -> list[str]:
    """A finished run that cannot enter the tables fails the pass: nothing of it was checked."""
    rows = sweep.provenance[~sweep.provenance["used"].astype(bool)] if len(sweep.provenance) else sweep.provenance
    return [f"{r.run_dir}: a finished run that cannot enter the tables ({r.why})" for r in rows.itertuples()
            if not str(r.why).startswith(("unfinished", "not selected", "not profile"))]


# seconds each part of PASS 3 took at 1,024 smoke runs: a table's build and its own checks, the ledger laws
PASS3_COST = {**COST, "ledgers": 5.4, "table1": 4.8, "audit": 3.2, "table2a": 1.1}
_TABLE_CHECKS = {"table1": table1_problems, "table2a": table2a_problems, "table3": table3_problems,
                 "audit": audit_problems}


def pass3(root, tables_dir=None, load=None, jobs: int | None = None) -> PassResult:
    """`load`: returns the collected sweep (`run_all` collects it once for PASS 3 and 4). The ledger laws
    and each table's checks (its rebuild from stored rows for Tables 1-3 and the audit, and the saved
    copy's comparison) are parts that run on `jobs` processes (`analysis.forked`; `jobs=1`: all here),
    each table's checks where it is built; the problems come out in the same order either way."""
    try:
        sweep = (load or (lambda: load_checked_sweep(root, tables_dir)))()
    except CollectError as err:
        return PassResult("PASS 3", "the sweep cannot be collected", [str(err)])
    jobs = default_jobs() if jobs is None else jobs
    saved = [name for name in TABLES if tables_dir is not None and read_saved(tables_dir, name) is not None]
    tables = [name for name in TABLES if name in _TABLE_CHECKS or name in saved]

    def part(name: str):
        if name == "ledgers":
            return (pair_problems(sweep.pairs, sweep.rollouts, sweep.runs),
                    step_problems(sweep.steps, sweep.rollouts, sweep.pairs, sweep.runs))
        rendered = {}
        return {"check": _TABLE_CHECKS[name](sweep) if name in _TABLE_CHECKS else None,
                "saved": saved_problems(sweep, tables_dir, names=[name], rendered=rendered) if name in saved else None,
                "rendered": rendered}

    done = built(["ledgers", *tables], part, jobs, cost=PASS3_COST)
    (n_pairs, problems), (counts, more) = done["ledgers"]
    problems += more + left_out_problems(sweep)
    trained = int((sweep.runs.get("totals.steps", pd.Series(dtype=float)).fillna(0) > 0).sum()) if len(sweep.runs) else 0
    if trained and (not n_pairs or not counts["steps"]):
        problems.append(f"{trained} training run(s), yet {n_pairs} pairs and {counts['steps']} steps were checked: "
                        "their ledgers could not be read (see PASS 1)")
    rebuilt = 0
    for name in ("table1", "table2a", "table3"):
        n, more = done[name]["check"]
        rebuilt, problems = rebuilt + n, problems + more
    audited, more = done["audit"]["check"]
    problems += more
    summary = (f"{n_pairs} pairs obey the conservation laws; {counts['steps']} steps and {counts['runs']} run totals "
               f"reconstruct from the ledgers; Tables 1-3: {rebuilt} numbers rebuilt from stored rows; "
               f"{audited} >512-token prefixes of the audit re-derived")
    if tables_dir is not None:
        n, rendered = 0, {}
        for name in saved:
            checked, more = done[name]["saved"]
            n, problems = n + checked, problems + more
            rendered.update(done[name]["rendered"])
        later = sum((Path(tables_dir) / f"{name}.parquet").is_file() for name in TEST_TIME_TABLES)  # PASS 4 compares them
        compared, more = markdown_problems(sweep, root, tables_dir, rendered, elsewhere=later)
        problems += more
        summary += f"; {n} saved tables in {tables_dir} rebuilt"
        summary += f", tables.md: {compared} tables and notes compared with the rebuilds" if compared else \
            ", no tables.md beside them"
        if not n:
            problems.append(f"--tables {tables_dir}: holds no saved table to compare (write them with "
                            "`python -m rlvr_sweep.analysis tables ROOT --out DIR`)")
    return PassResult("PASS 3", summary, problems)


def pass4(root, tables_dir=None, margin_items: int = 3, device: str = "cpu", load=None,
          plugins: bool = False) -> PassResult:
    """`plugins`: a run whose fork credit a plugin estimator gave is replayed with that estimator, imported as
    `plugin_runs` imports a run's plugins; without it, its fork steps are the pass's `unchecked`."""
    try:
        sweep = (load or (lambda: load_checked_sweep(root, tables_dir)))()
    except CollectError as err:
        return PassResult("PASS 4", "the sweep cannot be collected", [str(err)])
    from rlvr_sweep.verify.plugin_runs import run_estimator

    cf = replay_cf(sweep.steps, sweep.pairs, sweep.runs, run_estimator if plugins else None)
    parts, problems = [], list(cf["problems"])
    credit = credit_problems(sweep, plugins)
    problems += credit["problems"]
    if credit["groups"]:
        parts.append(f"{credit['groups']} groups' credit re-derived from their stored rewards with their run's "
                     f"estimator ({credit['runs']} run(s))")
    if credit["older"]:
        parts.append(f"{credit['older']} run(s) made before rollout rows held their credit: none to re-derive")
    book = bookkeeping_problems(sweep)
    problems += book["problems"]
    if book["updates"]:
        parts.append(f"{book['updates']} updates' ratio, clip and engine-trainer gap signals held against their "
                     f"objective and their rollouts' log-prob sums ({book['runs']} run(s))")
    credited, more = attribution_problems(sweep)
    if credited:
        parts.append(f"{credited} read-outs and probe checkpoints credited by their model digests")
        problems += more
    dyadic, more = dyadic_problems(sweep)
    if dyadic:
        parts.append(f"{dyadic} bfloat16 logit margins are k/128")
        problems += more
    if cf["steps"]:
        parts.append(f"{cf['steps']} counterfactual fork groups replayed ({cf['active']} active): coefficients, "
                     f"gates and signed token mass; {cf['forks']} fork choices re-derived from their margins")
    elif not cf["unchecked"]:
        parts += warmup_only(sweep)
    if len(sweep.readouts) or sweep.probes:
        from rlvr_sweep.verify.testtime import run_pass4  # torch and the read-out code: only when there are read-outs

        summary, more = run_pass4(sweep, tables_dir, margin_items, device)
        parts.append(summary)
        problems += more
    unchecked = cf["unchecked"] + credit["unchecked"]
    if not parts and not unchecked:
        return PassResult("PASS 4", "no read-out of a checkpoint, no sampled or fork read-out, no probe folder, no "
                                    "counterfactual arm and no stored credit: nothing to check")
    return PassResult("PASS 4", "; ".join(parts) or "nothing re-derived", problems, unchecked=unchecked)


def _config_or_none(run_dir, read):
    try:
        return read(run_dir)
    except (ValueError, OSError):  # an unreadable config.yaml: its credit is listed as not re-derived
        return None


def credit_problems(sweep, plugins: bool) -> dict:
    """Every stored advantage of the sweep's training runs re-derived (`credit_replay`)."""
    if not len(sweep.steps):
        return {"groups": 0, "runs": 0, "older": 0, "problems": [], "unchecked": []}
    from rlvr_sweep.verify.credit_replay import replay_credit
    from rlvr_sweep.verify.plugin_runs import run_estimator
    from rlvr_sweep.verify.regrade import run_config

    rollouts = getattr(sweep, "rollouts", None)
    if rollouts is None or not len(rollouts):
        return {"groups": 0, "runs": 0, "older": 0, "problems": [], "unchecked": []}  # PASS 3 says why
    configs = {d: _config_or_none(d, run_config) for d in sweep.runs["run_dir"]}
    return replay_credit(sweep.steps, rollouts, sweep.pairs, sweep.runs, configs,
                         run_estimator if plugins else None)


def bookkeeping_problems(sweep) -> dict:
    """Every update's health signals against its objective and its rollouts (`bookkeeping`)."""
    rollouts = getattr(sweep, "rollouts", None)
    if not len(sweep.steps) or rollouts is None:
        return {"updates": 0, "runs": 0, "problems": []}
    from rlvr_sweep.verify.bookkeeping import check_bookkeeping
    from rlvr_sweep.verify.regrade import run_config

    configs = {d: _config_or_none(d, run_config) for d in sweep.runs["run_dir"]}
    return check_bookkeeping(sweep.steps, rollouts, sweep.runs, configs)


def warmup_only(sweep) -> list[str]:
    """What PASS 4 found of counterfactual runs that hold no fork group: their steps were all the flat warmup
    (`sampler.bifurcate_after_active` active steps before forking), so nothing was replayed."""
    runs = sweep.runs
    if not len(runs) or "config" not in runs.columns:
        return []
    cf = runs[[isinstance(c, dict) and c.get("sampler.name") == "cf_fork" for c in runs["config"]]]
    if not len(cf):
        return []
    steps = sweep.steps[sweep.steps["run_hash"].isin(cf["run_hash"])] if len(sweep.steps) else sweep.steps
    return [f"{len(cf)} counterfactual run(s) found, but their {len(steps)} steps were all flat warmup (no fork "
            "group before sampler.bifurcate_after_active active steps): no fork group to replay"]


def run_all(root, tables_dir=None, echo=None, margin_items: int = 3, device: str = "cpu",
            plugins: bool = False) -> list[PassResult]:
    """PASS 1, 2, 3, 4 in order (each timed); `echo(result)` is called as each one ends, in that order.
    PASS 2 runs beside PASS 1, in its own process (`Pass2Beside`). Below `SPLIT_PASS1_FROM` runs, on more
    than one core, PASS 3 and then PASS 4 run in a forked child (`forked.Beside`) while this process
    regrades (PASS 1 is then one process, and the core PASS 2 leaves would otherwise idle); from there on
    PASS 1 and PASS 3 each split over the cores, one after the other. Either way the results are echoed
    in order, each as soon as it and those before it have ended. The sweep is collected once, for PASS 3
    and 4."""
    runs = find_runs(root, finished_only=True)  # bad input (no finished run) before any work starts
    load = _once(lambda: load_checked_sweep(root, tables_dir))
    beside = Pass2Beside.taken()  # started by the command line before its imports, or now
    overlap = default_jobs() > 1 and len(runs) < SPLIT_PASS1_FROM
    later = [lambda: timed(lambda: pass3(root, tables_dir, load, jobs=1 if overlap else None)),
             lambda: timed(lambda: pass4(root, tables_dir, margin_items, device, load, plugins))]
    third_fourth = Beside(later) if overlap else None
    results = []

    def ended(*done: PassResult) -> None:
        for result in done:
            results.append(result)
            if echo:
                echo(result)

    try:
        ended(timed(lambda: pass1(root, plugins=plugins, runs=runs)))
        if third_fourth is not None:
            rest = third_fourth.results()
            ended(beside.result(), next(rest))
            ended(next(rest))
        elif beside.done():
            ended(beside.result(), later[0]())  # PASS 2: its own seconds
        else:  # torch's imports still running on the other core: PASS 3 meanwhile
            third = later[0]()
            ended(beside.result(), third)
        if third_fourth is None:
            ended(later[1]())
    finally:
        beside.close()
        if third_fourth is not None:
            third_fourth.close()
    return results


def timed(run) -> PassResult:
    """`run()`'s result with the seconds it took."""
    started = time.perf_counter()
    result = run()
    result.seconds = time.perf_counter() - started
    return result


def _once(load):
    """`load` called at most once: its result (or its CollectError) again on every later call."""
    done: dict = {}

    def loaded():
        if "error" in done:
            raise done["error"]
        if "sweep" not in done:
            try:
                done["sweep"] = load()
            except CollectError as err:
                done["error"] = err
                raise
        return done["sweep"]

    return loaded

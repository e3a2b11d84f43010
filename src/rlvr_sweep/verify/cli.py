"""Check stored grades against the verifier, compare graders, and run the paper's PASS 1-4.

`python -m rlvr_sweep.verify all SWEEP_ROOT [--tables DIR] [--margin-items N] [--device cpu] [--json FILE]`
    PASS 1 (every stored grade and rollout reward regraded, each finished run folder intact against
    its manifest), PASS 2 (analytic checks: sampler laws by exact enumeration, Proposition 2,
    zero-gradient AdamW), PASS 3 (pair conservation laws, token totals from the ledgers, Tables 1-3
    rebuilt from the stored rows; with --tables, the tables saved by `analysis tables --out DIR` too)
    and PASS 4 (sampled, fork and probe responses regraded; fork positions, tie gating, eff_cap and
    probe cuts re-derived; stored margins against a fresh teacher-forced pass on N items per read-out
    and probe, loading the checkpoints on --device; Tables 4 / 5A / 5B recounted; every counterfactual
    fork step of Arms 14-19 replayed from its ledger rows).
    One line per pass with its counts (`rlvr_sweep.verify.passes`). Exit 0: every pass ok; 1: a
    problem (listed under its pass), including a finished run that cannot enter the tables and a
    check that checked nothing it should have; 2: bad input (no finished run under SWEEP_ROOT, no
    --tables folder); 3: no problem, but incomplete: a run's plugin decided something (its reward, its
    task's answers and grader) that was not re-derived because its code was not imported. `--plugins`
    imports exactly the modules each run's run.json names, only when their sha256 are the recorded ones,
    and re-derives those parts with them (`rlvr_sweep.verify.plugin_runs`); without it, no code from a
    results folder ever runs. `--plugins-kept-in DIR` re-derives the runs under DIR with the plugin code each
    kept in its folder (`plugin_code/`), for runs made before their plugin was edited; it imports code from
    that results folder, so only for the folders named.

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
    found, unreadable run.json or table, missing column), with a message on stderr; 3: nothing
    disagrees but something was left unchecked (a plugin's decision without --plugins), or nothing
    at all was checked (runs without grades or rollouts): a check that checked nothing fails.

`python -m rlvr_sweep.verify compare [--data-root DIR] [--benchmarks math500,gsm8k,amc23,math_train]`
    For each gold answer of the benchmark files (DIR defaults to $RLVR_SWEEP_DATA, else `data`):
    the four checks of `GOLD_CHECKS`, i.e. each grader on gold vs itself, and each grader on gold
    vs the *other* verifier's normal form of it (graders.py defines both normal forms: baseline =
    `grading.normalize(gold)`, math_verify = `str()` of Math-Verify's parsed value of `$gold$`).
    A check that returns False is a disagreement; prints the counts per benchmark and check, and
    the first `--show` (20) disagreeing items per benchmark with their total, then a verdict: exit 0
    when each grader accepts every gold as equal to itself, 1 when one does not. Golds that fail only
    against the other grader's normal form are counted, not failures (the forms differ by design).

`python -m rlvr_sweep.verify compare-run OUTPUT_DIR [--all]`
    Re-extracts every stored eval response (default fallback) and grades the same extracted answer
    with both graders; prints per run and phase/benchmark the accuracy under each, and the items
    where they disagree (first `--show` per run, with the total).

compare/compare-run need math-verify (`pip install math-verify`); without it they exit 2. They
are implemented in `rlvr_sweep.verify.compare` (with the run-folder reading), regrade in
`rlvr_sweep.verify.regrade`; both are re-exported by `rlvr_sweep.verify`.
The functions `find_runs`, `regrade_run`, `regrade`, `compare_golds`, `compare`, `compare_run`
return plain dicts for tests and notebooks and raise `BadInput` where the CLI exits 2.
"""
from __future__ import annotations

import argparse
import json
import os
import time
import sys
from pathlib import Path

from rlvr_sweep.io import atomic_write_json
from rlvr_sweep.reward import graders
from rlvr_sweep.verify.compare import (
    COMPARE_FILES, DEFAULT_SHOW, BadInput, _label, compare, compare_run, compare_verdict, find_runs, format_compare,
    format_compare_run,
)
from rlvr_sweep.verify.passes import run_all
from rlvr_sweep.verify.regrade import FROM_RUN, _fmt_pct, _total, format_run, regrade_run

EXIT_OK, EXIT_DISAGREE, EXIT_BAD_INPUT, EXIT_INCOMPLETE = 0, 1, 2, 3


def _print(lines) -> None:
    for line in lines:
        print(line, flush=True)


# ---------------------------------------------------------------- command line
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rlvr_sweep.verify", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("all", help="PASS 1-4 over a sweep; exit 1 on any problem")
    p.add_argument("output_dir", help="a sweep root (e.g. outputs/runs) or one run folder's parent")
    p.add_argument("--tables", default=None, help="a folder written by `analysis tables --out`: rebuild and compare")
    p.add_argument("--margin-items", type=int, default=3,
                   help="PASS 4: items per fork read-out and probe re-run through the model (default 3)")
    p.add_argument("--device", default="cpu", help="PASS 4: where the checkpoints are loaded (default cpu)")
    p.add_argument("--json", default=None, metavar="FILE",
                   help="also write the verdict as JSON: {root, advice, passes: [{name, ok, verdict, summary, "
                        "problems, unchecked, seconds}]} (advice: what to do about parts not re-derived, or null)")
    p.add_argument("--plugins", nargs="*", default=None, metavar="DIR",
                   help="import the plugins each run's run.json names to re-derive what they decided, from the folders "
                        "named here, RLVR_SWEEP_PLUGINS or PYTHONPATH, each file checked against its recorded sha256 "
                        "before anything is imported; without it such parts are reported, not checked")
    p.add_argument("--plugins-kept-in", nargs="+", default=None, metavar="DIR",
                   help="re-derive the runs under DIR with the plugin code each kept in its folder (plugin_code/, "
                        "checked against run.json's digests before import): for runs made before their plugin was "
                        "edited. It imports code from a results folder: name only folders you trust")
    p = sub.add_parser("regrade", help="recompute stored grades and rewards; exit 1 on disagreement")
    p.add_argument("output_dir", help="one run folder or a sweep root")
    p.add_argument("--all", action="store_true", help="include unfinished runs (no DONE marker)")
    p.add_argument("--grader", default=FROM_RUN, choices=[FROM_RUN, *graders.GRADERS],
                   help="grader to regrade with (default: each run's configured grader.name)")
    p.add_argument("--plugins", nargs="*", default=None, metavar="DIR",
                   help="import each run's recorded plugins to re-derive what they decided (see `all --plugins`)")
    p.add_argument("--plugins-kept-in", nargs="+", default=None, metavar="DIR",
                   help="re-derive the runs under DIR with the plugin code each kept in its folder (plugin_code/, "
                        "checked against run.json's digests before import): for runs made before their plugin was "
                        "edited. It imports code from a results folder: name only folders you trust")
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
        results.append(regrade_run(run_dir, _label(run_dir, root), args.grader, plugins=_opted_in(args)))
        _print(format_run(results[-1]))
    total = _total(root, results)
    n = len(total["disagreements"])
    left = sum(len(r.get("unchecked", ())) for r in results)
    print(f"== total: {len(results)} run(s), {total['checked']} checked, {total['agree']} agree "
          f"({_fmt_pct(total['agreement_pct'])}), {n} disagreement(s)"
          + (f", {left} part(s) not re-derived ({_plugin_advice(args, [u for r in results for u in r.get('unchecked', ())])})"
             if left else ""))
    if not total["checked"]:
        print("   note: nothing was checked (see the notes above)")
    return EXIT_DISAGREE if n else EXIT_INCOMPLETE if left or not total["checked"] else EXIT_OK


def _run_all(args) -> int:
    if args.tables is not None and not Path(args.tables).is_dir():
        raise BadInput(f"--tables {args.tables}: no such folder (write the tables with "
                       f"`python -m rlvr_sweep.analysis tables {args.output_dir} --out DIR` first)")
    started = time.perf_counter()
    results = run_all(args.output_dir, args.tables, echo=lambda r: _print(r.lines()), margin_items=args.margin_items,
                      device=args.device, plugins=_opted_in(args))
    seconds = time.perf_counter() - started
    failed = [r.name for r in results if not r.ok]
    incomplete = [r.name for r in results if r.ok and not r.complete]
    advice = _plugin_advice(args, [u for r in results for u in r.unchecked]) if incomplete else None
    if args.json:
        atomic_write_json(Path(args.json), {"root": str(args.output_dir), "advice": advice, "passes": [
            {"name": r.name, "ok": r.ok, "verdict": r.verdict, "summary": r.summary, "problems": r.problems,
             "unchecked": r.unchecked, "seconds": round(r.seconds, 2)} for r in results]})
    done = len(results) - len(failed) - len(incomplete)
    print(f"== verify all: {done}/{len(results)} passes ok "
          f"({seconds:.1f}s; PASS 2 ran beside PASS 1)" + (f"; failed: {', '.join(failed)}" if failed else "")
          + (f"; incomplete: {', '.join(incomplete)} ({advice})" if incomplete else ""))
    return EXIT_DISAGREE if failed else EXIT_INCOMPLETE if incomplete else EXIT_OK


def _opted_in(args) -> bool:
    """`--plugins` given (with or without folders), or `--plugins-kept-in`: the folders are trusted for this
    command's imports."""
    if args.plugins is None and args.plugins_kept_in is None:
        return False
    from rlvr_sweep.verify.plugin_runs import trust

    trust(args.plugins or [], results=args.output_dir, kept_in=args.plugins_kept_in or [])
    return True


def _plugin_advice(args, unchecked: list[str]) -> str:
    """What to do about parts left unchecked, as the situation is: pass --plugins; or, the code having moved on
    since runs ran, re-derive them with the code they kept; or (all given) read why each run's was refused."""
    from rlvr_sweep.verify.plugin_runs import MOVED_ON

    if args.plugins is None and args.plugins_kept_in is None:
        return "plugin code not imported: --plugins re-derives it"
    moved = {Path(u.split(": ", 1)[0]).name for u in unchecked if any(words in u for words in MOVED_ON)}  # run folders
    if moved and args.plugins_kept_in is None:
        return (f"the plugin code changed since {len(moved)} run(s) ran: --plugins-kept-in {args.output_dir} re-derives "
                "them with the code each run kept (it imports that code from the results folder: only for results "
                "you trust)")
    given = " and ".join(f for f, v in (("--plugins", args.plugins), ("--plugins-kept-in", args.plugins_kept_in))
                         if v is not None)
    return f"plugin code not imported for some runs although {given} was given: the lines above say why"


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # PASS 4 loads checkpoints; the pass lines are the report
    try:
        if args.command == "all":
            return _run_all(args)
        if args.command == "regrade":
            return _run_regrade(args)
        if args.command == "compare":
            benchmarks = [b.strip() for b in args.benchmarks.split(",") if b.strip()]
            ok, verdict = compare_verdict(compare(args.data_root, benchmarks, args.limit, args.show,
                                                  echo=lambda name, r: _print(format_compare(name, r))))
            print(verdict)
            return EXIT_OK if ok else EXIT_DISAGREE
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


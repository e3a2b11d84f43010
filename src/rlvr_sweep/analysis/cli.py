"""`python -m rlvr_sweep.analysis tables|figures|report|union SWEEP_ROOT ...`, `... diff A B`.

`tables` prints Tables 1, 2A, 2B, 3, 4 (cross-seed greedy and single-seed sampled voting), the prefix
audit, and, when the root holds them, Table 5C (counterfactual fork-pair Arms 14-19), Tables 5A
(prefix-splice probe folders) and 5B (fork read-outs and batch audits of checkpoints) as markdown and
saves each as `DIR/<name>.parquet` plus `DIR/tables.md`; `figures` writes Figure 1, Figure 2 and the
training curves as PNG and PDF into DIR. SWEEP_ROOT is the folder above the profiles
(`outputs/runs`) or one profile's folder. Exit 0 when the sweep was read (a table or figure that
cannot be built says why and is skipped), 2 when SWEEP_ROOT holds no finished, intact run or an option is
bad. Runs that are unfinished or damaged are left out and named (`verify all` says what is wrong).

Runs are grouped by identity (`analysis.grouping`): an arm row is the runs that differ only in their
seed; runs of one arm with other settings or inputs are other rows, labelled by what differs. Both
commands print first how many run folders they use, which rows were split and what was left out;
the `runs` table names every folder and the row it stands behind. `--profile` and `--where KEY=VALUE`
choose runs; the choice is saved as `DIR/selection.json`, which `verify all --tables DIR` applies.

Table 2B holds the declared contrasts (`--contrasts FILE` or a shipped list; default: the list of the
sweep's profile), then every arm row against the sweep's baseline arm in accuracy on each benchmark both
read out (rows titled "vs baseline", numbered from 101; `--baseline ARM`, a paper number or name, chooses
that arm: default the paper's Arm 1, else an arm named `baseline`, else the lowest paper arm number, then
by name). Both options are the same for `tables` and `report`; an arm no row answers to exits 2.

`report SWEEP_ROOT --out outputs/report.html` writes the sweep as one self-contained HTML page (provenance,
the `verify all` verdict, every table and figure, each arm's settings against the baseline arm's:
`analysis.html_report`); `diff A B` prints what differs between two run folders, arms or saved configs
(`analysis.diff`).

`union SWEEP_ROOT --checkpoints 15,18 --benchmark math500` prints the oracle union (Pass@k) of any
chosen checkpoints (`ARM` is every seed of the arm, `ARM:SEED` one checkpoint; arms by paper number or
name) with each one's accuracy; `--out FILE.parquet` saves the per-item matrix behind it
(`analysis.ensembles`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rlvr_sweep.analysis.contrasts import SHIPPED, baseline_units, load_contrasts
from rlvr_sweep.analysis.ensembles import REFERENCE_ARMS, checkpoint_union, parse_checkpoints, union_lines
from rlvr_sweep.analysis.forked import default_jobs
from rlvr_sweep.analysis.report import (ALL_TABLES, OPTIONAL_TABLES, SELECTION, build_tables, header_lines, save_tables,
                                        table_notes)
from rlvr_sweep.analysis.source import load_sweep
from rlvr_sweep.analysis.verdicts import VerdictSettings
from rlvr_sweep.store import CollectError

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rlvr_sweep.analysis", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("tables", "print and save the paper's tables"), ("figures", "write the figures"),
                            ("union", "the oracle union / Pass@k of chosen checkpoints"),
                            ("report", "the sweep as one self-contained HTML page"),
                            ("plan", "seeds, hours and disk a study's contrasts need, from a pilot's runs")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("root", help="sweep root (e.g. outputs/runs)")
        if name == "union":
            p.add_argument("--out", default=None, help="save the per-item matrix as this parquet file")
        elif name == "plan":
            p.add_argument("--halfwidth", type=float, default=1.0, metavar="PP",
                           help="target half-width of each two-level 95%% interval, in pp (default 1.0)")
            p.add_argument("--effect", type=float, default=3.0, metavar="PP",
                           help="effect to detect, in pp (default 3.0), at --power and the family's Holm level")
            p.add_argument("--power", type=float, default=0.8, help="power to detect --effect (default 0.8)")
            p.add_argument("--items", type=_positive, default=None,
                           help="plan on this many items (default: as many as the pilot read out)")
            p.add_argument("--json", default=None, metavar="FILE", help="also write the plan as JSON")
            p.add_argument("--contrasts", default=None, help="Table 2B rows: a YAML file or a shipped list")
            p.add_argument("--baseline", default=None, metavar="ARM", help="the arm every arm row is contrasted with")
        elif name == "report":
            p.add_argument("--out", required=True, help="the HTML file to write (e.g. outputs/report.html)")
            p.add_argument("--no-verify", action="store_true", help="leave out the `verify all` verdict")
            p.add_argument("--plugins", nargs="*", default=None, metavar="DIR",
                           help="the verdict imports the runs' recorded plugins to re-derive what they decided "
                                "(`verify all --plugins [DIR ...]`)")
            p.add_argument("--plugins-kept-in", nargs="+", default=None, metavar="DIR",
                           help="the verdict re-derives the runs under DIR with the plugin code each kept "
                                "(`verify all --plugins-kept-in DIR`: imports code from that results folder)")
        else:
            p.add_argument("--out", required=True, help="output folder")
        p.add_argument("--profile", default=None, help="only this profile's runs (smoke, paper, ...)")
        p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                       help="only runs whose config has KEY=VALUE (repeatable; e.g. --where train.steps=100 "
                            "--where eval.limit=null)")
    sub.add_parser("diff", help="the settings, inputs and metrics that differ between two runs, arms or configs",
                   add_help=False)  # its own arguments: `python -m rlvr_sweep.analysis diff --help`
    for name in ("tables", "report"):
        sub.choices[name].add_argument("--resamples", type=int, default=4000, help="bootstrap resamples (default 4000)")
        sub.choices[name].add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
        sub.choices[name].add_argument("--contrasts", default=None,
                                       help=f"Table 2B rows: a YAML file or a shipped list {sorted(SHIPPED)} "
                                            "(default: the list of the sweep's profile)")
        sub.choices[name].add_argument("--baseline", default=None, metavar="ARM",
                                       help="the arm (paper number or name) every arm row is contrasted with in "
                                            "Table 2B (default: Arm 1, else an arm named baseline, else the lowest "
                                            "paper arm number, then by name)")
        sub.choices[name].add_argument("--delta", type=float, default=VerdictSettings.delta_pp, metavar="PP",
                                       help="the smallest difference that matters, in pp: Table 2B's verdict calls "
                                            "an interval inside +-PP a powered null (default %(default)s)")
        sub.choices[name].add_argument("--power", type=float, default=VerdictSettings.power,
                                       help="the power an inconclusive verdict's seeds are planned for "
                                            "(default %(default)s)")
    t = sub.choices["tables"]
    t.add_argument("--only", default=",".join(ALL_TABLES), help=f"comma-separated subset of {','.join(ALL_TABLES)}")
    t.add_argument("--strata-reference", default=",".join(REFERENCE_ARMS), metavar="ARMS",
                   help="the arms (paper numbers or names) whose checkpoints define the item strata (default 1-9)")
    t.add_argument("--jobs", type=_positive, default=default_jobs(),
                   help=f"processes that build the tables (default: one per usable core, at most 4; here "
                        f"{default_jobs()}); the tables are the same for any number")
    u = sub.choices["union"]
    u.add_argument("--checkpoints", required=True,
                   help="comma-separated ARM (every seed) or ARM:SEED, e.g. 15,18 or 15:101,17:42,18:7")
    u.add_argument("--benchmark", default="math500", help="a benchmark read out, or pool950 (default math500)")
    return parser


def _plan(sweep, root, args, contrasts, baseline) -> int:
    from rlvr_sweep.analysis.planning import plan, plan_lines

    if args.halfwidth <= 0 or args.effect <= 0 or not 0 < args.power < 1:
        print(f"analysis: error: --halfwidth and --effect must be above 0 and --power in (0, 1) (got "
              f"{args.halfwidth}, {args.effect}, {args.power})", file=sys.stderr)
        return EXIT_BAD_INPUT
    result = plan(sweep, root, args.halfwidth, args.effect, args.power, args.items, contrasts, baseline)
    for line in plan_lines(result):
        print(line)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
        print(f"wrote {args.json}")
    return EXIT_OK if result["contrasts"] else EXIT_BAD_INPUT


def union(sweep, args) -> int:
    try:
        result = checkpoint_union(sweep, parse_checkpoints(args.checkpoints), args.benchmark)
    except ValueError as err:
        print(f"analysis: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not result["n_items"]:
        print(f"analysis: error: no {args.benchmark} item was read out by every chosen checkpoint", file=sys.stderr)
        return EXIT_BAD_INPUT
    for line in union_lines(result):
        print(line)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        matrix = result["matrix"].astype(int)
        matrix.assign(union=matrix.max(axis=1)).rename_axis("item_id").reset_index().to_parquet(out, index=False)
        print(f"wrote the {result['n_items']} x {result['k']} item matrix to {out}")
    return EXIT_OK


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["diff"]:
        from rlvr_sweep.analysis.diff import main as diff

        return diff(argv[1:])
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    root = Path(args.root)
    try:
        verdicts = VerdictSettings(args.delta, args.power) if args.command in ("tables", "report") else None
        sweep = load_sweep(root, profile=args.profile, where=args.where, presets_beside=True)  # Hydra beside collect
        contrasts = load_contrasts(args.contrasts) if getattr(args, "contrasts", None) else None
        only = [n.strip() for n in getattr(args, "only", "").split(",") if n.strip()]
        if args.command == "tables" and any(n not in ALL_TABLES for n in only):
            raise ValueError(f"--only {args.only!r}: valid tables are {list(ALL_TABLES)}")
    except (CollectError, FileNotFoundError, ValueError) as err:
        print(f"analysis: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not len(sweep.runs):
        print(f"analysis: error: no finished, intact run under {root}", file=sys.stderr)
        for note in sweep.notes:
            print(f"  {note}", file=sys.stderr)
        return EXIT_BAD_INPUT
    baseline = getattr(args, "baseline", None)
    try:
        baseline_units(sweep, baseline)  # an arm no row answers to: said before anything is built
    except ValueError as err:
        print(f"analysis: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    head = f"{len(sweep.runs)} runs, {len(sweep.units())} arms, benchmarks {sweep.benchmarks()}"
    header = header_lines(sweep, root)
    for line in header:
        print(line, flush=True)
    print("", flush=True)
    if args.command == "union":
        return union(sweep, args)
    if args.command == "plan":
        return _plan(sweep, root, args, contrasts, baseline)
    if args.command == "report":
        from rlvr_sweep.analysis.html_report import write_report

        path = write_report(sweep, root, args.out, verify=not args.no_verify, n_resamples=args.resamples,
                            seed=args.seed, progress=lambda line: print(line, flush=True), plugins=args.plugins,
                            kept_in=args.plugins_kept_in, contrasts=contrasts, baseline=baseline, verdicts=verdicts)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {time.perf_counter() - started:.1f}s; {head})")
        return EXIT_OK
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / SELECTION).write_text(json.dumps({"profile": args.profile, "where": args.where}, indent=2))
    if args.command == "tables":
        reference = [a.strip() for a in args.strata_reference.split(",") if a.strip()]
        tables = build_tables(sweep, contrasts, args.resamples, args.seed, only, strata_reference=reference,
                              jobs=args.jobs, baseline=baseline, verdicts=verdicts)
        if args.only == ",".join(ALL_TABLES):  # not asked for by name: left out where the sweep lacks their runs
            for name in [n for n in OPTIONAL_TABLES if tables[n].why]:
                Path(args.out, f"{name}.parquet").unlink(missing_ok=True)
                del tables[name]
        for table in tables.values():
            print(table.markdown() + "\n", flush=True)
        written = save_tables(tables, args.out, table_notes(sweep, root))
    else:
        written = []
        from rlvr_sweep.analysis.figures import FIGURES  # matplotlib: only to draw

        for name, draw in FIGURES.items():
            paths, why = draw(sweep, args.out)
            written += paths
            print(f"{name}: " + (why if why else ", ".join(str(p) for p in paths)), flush=True)
    print(f"wrote {len(written)} files to {args.out} ({time.perf_counter() - started:.1f}s; {head})")
    for note in sweep.notes:
        print(f"note: {note}")
    return EXIT_OK

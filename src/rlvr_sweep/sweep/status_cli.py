"""`python -m rlvr_sweep status ROOT` (or `rlvr-sweep status`): every run of a sweep and its state.

    python -m rlvr_sweep status outputs/runs                 # one row per run, totals per state and arm
    python -m rlvr_sweep status outputs/runs --watch         # redrawn every 5 s until Ctrl-C
    python -m rlvr_sweep status outputs/runs --json          # the rows as JSON, for scripts
    python -m rlvr_sweep status -- +arm=stopped_tree horizon=1024 -m seed=42,101,7
                                                             # the runs this sweep would make, and what a
                                                             # relaunch would do with each

The states are described in `rlvr_sweep.sweep.status`; below them, each hyperparameter search recorded
under ROOT (its trials, and the best so far: docs/search.md). Exit 0 when the rows were read (a file read in
part, or not at all, is named below the table, or on stderr with `--json`; it never hides the other
runs), 2 on a bad root or a sweep command that does not compose (one line naming the problem).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rlvr_sweep.sweep.records import Problems
from rlvr_sweep.sweep.search_record import search_lines, searches
from rlvr_sweep.sweep.status import STATES, planned_report, sweep_report, totals

EXIT_OK, EXIT_BAD_INPUT = 0, 2
COLUMNS = (("row", "arm"), ("paper_arm", "paper"), ("horizon", "horizon"), ("seed", "seed"), ("state", "state"),
           ("detail", "detail"))


def main(argv: list[str]) -> int:
    sweep_args = None
    if "--" in argv:
        at = argv.index("--")
        argv, sweep_args = argv[:at], argv[at + 1:]
    parser = _parser()
    args = parser.parse_args(argv)
    if (args.root is None) == (sweep_args is None):
        parser.error("give either ROOT or `-- <sweep command's overrides>`")
    if args.root is not None and not Path(args.root).is_dir():
        print(f"status: error: {args.root} is not a folder", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        read = (lambda: _report(args.root)) if sweep_args is None else _planned(sweep_args)
        rows, problems, found = read()
    except ValueError as err:
        print(f"status: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    planned = sweep_args is not None
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        for line in problems.lines:  # also in each row's `problems`; here those of no row too
            print(f"status: {_printable(line)}", file=sys.stderr)
        return EXIT_OK
    if args.watch is None:
        print("\n".join(render(rows, planned=planned, runs=args.runs, problems=problems, searches=found)))
        return EXIT_OK
    return _watch(read, (rows, problems, found), args, planned)


def _report(root):
    """The runs' rows, what could not be read, and the searches recorded under `root` (docs/search.md)."""
    rows, problems = sweep_report(root)
    return rows, problems, searches(root, problems)


def _watch(read, report, args, planned: bool) -> int:
    """Redraw until Ctrl-C. A bad file is a note on the screen like any other; should reading itself
    fail (a bug), the screen says so above the last rows read and the watch goes on."""
    read_at, failure = time.strftime("%H:%M:%S"), ""
    try:
        while True:
            rows, problems, found = report
            screen = render(rows, planned=planned, runs=args.runs, problems=problems, searches=found)
            sys.stdout.write("\x1b[H\x1b[2J" + time.strftime("%H:%M:%S ") + f"(every {args.watch:g}s, Ctrl-C ends)\n"
                             + failure + "\n".join(screen) + "\n")
            sys.stdout.flush()
            time.sleep(args.watch)
            try:
                report = read()
                read_at, failure = time.strftime("%H:%M:%S"), ""
            except Exception as err:  # noqa: BLE001  (a bug of ours must not end the watch of a long sweep)
                failure = (f"reading failed ({type(err).__name__}: {_printable(str(err))[:200]}), a bug in rlvr_sweep: "
                           f"please report it; the rows below are from {read_at}\n")
    except KeyboardInterrupt:
        return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rlvr_sweep status", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", nargs="?", help="the runs' root (run.out_root, e.g. outputs/runs)")
    parser.add_argument("--watch", nargs="?", type=float, const=5.0, default=None, metavar="SECONDS",
                        help="redraw every SECONDS (default 5) until interrupted")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--runs", action="store_true", help="also print each run's folder")
    return parser


def _planned(overrides: list[str]):
    """A reader of the states of the jobs the sweep command would make (composed once)."""
    from rlvr_sweep.config import ConfigError, register_configs
    from rlvr_sweep.plugins import load_environment_plugins
    from rlvr_sweep.sweep.command_line import CONF_DIR, normalize_argv
    from rlvr_sweep.sweep.preflight import PreflightError, located_jobs

    register_configs()  # the schema Hydra composes on (`python -m rlvr_sweep status` starts before the launch code)
    try:
        load_environment_plugins()  # its options and arms, as a launch finds them
    except ConfigError as err:
        raise ValueError(str(err)) from None
    line = [a for a in normalize_argv(["status", *overrides])[1:] if a not in ("-m", "--multirun")]
    try:
        jobs = located_jobs(str(CONF_DIR), line, memory=True)
    except PreflightError as err:
        raise ValueError(f"the sweep does not compose: {err}") from None
    return lambda: (*planned_report(jobs), [])


def render(rows: list[dict], planned: bool = False, runs: bool = False, problems: Problems | None = None,
           searches: list[dict] | None = None) -> list[str]:
    """The table, then the totals per state and per arm, then the searches (`search.searches`), then one
    line per problem in what was read."""
    columns = [*COLUMNS, *((("would", "a relaunch would"),) if planned else ()), *((("run_dir", "run"),) if runs else ())]
    cells = [[_cell(r.get(key)) + (" [read in part: see below]" if key == "detail" and r.get("problems") else "")
              for key, _ in columns] for r in rows]
    widths = [max([len(title), *(len(c[i]) for c in cells)]) for i, (_, title) in enumerate(columns)]
    lines = ["  ".join(title.ljust(w) for (_, title), w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    by_state, by_arm = totals(rows)
    order = [*STATES, "new", *sorted(set(by_state) - set(STATES) - {"new"})]
    lines.append("")
    lines.append(f"{len(rows)} run{'' if len(rows) == 1 else 's'}: "
                 + ", ".join(f"{by_state[s]} {s}" for s in order if s in by_state))
    for arm, counts in by_arm.items():
        lines.append(f"  {_printable(arm)}: " + ", ".join(f"{counts[s]} {s}" for s in order if s in counts))
    if planned and any(r.get("memory") for r in rows):
        lines += ["", *memory_lines(rows)]
    if searches:
        lines += ["", *(_printable(line) for line in search_lines(searches))]
    if problems is not None and problems.lines:
        lines += ["", problems.summary() + ":", *(f"  {_printable(line)}" for line in problems.lines)]
    return lines


def memory_lines(rows: list[dict]) -> list[str]:
    """Each row's estimated peak memory (`run.memory_plan`), said once for rows of the same estimate."""
    by_estimate: dict[str, dict[str, int]] = {}
    for r in rows:
        if r.get("memory"):
            names = by_estimate.setdefault(r["memory"], {})
            name = str(r.get("row") or r.get("arm"))
            names[name] = names.get(name, 0) + 1
    lines = ["estimated peak memory (checked at launch against model.device_memory_gb, or a GPU's own memory):"]
    for words, names in by_estimate.items():
        shown = ", ".join(f"{name} ({n} run{'' if n == 1 else 's'})" for name, n in names.items())
        lines.append(f"  {_printable(shown)}: {_printable(words)}")
    return lines


def _cell(value) -> str:
    return "" if value is None else _printable(str(value))


def _printable(text: str) -> str:
    """A value read from a file, on one line and without terminal control sequences (a crafted file's
    `\\x1b[2J` is shown, not obeyed)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)

"""`python -m rlvr_sweep.analysis diff A B`: what two runs, arms or configs differ in (CONVENTIONS #16).

A and B are each a run folder (a run.json passed as a file stands for its folder), an arm name
(`ra_flat`: `conf/arm/ra_flat.yaml` composed with Hydra as a run composes it, `+arm=ra_flat` on the
default config, plus the Hydra overrides given for that side) or a saved config file (a run's
`config.yaml`, or any YAML / JSON config). A bare name that names an arm is the arm, even when a folder
of that name exists (write `./ra_flat` for the folder); with `--root DIR`, a relative path is read under
DIR and a run hash (8 hex digits) names the run folder under DIR that carries it.

The report (`diff_lines`) names both sides, then lists the settings that differ, then, when either
side is a run, the inputs that make up a run's identity and differ (each data file's rows digest and
row count, the model's digest and each model file's, the plugins' code digest and each plugin module's,
whether the data are the study's canonical files)
together with the code version (recorded in run.json, not part of the identity), and for two runs
their headline metrics side by side (accuracy per phase and benchmark, B-A in points; wall seconds and
training totals, B-A as it comes). A section with nothing in it says so.

Left out, and why:
- run.json's records of where and when: `run_dir`, `model_dir`, `started_at`, `finished_at`,
  `status`, `skipped`, `resumed_from_step`, each input's absolute file paths and canonical flags per
  path, the model's `folder` and `source`. They differ between any two runs of one sweep without being
  a setting; the digests beside them are what the run read;
- run.json's copies of settings (`arm`, `seed`, `horizon`, `profile`, `lengths`, caps, ...): the
  config holds each once, and is what is compared (so `seed` is always compared, as a setting);
- a composed config's `hydra` node (Hydra's own settings, not the run's);
- grader health counters and the trained model's digest: outputs, for `verify` to judge.
Settings declared `identity=False` (`config.bookkeeping_keys`: where files go, how often they are
written, loggers, the `paper_arms` label) are not hidden but listed apart, as labels and bookkeeping:
they never change what a run computes. YAML is read with OmegaConf's safe loader; nothing is unpickled.
Reading a side is `analysis.sides`; comparing and printing them is this module.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from rlvr_sweep.analysis.sides import (  # noqa: F401  (re-exported: the sides, read)
    ABSENT, DIGEST, EXIT_BAD_INPUT, EXIT_OK, FIRST_PHASES, PROG, DiffError, Side, one_line, flatten, locate,
    resolve_side, shipped_arms,
)
from rlvr_sweep.config import Config, bookkeeping_keys


# ------------------------------------------------------------------------------------------------
# comparing


def _same(x, y) -> bool:
    if x is ABSENT or y is ABSENT:
        return x is y
    if isinstance(x, bool) != isinstance(y, bool):
        return False  # True == 1 in Python; not as settings
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(p, q) for p, q in zip(x, y))
    return x == y


def config_difference(a: dict, b: dict) -> list[tuple[str, object, object]]:
    """(key, value in a, value in b) for every dotted key whose values differ, sorted by key; a key one
    side lacks has `ABSENT` there. Nested dicts are flattened first."""
    a, b = flatten(a), flatten(b)
    rows = [(k, a.get(k, ABSENT), b.get(k, ABSENT)) for k in sorted(a.keys() | b.keys())]
    return [row for row in rows if not _same(row[1], row[2])]


BOOKKEEPING = frozenset(bookkeeping_keys(Config))


def is_bookkeeping(key: str) -> bool:
    """A setting declared `identity=False`, or a key inside one (`paper_arms.512`)."""
    parts = key.split(".")
    return any(".".join(parts[:n]) in BOOKKEEPING for n in range(1, len(parts) + 1))


# ------------------------------------------------------------------------------------------------
# the printed report


def show(value) -> str:
    if value is ABSENT:
        return str(ABSENT)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        try:
            plain = yaml.safe_load(value) == value and not value.startswith("<")
        except yaml.YAMLError:
            plain = False
        return value if plain else repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {show(v)}" for k, v in value.items()) + "}"
    return str(value)


def _digest_pair(x, y) -> tuple[str, str]:
    """sha256 digests (and commits) shortened to 12 hex digits, unless the two would then look equal."""
    short = [v[:12] if isinstance(v, str) and DIGEST.fullmatch(v) else show(v) for v in (x, y)]
    return (show(x), show(y)) if short[0] == short[1] else (short[0], short[1])


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """Rows of strings as aligned columns (indented two spaces); columns in `right` align right."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    pad = lambda i, c: c.rjust(widths[i]) if i in right else c.ljust(widths[i])  # noqa: E731
    return ["  " + "  ".join(pad(i, c) for i, c in enumerate(r)).rstrip() for r in [header, *rows]]


def _header(a: Side, b: Side) -> list[str]:
    lines = []
    for name, side in (("A", a), ("B", b)):
        ids = ", ".join(f"{k} {v}" for k, v in side.hashes.items() if k in ("run", "group"))
        lines.append(f"{name}: {side.label}" + (f"  ({ids})" if ids else ""))
        lines += [f"   note: {n}" for n in side.notes]
    ha, hb = a.hashes, b.hashes
    if a.is_run and b.is_run and ha.get("group") and ha.get("group") == hb.get("group"):
        lines.append(f"A and B are the same run (run {ha.get('run')})" if ha.get("run") == hb.get("run") else
                     f"A and B are seeds of one arm row: same group {ha['group']} (settings and inputs but the seed)")
    elif a.is_run and b.is_run and ha.get("settings") and ha.get("settings") == hb.get("settings"):
        lines.append(f"A and B have the same settings ({ha['settings']}) on other inputs: never pooled as seeds")
    return lines


def _settings_lines(a: Side, b: Side) -> list[str]:
    rows = config_difference(a.config, b.config)
    out = []
    for title, chosen, everything in (
            ("settings that differ", [r for r in rows if not is_bookkeeping(r[0])],
             [k for k in a.config.keys() | b.config.keys() if not is_bookkeeping(k)]),
            ("labels and bookkeeping that differ (identity=False: not what a run computes)",
             [r for r in rows if is_bookkeeping(r[0])], [])):
        if not chosen:
            out.append(f"{title}: none" + (f" (all {len(everything)} are equal)" if everything else ""))
            continue
        out += [""] if out else []
        out.append(f"{title}" + (f" ({len(chosen)} of {len(everything)})" if everything else "") + ":")
        out += table(["key", "A", "B"], [[k, show(x), show(y)] for k, x, y in chosen])
    return out


def _inputs_lines(a: Side, b: Side) -> list[str]:
    if not (a.is_run or b.is_run):
        return []
    rows = []
    both = a.is_run and b.is_run  # a model file's digest only when two models are compared
    for key, x, y in config_difference(a.inputs, b.inputs):
        if " file " in key and not both:
            continue
        x, y = _digest_pair(x, y)
        rows.append([key, x if a.is_run else "<not a run>", y if b.is_run else "<not a run>"])
    title = "identity inputs that differ (code: recorded, not part of the identity)"
    if not rows:
        names = [k for k in (a.inputs if a.is_run else b.inputs) if " " not in k]
        return [f"{title}: none (the same {', '.join([*names, 'code'])})"]
    return [f"{title}:", *table(["input", "A", "B"], rows)]


def _number(value, percent: bool) -> str:
    if value is ABSENT or not isinstance(value, (int, float)) or isinstance(value, bool):
        return show(value)
    if percent:
        return f"{100 * value:.1f}%"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


def _change(x, y, percent: bool) -> str:
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y))
    if not numbers or (isinstance(x, float) and math.isnan(x)) or (isinstance(y, float) and math.isnan(y)):
        return ""
    if percent:
        return f"{100 * (y - x):+.1f} pts"
    return f"{y - x:+,}" if isinstance(x, int) and isinstance(y, int) else f"{y - x:+,.1f}"


def _metrics_lines(a: Side, b: Side) -> list[str]:
    if not (a.is_run and b.is_run):
        return []
    phases = sorted(a.accuracy.keys() | b.accuracy.keys(),
                    key=lambda p: (FIRST_PHASES.index(p) if p in FIRST_PHASES else len(FIRST_PHASES), p))
    rows = []
    for phase in phases:
        pa, pb = a.accuracy.get(phase, {}), b.accuracy.get(phase, {})
        for bench in sorted(pa.keys() | pb.keys()):
            x, y = pa.get(bench, ABSENT), pb.get(bench, ABSENT)
            rows.append([f"accuracy {phase} {bench}", _number(x, True), _number(y, True), _change(x, y, True)])
    for key in [*a.totals, *(k for k in b.totals if k not in a.totals)]:
        x, y = a.totals.get(key, ABSENT), b.totals.get(key, ABSENT)
        rows.append([key, _number(x, False), _number(y, False), _change(x, y, False)])
    if not rows:
        return ["headline metrics: neither run recorded any"]
    return ["headline metrics:", *table(["metric", "A", "B", "B-A"], rows, right=(1, 2, 3))]


def diff_lines(a: Side, b: Side) -> list[str]:
    """The printed report: header, settings, labels and bookkeeping, identity inputs, metrics."""
    out = _header(a, b)
    for section in (_settings_lines(a, b), _inputs_lines(a, b), _metrics_lines(a, b)):
        if section:
            out += ["", *section]
    return out


# ------------------------------------------------------------------------------------------------
# command line


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage + error
        raise DiffError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="What two runs, arms or configs differ in: settings, identity "
                     "inputs (data, model, code) and, for two runs, headline metrics.")
    parser.add_argument("a", metavar="A", help="a run folder, an arm name (e.g. ra_flat) or a config file")
    parser.add_argument("b", metavar="B", help="the same, for the other side")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a Hydra override for every arm side (repeatable; e.g. profile=smoke, seed=101)")
    parser.add_argument("--a-override", action="append", default=[], metavar="KEY=VALUE",
                        help="a Hydra override for A only (A must be an arm)")
    parser.add_argument("--b-override", action="append", default=[], metavar="KEY=VALUE",
                        help="a Hydra override for B only (B must be an arm)")
    parser.add_argument("--root", default=None, metavar="DIR",
                        help="read relative paths under DIR; a run hash (8 hex digits) names the run under DIR")
    return parser


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
        root = Path(args.root) if args.root else None
        if root is not None and not root.is_dir():
            raise DiffError(f"--root {root} is not a folder")
        sides, note = _sides(args, root)
        if args.override and not any(s.kind == "arm" for s in sides):
            raise DiffError("--override applies to an arm side, and neither A nor B is an arm")
    except DiffError as err:
        print(f"analysis diff: error: {one_line(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SystemExit as done:  # --help
        return int(done.code or 0)
    if note:
        print(note)
    for line in diff_lines(*sides):
        print(line)
    return EXIT_OK


FALLBACK_PROFILE = "smoke"


def _sides(args, root) -> tuple[list, str | None]:
    """Both sides resolved, and a line saying under which profile the arm sides were composed when it was not
    named: the profile of the run an arm is compared with, else the default (paper) one, else, when an arm does
    not compose there (e.g. its `accumulate_questions` does not divide the paper's steps), `profile=smoke` for
    every arm side."""
    specs = (("A", args.a, args.a_override), ("B", args.b, args.b_override))
    kinds = {}
    for name, spec, _ in specs:
        try:
            kinds[name] = locate(spec, root)[0]
        except DiffError as err:
            raise DiffError(f"{name}: {err}") from err
    named = any(o.split("=", 1)[0].lstrip("+~") == "profile" for o in [*args.override, *args.a_override,
                                                                          *args.b_override])
    resolved = {}
    for name, spec, own in specs:
        if kinds[name] != "arm":
            resolved[name] = _resolve(name, spec, root, own)
    profiles = {s.config.get("profile.name") for s in resolved.values()} - {None}
    extra, note = [], None
    if not named and len(profiles) == 1 and len(resolved) < 2:
        (profile,) = profiles
        extra = [f"profile={profile}"]
        note = f"(the arm side is composed with profile={profile}, the profile of the run it is compared with)"

    def arms(more: list[str]) -> dict:
        return {name: _resolve(name, spec, root, [*args.override, *own, *more])
                for name, spec, own in specs if kinds[name] == "arm"}

    try:
        composed = arms(extra)
    except DiffError as first:
        if named or extra or not any(k == "arm" for k in kinds.values()):
            raise
        try:
            composed = arms([f"profile={FALLBACK_PROFILE}"])
        except DiffError:
            raise first from None
        note = (f"(arm sides composed with profile={FALLBACK_PROFILE}: under the default profile {one_line(first)}; "
                "name another with --override profile=...)")
    resolved.update(composed)
    return [resolved["A"], resolved["B"]], note


def _resolve(name: str, spec: str, root, overrides: list[str]):
    try:
        return resolve_side(spec, root=root, overrides=overrides)
    except DiffError as err:
        raise DiffError(f"{name}: {err}") from err

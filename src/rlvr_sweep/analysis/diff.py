"""`python -m rlvr_sweep.analysis diff A B`: what two runs, arms or configs differ in (CONVENTIONS #16).

A and B are each a run folder (a run.json passed as a file stands for its folder), an arm name
(`ra_flat`: `conf/arm/ra_flat.yaml` composed with Hydra as a run composes it, `+arm=ra_flat` on the
default config, plus the Hydra overrides given for that side) or a saved config file (a run's
`config.yaml`, or any YAML / JSON config). A bare name that names an arm is the arm, even when a folder
of that name exists (write `./ra_flat` for the folder); with `--root DIR`, a relative path is read under
DIR and a run hash (8 hex digits) names the run folder under DIR that carries it.

The report (`diff_lines`) names both sides, then lists the settings that differ, then, when either
side is a run, the inputs that make up a run's identity and differ (each data file's rows digest and
row count, the model's digest and each model file's, whether the data are the study's canonical files)
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
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlvr_sweep.config import Config, bookkeeping_keys, build_config, register_configs, unknown_keys
from rlvr_sweep.store import DONE_MARKER, RUN_JSON, walk

EXIT_OK, EXIT_BAD_INPUT = 0, 2
CONF_DIR = Path(__file__).resolve().parents[1] / "conf"  # the config tree inside the package, as sweep.cli has it
CONFIG_FILE = "config.yaml"
RUN_HASH = re.compile(r"[0-9a-f]{8}")
DIGEST = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a sha256, or a git commit
IGNORED_TOP = ("hydra",)  # Hydra's own node in a config composed with return_hydra_config
FIRST_PHASES = ("base", "trained")  # accuracy rows: these first, any other phase after
PROG = "python -m rlvr_sweep.analysis diff"


class DiffError(ValueError):
    """A side that cannot be read: no such path, arm or run hash, or a file that is not a config."""


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"

    __str__ = __repr__


ABSENT = _Absent()  # the value of a key one side does not have


@dataclass(frozen=True)
class Side:
    """One side of a diff. `config` is flat ({"train.lr": 5e-05, ...}); the rest is filled for runs."""

    label: str  # "run <folder>", "arm ra_flat profile=smoke", "config <file>"
    kind: str  # "run" | "arm" | "config"
    config: dict
    path: Path | None = None  # the run folder or config file
    hashes: dict = field(default_factory=dict)  # {"run", "group", "settings", "base"} from run.json
    inputs: dict = field(default_factory=dict)  # flat: {"train": sha256, "train rows": n, "model": sha256, ...}
    accuracy: dict = field(default_factory=dict)  # {phase: {benchmark: fraction correct}}
    totals: dict = field(default_factory=dict)  # {"wall_seconds": s, "totals.steps": n, ...}
    notes: tuple[str, ...] = ()

    @property
    def is_run(self) -> bool:
        return self.kind == "run"


# ------------------------------------------------------------------------------------------------
# reading a side


def flatten(tree: Mapping, prefix: str = "") -> dict:
    """{"train": {"lr": 1e-5}} -> {"train.lr": 1e-5}; lists stay values, an empty mapping adds no key."""
    out = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


def _read_mapping(path: Path):
    try:
        if path.suffix.lower() == ".json":
            return json.loads(path.read_text())
        return OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except (OSError, ValueError, yaml.YAMLError, OmegaConfBaseException) as err:
        raise DiffError(f"{path} is not a config: it cannot be read as YAML or JSON ({_one_line(err)})") from err


def _config_tree(tree, path: Path) -> tuple[dict, list[str]]:
    """The settings of a loaded file, and notes; refuses a file that is not a config of this schema."""
    if not isinstance(tree, Mapping):
        raise DiffError(f"{path} is not a config: it holds a {type(tree).__name__}, not a mapping of settings")
    if "defaults" in tree:
        raise DiffError(f"{path} is not a config but a Hydra preset with a defaults list: "
                        f"name the arm instead (e.g. {path.stem})")
    tree = {k: v for k, v in tree.items() if k not in IGNORED_TOP}
    declared = [f.name for f in dataclasses.fields(Config)]
    stray = sorted(str(k) for k in tree if k not in declared)
    if stray or not tree:
        what = f"its top-level keys {stray} are not settings" if stray else "it holds no settings"
        raise DiffError(f"{path} is not a config: {what} (a config has {', '.join(declared)})")
    unknown = unknown_keys(tree, Config)
    notes = [f"keys the config schema does not declare: {', '.join(unknown)}"] if unknown else []
    return tree, notes


def _config_side(path: Path, label: str) -> Side:
    tree, notes = _config_tree(_read_mapping(path), path)
    return Side(label=f"config {label}", kind="config", config=flatten(tree), path=path, notes=tuple(notes))


def _inputs(info: dict) -> dict:
    """A run's identity inputs (run.json `inputs`) and code version, flat, by what they are (not where)."""
    out = {}
    for name, part in sorted((info.get("inputs") or {}).items()):
        out[name] = part.get("sha256", ABSENT)
        if "rows" in part:
            out[f"{name} rows"] = part["rows"]
        for file, digest in sorted((part.get("files") or {}).items() if isinstance(part.get("files"), Mapping) else ()):
            out[f"{name} file {file}"] = digest
    if "model_digest" in info and "model" not in out:
        out["model"] = info["model_digest"]
    out["data canonical"] = info.get("data_canonical", ABSENT)
    code = info.get("code") or {}
    out["code commit"], out["code dirty"] = code.get("commit", ABSENT), code.get("dirty", ABSENT)
    return out


def _run_side(folder: Path, label: str) -> Side:
    if not (folder / CONFIG_FILE).is_file():
        raise DiffError(f"{folder} is not a run folder: it holds {RUN_JSON} but no {CONFIG_FILE}")
    try:
        info = json.loads((folder / RUN_JSON).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise DiffError(f"{folder / RUN_JSON} cannot be read: {_one_line(err)}") from err
    if not isinstance(info, Mapping):
        raise DiffError(f"{folder / RUN_JSON} is not a run record (not a JSON object)")
    tree, notes = _config_tree(_read_mapping(folder / CONFIG_FILE), folder / CONFIG_FILE)
    if not (folder / DONE_MARKER).is_file():
        notes.append(f"unfinished (no {DONE_MARKER} marker; status {info.get('status', 'unknown')})")
    hashes = {k: info[f"{k}_hash"] for k in ("run", "group", "settings", "base") if f"{k}_hash" in info}
    accuracy = {phase: dict(by_bench) for phase, by_bench in (info.get("accuracy") or {}).items()
                if isinstance(by_bench, Mapping)}
    totals = {"wall_seconds": info["wall_seconds"]} if "wall_seconds" in info else {}
    totals.update({f"totals.{k}": v for k, v in (info.get("totals") or {}).items()})
    return Side(label=f"run {label}", kind="run", config=flatten(tree), path=folder, hashes=hashes,
                inputs=_inputs(info), accuracy=accuracy, totals=totals, notes=tuple(notes))


def shipped_arms() -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / "arm").glob("*.yaml"))


def _arm_side(name: str, overrides: Sequence[str]) -> Side:
    """The config a run of `+arm=name` with `overrides` builds (composed, converted, range-checked)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException, MissingConfigException

    label = " ".join(["arm", name, *overrides])
    register_configs()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            raw = compose("config", overrides=[f"+arm={name}", *overrides])
        cfg = build_config(raw)
    except MissingConfigException as err:
        if f"'arm/{name}'" in str(err):
            raise DiffError(f"no run folder, config file or arm named {name!r} "
                            f"(arms: {', '.join(shipped_arms())})") from err
        raise DiffError(f"{label}: {_one_line(err).split(' Available options')[0]}") from err
    except (HydraException, OmegaConfBaseException, ValueError) as err:  # bad override, option, setting
        hint = (" (name a numbered option in quotes, e.g. horizon='1024')"
                if "group override must be a string" in str(err) else "")
        raise DiffError(f"{label}: {_one_line(err)}{hint}") from err
    return Side(label=label, kind="arm", config=flatten(dataclasses.asdict(cfg)))


def _by_run_hash(run_hash: str, root: Path) -> Path:
    found = [d for d in walk(root).runs if d.name.endswith(f"_{run_hash}")]
    if len(found) != 1:
        why = "no run folder" if not found else f"{len(found)} run folders ({', '.join(map(str, found))})"
        raise DiffError(f"run hash {run_hash}: {why} under {root} carries it")
    return found[0]


def locate(spec: str, root: Path | None = None) -> tuple[str, str | Path]:
    """What `spec` names, without reading it: ("arm", name), ("run", folder), ("config", file) or
    ("hash", run hash under `root`); raises DiffError for a path that does not exist."""
    path = Path(spec).expanduser()
    if root is not None and not path.is_absolute():
        path = Path(root) / path
    bare = "/" not in spec and not Path(spec).suffix and spec not in (".", "..")
    if bare and (CONF_DIR / "arm" / f"{spec}.yaml").is_file():
        return "arm", spec
    if path.is_dir():
        if not (path / RUN_JSON).is_file():
            raise DiffError(f"{path} is a folder but not a run folder (it holds no {RUN_JSON})")
        return "run", path
    if path.is_file():
        return ("run", path.parent) if path.name == RUN_JSON else ("config", path)
    if bare and root is not None and RUN_HASH.fullmatch(spec):
        return "hash", spec
    if bare:  # an arm of a user's own config search path (hydra.searchpath=[...]) is found by composing
        return "arm", spec
    raise DiffError(f"{path} does not exist")


def resolve_side(spec: str, *, root: Path | None = None, overrides: Sequence[str] = ()) -> Side:
    """A side from a run folder, an arm name (with Hydra `overrides`), a config file or, under `root`,
    a run hash (see the module).

    >>> resolve_side("ra_flat", overrides=["profile=smoke"]).config["optimizer_step.name"]
    'zero_grad'
    """
    kind, where = locate(spec, root)
    if overrides and kind != "arm":
        raise DiffError(f"{spec}: overrides apply only to an arm, and this names a {'run' if kind == 'hash' else kind}")
    if kind == "arm":
        return _arm_side(str(where), overrides)
    if kind == "hash":
        where = _by_run_hash(str(where), Path(root))
        return _run_side(where, str(where))
    return _run_side(where, str(where)) if kind == "run" else _config_side(where, str(where))


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
        sides = []
        for name, spec, own in (("A", args.a, args.a_override), ("B", args.b, args.b_override)):
            try:
                shared = args.override if locate(spec, root)[0] == "arm" else []
                sides.append(resolve_side(spec, root=root, overrides=[*shared, *own]))
            except DiffError as err:
                raise DiffError(f"{name}: {err}") from err
        if args.override and not any(s.kind == "arm" for s in sides):
            raise DiffError("--override applies to an arm side, and neither A nor B is an arm")
    except DiffError as err:
        print(f"analysis diff: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SystemExit as done:  # --help
        return int(done.code or 0)
    for line in diff_lines(*sides):
        print(line)
    return EXIT_OK

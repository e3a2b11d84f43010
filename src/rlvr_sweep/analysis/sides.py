"""The two sides of `analysis diff`: a run folder, an arm or a saved config, read into a `Side`.

`resolve_side(spec)` decides what `spec` names (`locate`) and reads it: a run folder's config.yaml,
its identity inputs (`inputs`), hashes, accuracy and totals from run.json; an arm composed with Hydra
as a run composes it; a saved YAML / JSON config checked against the schema. What is left out of a
side, and why, is in `analysis.diff`'s docstring. YAML is read with OmegaConf's safe loader; nothing is
unpickled.
"""


from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlvr_sweep.config import Config, build_config, register_configs, unknown_keys
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


def one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


def _read_mapping(path: Path):
    try:
        if path.suffix.lower() == ".json":
            return json.loads(path.read_text())
        return OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except (OSError, ValueError, yaml.YAMLError, OmegaConfBaseException) as err:
        raise DiffError(f"{path} is not a config: it cannot be read as YAML or JSON ({one_line(err)})") from err


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
        what = "module" if name == "plugins" else "file"  # a plugin's code by module: where it lies is a label
        for file, digest in sorted((part.get("files") or {}).items() if isinstance(part.get("files"), Mapping) else ()):
            out[f"{name} {what} {file}"] = digest
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
        raise DiffError(f"{folder / RUN_JSON} cannot be read: {one_line(err)}") from err
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
    """The package's arms and those of the plugins named in RLVR_SWEEP_PLUGINS (their `conf/arm/`)."""
    from rlvr_sweep.plugins import conf_dirs

    return sorted({p.stem for folder in (CONF_DIR, *conf_dirs()) for p in (folder / "arm").glob("*.yaml")})


def _arm_side(name: str, overrides: Sequence[str]) -> Side:
    """The config a run of `+arm=name` with `overrides` builds (composed, converted, range-checked)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException, MissingConfigException

    from rlvr_sweep.config import ConfigError
    from rlvr_sweep.plugins import environment_plugins, load_environment_plugins, resolve_plugins

    label = " ".join(["arm", name, *overrides])
    register_configs()
    try:
        load_environment_plugins()  # a plugin's options are config options (its arms: its conf/ folder)
    except ConfigError as err:
        raise DiffError(str(err)) from None
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            raw = compose("config", overrides=[f"+arm={name}", *overrides])
        cfg = build_config(raw)
        if cfg.plugins or environment_plugins():  # the plugins it uses, named in its `plugins` as its runs name them
            resolve_plugins(cfg)
    except MissingConfigException as err:
        if f"'arm/{name}'" in str(err):
            raise DiffError(f"no run folder, config file or arm named {name!r} "
                            f"(arms: {', '.join(shipped_arms())})") from err
        raise DiffError(f"{label}: {one_line(err).split(' Available options')[0]}") from err
    except (HydraException, OmegaConfBaseException, ValueError) as err:  # bad override, option, setting
        hint = (" (name a numbered option in quotes, e.g. horizon='1024')"
                if "group override must be a string" in str(err) else "")
        raise DiffError(f"{label}: {one_line(err)}{hint}") from err
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

"""PASS 1 on runs that loaded plugins: what is re-derived without their code, and, on request, with it.

A reader never runs code from a results folder unless its user asks: by default `verify` imports no plugin.
A run's run.json says which of its choices came from plugins (`inputs.plugins.options`: its reward, its
training task, the task of each benchmark it read out) and the plugins' code (each module's file and
sha256). Without the code, those parts are not re-derived and say so: a plugin reward's rollout rewards, a
plugin task's correctness (its answer extraction and grader) and the grades of its benchmarks; the pass is
then INCOMPLETE (its own exit code), never ok and never FAILED on their account. With `--plugins`
(`load`), exactly the modules run.json names are imported (from the files it recorded, else as its
`plugins` setting names them) and only when each module's sha256 is the recorded one; the stored rewards
and grades are then recomputed with the run's own reward (its settings from config.yaml, lengths scaled by
its profile), task and grader.

A run keeps the plugin code it ran in its folder (`plugins.kept`). With `--plugins-kept-in DIR`, a run under
DIR is re-derived with that kept copy instead (checked against run.json's digests, as any recorded code is,
before it is imported), so a run stays checkable after its plugin was edited; the copy is someone's code in
a results folder, imported only for the folders the user names so. Runs of several versions of one plugin
are re-derived in one process (`plugins.versions`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from rlvr_sweep.config import ConfigError, EstimatorConfig, RewardConfig, scaled_length
from rlvr_sweep.plugins import FILE_PREFIX, code_record, environment_plugins, import_plugins
from rlvr_sweep.plugins.files import folder_files, sha256_of
from rlvr_sweep.plugins.kept import KEPT, kept_record
from rlvr_sweep.plugins.loading import entry_folder
from rlvr_sweep.plugins.versions import module_names, switch_to
from rlvr_sweep.plugins.roots import in_library
from rlvr_sweep.data import MATH, TASKS, benchmark_task
from rlvr_sweep.reward import REWARDS, Answering, answering, shaped

OPT_IN = "--plugins"
KEPT_OPT_IN = "--plugins-kept-in"
MOVED_ON = ("the plugin code at hand is not the code the run recorded", "is not there any more")  # its code moved on


@dataclass(frozen=True)
class PluginParts:
    """The parts of a run a plugin decided (names as run.json records them)."""

    reward: str | None
    task: str | None  # the training task
    benchmarks: dict  # {benchmark: its task}
    estimator: str | None = None

    def __bool__(self) -> bool:
        return bool(self.reward or self.task or self.benchmarks)


def parts_of(info: dict) -> PluginParts:
    """What run.json says came from plugins (nothing for a run without plugins or an older run.json)."""
    plugins = (info.get("inputs") or {}).get("plugins") if isinstance(info.get("inputs"), dict) else None
    options = plugins.get("options") if isinstance(plugins, dict) else None
    options = {k: v for k, v in options.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(options, dict) else {}
    benchmarks = {k[len("eval.benchmarks."):]: v for k, v in options.items() if k.startswith("eval.benchmarks.")}
    return PluginParts(options.get("reward.name"), options.get("data.name"), benchmarks, options.get("estimator.name"))


@dataclass(frozen=True)
class Rules:
    """A run's plugin code, imported and matched: what re-derives its rewards and grades."""

    reward: object | None  # reward(texts, gold, tokens) -> (rewards, correct), bound as the run bound it
    train: Answering | None  # the training task's answer rules
    benchmarks: dict  # {benchmark: Answering}
    estimator: object | None = None  # the run's `credit.BoundEstimator`, bound as the run bound it


TRUSTED: list[Path] = []  # the folders named after --plugins (`trust`)
READ: list[Path] = []  # the results folder being read: never trusted unless named after --plugins itself
KEPT_IN: list[Path] = []  # the folders named after --plugins-kept-in: their runs' kept code may be imported


def trust(places, results=None, kept_in=()) -> None:
    """The folders (or files) the user named after `--plugins`: besides the environment's plugins, PYTHONPATH
    and installed libraries, the only places a run's recorded plugin code is imported from. `results`: the
    folder being verified, whose files are never plugin code unless a place named after --plugins holds it.
    `kept_in`: the folders named after `--plugins-kept-in`, whose runs are re-derived with the code they kept."""
    TRUSTED[:] = [Path(p).expanduser().resolve() for p in places or ()]
    READ[:] = [Path(results).expanduser().resolve()] if results is not None else []
    KEPT_IN[:] = [Path(p).expanduser().resolve() for p in kept_in or ()]


def kept_place(run_dir) -> Path | None:
    """The run's kept plugin code (`<run>/plugin_code`) when the run lies in a folder named after
    --plugins-kept-in, else None."""
    if run_dir is None:
        return None
    run = Path(run_dir).resolve()
    if not any(run == place or place in run.parents for place in KEPT_IN):
        return None
    return run / KEPT


def trusted_places() -> list[Path]:
    """Where plugin code may be imported from for a run: the places named after `--plugins`, the entries of
    RLVR_SWEEP_PLUGINS (a package's folder, a `.py` file), the folders on PYTHONPATH. Never a results folder,
    unless the user names it."""
    out = list(TRUSTED)
    for entry in environment_plugins():
        folder = entry_folder(entry)
        if entry.endswith(".py"):
            out.append(Path(entry).expanduser().resolve())
        elif folder is not None:
            out.append(folder.resolve())
    out += [Path(p).resolve() for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return out


def _inside(path: Path, places: list[Path]) -> bool:
    def under(place: Path) -> bool:
        return path == place or place in path.parents

    if any(under(place) for place in READ) and not any(under(place) or place in READ for place in TRUSTED):
        return False  # in the results folder being read, which the user did not name
    return in_library(path) or any(under(place) for place in places)


def recorded_code_problem(record: dict, kept: Path | None = None) -> str | None:
    """Why a run's recorded plugin code may not be imported, checked before any of it runs: every recorded file
    lies in a trusted place (`trusted_places`; for a record of kept code, in the run's `kept` folder alone), is
    there, and has its recorded sha256; a package's folder holds no file the record lacks. None when it may."""
    files, paths = record.get("files"), record.get("paths")
    if not isinstance(files, dict) or not isinstance(paths, dict) or not files or set(files) != set(paths) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in [*files.items(), *paths.items()]):
        return "its run.json's plugin record (files and paths) is missing or malformed: nothing imported"
    places = [kept] if kept is not None else trusted_places()
    for key, path in sorted(paths.items()):
        try:
            problem = _file_problem(key, path, files[key], places, kept is not None)
        except (OSError, ValueError) as err:  # a NUL in the path, an unreadable file: named, nothing imported
            problem = f"its plugin file {path!r} ({key}) cannot be read ({type(err).__name__}): nothing imported"
        if problem is not None:
            return problem
    for key, path in sorted(paths.items()):
        if Path(path).name == "__init__.py" and ":" not in key:
            extra = sorted(set(folder_files(Path(path).parent, key)) - set(files))
            if extra:
                return (f"the plugin code at hand is not the code the run recorded: {extra[0]} is new in "
                        f"{Path(path).parent}; nothing imported")
    return None


def _file_problem(key: str, path: str, recorded: str, places: list[Path], kept: bool = False) -> str | None:
    if ".." in Path(path).parts:
        return f"its plugin file {path} ({key}) is named through '..': nothing imported"
    file = Path(path).resolve()
    if kept and not any(place in file.parents for place in places):
        return f"its kept plugin file {path} ({key}) lies outside the run's {KEPT} folder: nothing imported"
    if not kept and not _inside(file, places):
        return (f"its plugin file {path} ({key}) lies outside the places named for plugins (after --plugins, in "
                "RLVR_SWEEP_PLUGINS or on PYTHONPATH): nothing imported; name its folder to re-derive with it")
    if not file.is_file():
        return f"its plugin file {path} ({key}) is not there any more: nothing imported"
    now = sha256_of(str(file))
    if now != recorded:
        return (f"the plugin code at hand is not the code the run recorded: {key} (recorded {recorded[:12]}, now "
                f"{now[:12]}); nothing imported")
    return None


def load(info: dict, config: dict, grader: str, run_dir=None) -> tuple[Rules | None, str | None]:
    """(rules, None) with the run's plugins imported and their code the recorded code, else (None, why). The
    recorded files are checked before anything is imported (`recorded_code_problem`), and `sys.path` is as it
    was afterwards. A run under a folder named after --plugins-kept-in is re-derived with the code it kept
    (`kept_place`)."""
    record = info["inputs"]["plugins"]
    kept = kept_place(run_dir)
    if kept is not None and isinstance(record, dict):
        record = kept_record(run_dir, record)
    named = config.get("plugins") if isinstance(config, dict) else None
    if not isinstance(named, list) or not named or not all(isinstance(e, str) and e for e in named):
        return None, (f"its config.yaml's plugins setting ({named!r}) names no plugin to import, though run.json "
                      "records plugin code: nothing imported")
    why = recorded_code_problem(record, kept) if isinstance(record, dict) else "its run.json's plugin record is malformed"
    if why is not None:
        return None, why if kept is None else f"{why} (its kept code, {kept})"
    modules = record.get("modules")
    if not isinstance(modules, list) or len(modules) != len(named) or not all(
            isinstance(m, str) and m in record["paths"] for m in modules):
        return None, ("its run.json's plugin record names no checked file for each entry of its plugins setting "
                      f"(modules {modules!r}): nothing imported")
    resolved = [_importable(module, record) for module in modules]
    if any(entry is None for entry, _ in resolved):
        return None, ("its run.json's plugin record places a module where its name does not put it: nothing "
                      "imported")
    switch_to(record)  # another version of the same modules, imported for an earlier run, put aside
    helpers = _helper_roots(record, modules) if kept is not None else {}
    try:
        with _on_path([*(root for _, root in resolved), *helpers.values()]):
            entries = [entry for entry, _ in resolved]
            import_plugins(entries)
            for helper in sorted(helpers):  # imported now, from the kept copy: never later, from the edited one
                importlib.import_module(helper)
            now = code_record(entries)
    except Exception as err:  # noqa: BLE001  (checked code that fails to import: named, never a traceback)
        return None, f"its plugins cannot be imported ({type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''})"
    recorded = record.get("files") or {}
    differ = sorted(m for m in set(recorded) | set(now["files"]) if recorded.get(m) != now["files"].get(m))
    if differ:
        shown = ", ".join(f"{m} (recorded {str(recorded.get(m))[:12]}, now {str(now['files'].get(m))[:12]})"
                          for m in differ[:3])
        return None, f"the plugin code at hand is not the code the run recorded: {shown}"
    parts = parts_of(info)
    try:
        reward = _bound_reward(parts.reward, config, grader, parts.task) if parts.reward else None
        train = answering(TASKS[parts.task].task, grader) if parts.task else None
        benchmarks = {b: answering(benchmark_task(b), grader) for b in parts.benchmarks}
        estimator = None
        if parts.estimator:
            from rlvr_sweep.credit import ESTIMATORS  # torch: only for a run whose plugin estimator is replayed

            estimator = bound_estimator(ESTIMATORS[parts.estimator], config.get("estimator"))
    except (ValueError, KeyError, TypeError) as err:
        return None, f"its plugins do not register what it used ({type(err).__name__}: {err})"
    return Rules(reward, train, benchmarks, estimator), None


def _helper_roots(record: dict, modules: list[str]) -> dict[str, str]:
    """{module: the folder to import it from} of the kept modules outside the entries' own packages (a helper a
    plugin imports from elsewhere on PYTHONPATH, perhaps lazily): each from its kept copy."""
    own = {m.split(".")[0] for m in modules}
    out = {}
    for name in sorted(module_names(record)):
        if name.split(".")[0] in own or name.startswith(FILE_PREFIX):
            continue
        file, parts = Path(record["paths"][name]), name.split(".")
        depth = len(parts) if file.name == "__init__.py" else len(parts) - 1
        out[name] = str(file.parents[depth])
    return out


def run_estimator(run_dir) -> tuple[object | None, str | None]:
    """(the run's plugin estimator, bound as the run bound it, None) or (None, why): for replaying its credit."""
    import json

    import yaml

    try:
        info = json.loads((Path(run_dir) / "run.json").read_text())
        config = yaml.safe_load((Path(run_dir) / "config.yaml").read_text()) or {}
    except (OSError, ValueError, yaml.YAMLError) as err:
        return None, f"its run.json or config.yaml cannot be read ({type(err).__name__})"
    if not isinstance(info, dict) or not isinstance(config, dict) or not parts_of(info).estimator:
        return None, "its run.json names no plugin estimator"
    grader = ((config.get("grader") or {}).get("name")) or "baseline"
    rules, why = load(info, config, grader, run_dir)
    return (rules.estimator, None) if rules is not None else (None, why)


def _group_config(schema, group: dict | None):
    """The run's config group as its schema's dataclass (keys the schema lacks dropped)."""
    fields = {f.name for f in dataclasses.fields(schema)}
    return schema(**{k: v for k, v in (group or {}).items() if k in fields})


def bound_estimator(option, group: dict | None):
    """An estimator option bound from the run's `estimator` group as the run bound it (`credit.BoundEstimator`)."""
    from rlvr_sweep.credit import bind_estimator

    return bind_estimator(option, _group_config(EstimatorConfig, group))


def _importable(module: str, record: dict) -> tuple[str | None, str | None]:
    """(the checked file or folder to import, or the module name with the folder to put on sys.path while it is
    imported): always the file the run recorded for the module, never the entry as config.yaml spells it.
    (None, None) when the file does not lie where the module's name puts it."""
    file = Path(record["paths"][module]).resolve()
    if module.startswith(FILE_PREFIX):
        return str(file), None
    parts = module.split(".")
    tail = [*parts, "__init__.py"] if file.name == "__init__.py" else [*parts[:-1], f"{parts[-1]}.py"]
    if len(file.parts) <= len(tail) or list(file.parts[-len(tail):]) != tail:
        return None, None
    root = file.parents[len(tail) - 1]
    if file.name == "__init__.py" and len(parts) == 1:
        return str(file.parent), None  # a package folder
    for depth in range(1, len(parts)):  # importing a.b.c runs a/__init__.py and a/b/__init__.py: checked too
        parent = ".".join(parts[:depth])
        where = record["paths"].get(parent)
        if where is None or Path(where).resolve() != root.joinpath(*parts[:depth], "__init__.py"):
            return None, None
    return module, str(root)  # where the run found the module: on sys.path while it is imported


@contextlib.contextmanager
def _on_path(roots: list[str | None]):
    """The roots first on sys.path while the plugins are imported; sys.path as it was afterwards."""
    before = list(sys.path)
    sys.path[:0] = [r for r in dict.fromkeys(roots) if r and r not in sys.path]
    try:
        yield
    finally:
        sys.path[:] = before


def _bound_reward(name: str, config: dict, grader: str, task_name: str | None):
    option = REWARDS[name]
    fields = {f.name for f in dataclasses.fields(RewardConfig)}
    settings = RewardConfig(**{k: v for k, v in (config.get("reward") or {}).items() if k in fields})
    scale = float((config.get("profile") or {}).get("length_scale", 1.0))
    fn = option.bind(settings, scale)
    answers = answering(TASKS[task_name].task if task_name else MATH, grader)
    grade, extract = answers.grade, answers.extract_reward

    cap = scaled_length(int((config.get("horizon") or {}).get("tokens", 512)), scale)
    buffer = None if settings.overlong_buffer is None else scaled_length(settings.overlong_buffer, scale)

    def reward(texts, gold, tokens):
        extra = {}
        if "tokens" in option.receives:
            extra["tokens"] = tokens
        if "extract" in option.receives:
            extra["extract"] = extract
        rewards, correct = fn(texts, gold, grade=grade, **extra)
        if buffer is None:
            return rewards, correct
        return shaped(rewards, [len(t) for t in tokens], cap, buffer, settings.overlong_penalty), correct

    return reward

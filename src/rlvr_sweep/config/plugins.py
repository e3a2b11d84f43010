"""A researcher's own code: named once, imported before anything is checked, and digested into the identity.

A plugin is a module (on `PYTHONPATH` or installed), a `.py` file or a package folder that registers
options (`@ESTIMATORS.register(...)`, `REWARDS`, `TASKS`, ...; docs/extending.md). It is named either in
the environment, once for every command (`RLVR_SWEEP_PLUGINS=my_pkg`, several separated by
`os.pathsep`), or per run in the `plugins` setting (an arm's YAML). The environment's plugins are imported
when a command starts, before Hydra composes anything (so their registered options are config options
and their `conf/` folders, found by `hydra_plugins/rlvr_sweep_launchers/searchpath.py`, hold arms); an
environment plugin that registered an option a run chooses joins that run's `plugins` setting
(`resolve_plugins`), so its config names it, its job processes and `verify --plugins` import it and its code
is in the run's identity, while a run that uses none of it (a paper arm) is untouched. `chosen_plugins(cfg)`
says which of a run's choices a plugin made (its estimator, reward, task, the tasks of its benchmarks), from
every registry made so far (`options.REGISTRIES`): a plugin's options can only be in a registry its import
made.

`import_plugins(entries)` imports each entry once per process and remembers the source files it loaded
from outside the package and the installed libraries: the entry's own file, every module first imported
while it was imported, and the modules its functions and classes come from (`_loaded_files`). Each file's
sha256 is taken right after the import, so it is the code that runs. `code_record(entries)` is those
files as a run's identity input (`store.identity`): one digest over (module, sha256) pairs, so a plugin
moved to another folder is the same code; run.json keeps each module's file and digest.

`plugin_frame(traceback)` tells an error raised in plugin code from a bug in rlvr_sweep: the innermost
frame of the project or a plugin (library frames skipped) that lies in a plugin's file.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import linecache
import os
import site
import sys
import sysconfig
import types
from dataclasses import dataclass
from pathlib import Path

from rlvr_sweep.config.options import REGISTRIES, Option
from rlvr_sweep.config.rules import ConfigError

ENV = "RLVR_SWEEP_PLUGINS"
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # src/rlvr_sweep
FILE_PREFIX = "rlvr_sweep_plugin_"  # the module name a `.py` file entry is imported under


def environment_plugins() -> list[str]:
    """The entries of `RLVR_SWEEP_PLUGINS` (module names, `.py` files or package folders), in order."""
    return [e.strip() for e in os.environ.get(ENV, "").split(os.pathsep) if e.strip()]


def load_environment_plugins() -> list[str]:
    """Import the environment's plugins (ConfigError naming a failed one); their names."""
    entries = environment_plugins()
    import_plugins(entries, where=f"{ENV}={os.environ.get(ENV, '')}")
    return entries


# ------------------------------------------------------------------------------------------------
# importing


@dataclass(frozen=True)
class Loaded:
    """What importing one entry loaded: {module name: (file, sha256)} of its source files."""

    module: str
    files: dict[str, tuple[str, str]]


_LOADED: dict[str, Loaded] = {}  # entry -> what it loaded, once per process


def import_plugins(entries: list[str], where: str | None = None) -> dict[str, Loaded]:
    """Import each entry (a module name, a `.py` file's path or a package folder's path) once per process;
    a failure is a ConfigError naming the entry and what it raised."""
    for entry in entries:
        if entry in _LOADED:
            continue
        before = set(sys.modules)
        try:
            name = _import(entry)
        except Exception as err:  # noqa: BLE001  (whatever the user's module raises, name it in one line)
            _forget(entry)
            frame = plugin_frame(err.__traceback__, extra=_entry_files(entry))
            at = f" at {frame}" if frame else ""
            raise ConfigError(f"{where or f'plugins={entries}'}: cannot import {entry!r} ({type(err).__name__}: "
                              f"{err}{at}); put its folder on PYTHONPATH, install it, or give the .py file's or "
                              "package folder's path") from None
        new = [m for m in set(sys.modules) - before]
        _LOADED[entry] = Loaded(name, _loaded_files(name, new))
    return {e: _LOADED[e] for e in entries}


def _import(entry: str) -> str:
    """Import one entry; its module name."""
    path = Path(entry).expanduser()
    if entry.endswith(".py"):
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path.resolve()}")
        return _import_file(f"{FILE_PREFIX}{path.stem}", path.resolve(), None)
    if os.sep in entry or (path.is_dir() and (path / "__init__.py").is_file()):
        if not (path / "__init__.py").is_file():
            raise FileNotFoundError(f"{path.resolve()} is not a package folder (no __init__.py)")
        folder = path.resolve()
        return _import_file(folder.name, folder / "__init__.py", [str(folder)])
    importlib.import_module(entry)
    return entry


def _import_file(name: str, file: Path, search: list[str] | None) -> str:
    known = sys.modules.get(name)
    if known is not None:
        if Path(getattr(known, "__file__", "") or "").resolve() == file:
            return name
        raise ImportError(f"a module named {name!r} is already imported from {getattr(known, '__file__', '?')}")
    spec = importlib.util.spec_from_file_location(name, file, submodule_search_locations=search)
    sys.modules[name] = module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return name


def _forget(entry: str) -> None:
    path = Path(entry)
    for name in (f"{FILE_PREFIX}{path.stem}", path.name):
        module = sys.modules.get(name)
        if module is not None and _is_user_file(getattr(module, "__file__", None)):
            sys.modules.pop(name, None)


def _entry_files(entry: str) -> set[str]:
    path = Path(entry)
    return {str(path.resolve())} if entry.endswith(".py") else set()


# ------------------------------------------------------------------------------------------------
# what a run chose from plugins


def chosen_plugins(cfg) -> dict[str, Option]:
    """{"<group>.<key>": option} of every choice of `cfg` a plugin registered (its `data.name` task among
    them), and {"eval.benchmarks.<name>": its task's option} for each benchmark a plugin task added."""
    out = {}
    for registry in REGISTRIES:
        group = getattr(cfg, registry.group, None)
        name = getattr(group, registry.key, None) if group is not None else None
        if isinstance(name, str) and name in registry and not registry[name].built_in:
            out[f"{registry.group}.{registry.key}"] = registry[name]
        for option in registry.plugins():
            for bench in getattr(option.task, "benchmarks", ()) if option.task is not None else ():
                if bench in cfg.eval.benchmarks:
                    out[f"eval.benchmarks.{bench}"] = option
    return out


def complete_params(cfg):
    """Each chosen option's `params` with its declared defaults filled in, so a run's config (and identity)
    says every parameter's value whether or not it was given."""
    for registry in REGISTRIES:
        group_cfg = getattr(cfg, registry.group, None)
        name = getattr(group_cfg, registry.key, None) if group_cfg is not None else None
        if isinstance(name, str) and name in registry and registry[name].params and hasattr(group_cfg, "params"):
            group_cfg.params = {**registry[name].defaults, **(group_cfg.params or {})}
    return cfg


def resolve_plugins(cfg):
    """The environment's and the config's plugins imported; those of the environment whose options the run
    chooses put first in its `plugins` setting (each once); each chosen option's parameters completed."""
    env = environment_plugins()
    import_plugins(list(dict.fromkeys([*env, *cfg.plugins])))
    if env:
        used = [entry_of(option.fn.__module__, env) for option in chosen_plugins(cfg).values()]
        cfg.plugins = list(dict.fromkeys([*(e for e in env if e in used), *cfg.plugins]))
    return complete_params(cfg)


# ------------------------------------------------------------------------------------------------
# which files are plugin code


def _library_roots() -> tuple[str, ...]:
    roots = {str(PACKAGE_DIR), str(PACKAGE_DIR.parent / "hydra_plugins")}
    for scheme_paths in (sysconfig.get_paths(), sysconfig.get_paths(vars={"base": sys.base_prefix,
                                                                          "platbase": sys.base_exec_prefix})):
        roots |= {scheme_paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in scheme_paths}
    try:
        roots |= set(site.getsitepackages()) | {site.getusersitepackages()}
    except AttributeError:  # a virtualenv's old site module
        pass
    return tuple(str(Path(r).resolve()) + os.sep for r in roots if r)


_LIBRARY_ROOTS = _library_roots()


def _is_user_file(file) -> bool:
    """A source file that is neither the package's nor the standard library's nor an installed library's."""
    if not file or not str(file).endswith(".py"):
        return False
    resolved = str(Path(file).resolve())
    return not resolved.startswith(_LIBRARY_ROOTS)


def _module_file(name: str) -> str | None:
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None) if module is not None else None
    if not isinstance(file, str) or not os.path.isabs(file) or not os.path.isfile(file):
        return None  # a module made at run time (torch's op namespaces say "_ops.py")
    return str(Path(file).resolve()) if _is_user_file(file) else None


def _referenced_modules(module: types.ModuleType) -> set[str]:
    """Modules a module's namespace refers to: imported modules, and the home of its functions and classes."""
    out = set()
    for value in list(vars(module).values()):
        if isinstance(value, types.ModuleType):
            out.add(value.__name__)
        elif isinstance(value, (types.FunctionType, type)):
            out.add(getattr(value, "__module__", None) or "")
        elif callable(value) and hasattr(value, "__wrapped__"):
            out.add(getattr(value.__wrapped__, "__module__", None) or "")
    return {m for m in out if m}


def _loaded_files(name: str, new: list[str]) -> dict[str, tuple[str, str]]:
    """{module: (file, sha256)} of the entry's module, the modules first imported with it and those its
    namespace refers to (followed through every user module found), user files only."""
    todo, seen, files = [name, *sorted(new)], set(), {}
    while todo:
        module_name = todo.pop()
        if module_name in seen:
            continue
        seen.add(module_name)
        file = _module_file(module_name)
        if file is None:
            continue
        files[module_name] = (file, _file_sha256(file))
        todo.extend(_referenced_modules(sys.modules[module_name]) - seen)
    return dict(sorted(files.items()))


def _file_sha256(file: str) -> str:
    return hashlib.sha256(Path(file).read_bytes()).hexdigest()


def entry_of(module: str, entries: list[str]) -> str | None:
    """The entry (of `entries`, imported) whose import loaded `module`, or None."""
    return next((e for e in entries if e in _LOADED and module in _LOADED[e].files), None)


def plugin_files() -> dict[str, str]:
    """{file: module} of every plugin file imported in this process."""
    return {file: module for loaded in _LOADED.values() for module, (file, _) in loaded.files.items()}


# ------------------------------------------------------------------------------------------------
# the identity input


def code_record(entries: list[str]) -> dict | None:
    """The plugins' code as a run's identity input, or None without plugins:
    {"sha256": digest of the (module, file sha256) pairs, "files": {module: sha256}, "paths": {module: file},
    "entries": the plugins setting, "modules": the module each entry is}. Imports the entries first (once per
    process)."""
    if not entries:
        return None
    loaded = import_plugins(entries)
    files = {}
    for entry in entries:
        files.update(loaded[entry].files)
    digests = {module: sha for module, (_, sha) in sorted(files.items())}
    combined = hashlib.sha256("".join(f"{m}\0{sha}\n" for m, sha in digests.items()).encode()).hexdigest()
    return {"sha256": combined, "files": digests, "paths": {m: f for m, (f, _) in sorted(files.items())},
            "entries": list(entries), "modules": [loaded[e].module for e in entries]}


# ------------------------------------------------------------------------------------------------
# errors raised in plugin code


@dataclass(frozen=True)
class PluginFrame:
    module: str
    function: str
    file: str
    line: int
    source: str

    def __str__(self) -> str:
        code = f": {self.source}" if self.source else ""
        return f"{self.module}.{self.function} ({self.file}:{self.line}{code})"


def plugin_frame(tb, extra: set[str] = frozenset()) -> PluginFrame | None:
    """The plugin frame an error came from: walking from the innermost frame out, library frames skipped,
    the first frame of the project or a plugin, when it lies in a plugin file (`extra`: files of a plugin
    not yet recorded, one being imported). None when the error is rlvr_sweep's own."""
    files = {**plugin_files(), **{f: Path(f).stem for f in extra}}
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    for frame, line in reversed(frames):
        file = str(Path(frame.f_code.co_filename).resolve())
        if file in files:
            return PluginFrame(files[file], frame.f_code.co_name, file, line,
                               linecache.getline(file, line).strip())
        if file.startswith(str(PACKAGE_DIR) + os.sep):
            return None
        if _is_user_file(file):  # user code that is not a recorded plugin (a test, a notebook): not ours to name
            return None
    return None


class PluginError(RuntimeError):
    """An exception raised inside a plugin's code: names the plugin's module, function and line."""

    def __init__(self, err: BaseException, frame: PluginFrame):
        self.frame = frame
        super().__init__(f"plugin {frame.module} raised {type(err).__name__}: {err} in {frame}")


# ------------------------------------------------------------------------------------------------
# config folders shipped with plugins


def conf_dirs(entries: list[str] | None = None) -> list[Path]:
    """The `conf/` folder beside each plugin (the environment's by default): a `.py` file's folder's, a
    package's own; found without importing the plugin (Hydra's search path, `hydra_plugins`)."""
    out = []
    for entry in environment_plugins() if entries is None else entries:
        folder = _entry_folder(entry)
        if folder is not None and (folder / "conf").is_dir():
            out.append((folder / "conf").resolve())
    return list(dict.fromkeys(out))


def _entry_folder(entry: str) -> Path | None:
    path = Path(entry).expanduser()
    if entry.endswith(".py"):
        return path.parent
    if os.sep in entry or path.is_dir():
        return path
    try:
        spec = importlib.util.find_spec(entry)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(spec.origin).parent if spec.origin else None

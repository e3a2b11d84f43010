"""Importing plugins: the environment's (`RLVR_SWEEP_PLUGINS`) and a run's (`plugins`), each entry once per
process, its files recorded as they were imported; the code record a run's identity holds; the `conf/`
folder beside a plugin (Hydra's search path).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

from rlvr_sweep.config.rules import ConfigError
from rlvr_sweep.plugins.errors import plugin_frame
from rlvr_sweep.plugins.compiled import COMPILED, IMPORTING, PLUGIN_PLACES, file_from_spec, install
from rlvr_sweep.plugins.files import loaded_files
from rlvr_sweep.plugins.roots import is_user_file
from rlvr_sweep.plugins.loaded import LOADED, Loaded

ENV = "RLVR_SWEEP_PLUGINS"
FILE_PREFIX = "rlvr_sweep_plugin_"  # the module name a `.py` file entry is imported under


def environment_plugins() -> list[str]:
    """The entries of `RLVR_SWEEP_PLUGINS` (module names, `.py` files or package folders), in order."""
    return [e.strip() for e in os.environ.get(ENV, "").split(os.pathsep) if e.strip()]


def load_environment_plugins() -> list[str]:
    """Import the environment's plugins (ConfigError naming a failed one); their names."""
    entries = environment_plugins()
    import_plugins(entries, where=f"{ENV}={os.environ.get(ENV, '')}")
    return entries


def import_plugins(entries: list[str], where: str | None = None) -> dict[str, Loaded]:
    """Import each entry (a module name, a `.py` file's path or a package folder's path) once per process;
    a failure is a ConfigError naming the entry and what it raised. User modules are compiled from the bytes
    their digests are of from here on (`compiled.install`)."""
    install()
    for entry in entries:
        if entry in LOADED:
            continue
        before, registered = set(sys.modules), _registered()
        IMPORTING.append(_importing(entry))
        try:
            name = _import(entry)
        except Exception as err:  # noqa: BLE001  (whatever the user's module raises, name it in one line)
            _forget(entry)
            frame = plugin_frame(err.__traceback__, extra=_entry_files(entry))
            at = f" at {frame}" if frame else ""
            raise ConfigError(f"{where or f'plugins={entries}'}: cannot import {entry!r} ({type(err).__name__}: "
                              f"{err}{at}); put its folder on PYTHONPATH, install it, or give the .py file's or "
                              "package folder's path") from None
        finally:
            place = IMPORTING.pop()[0]
        if place != "\0":
            PLUGIN_PLACES.append(place)
        new = [m for m in set(sys.modules) - before]
        homes = {getattr(fn, "__module__", None) for key, fn in _registered().items() if registered.get(key) is not fn}
        LOADED[entry] = Loaded(name, loaded_files(name, [*new, *sorted(h for h in homes if h)]))
    return {e: LOADED[e] for e in entries}


def _importing(entry: str) -> tuple[str, str | None]:
    """(the file or folder whose frames are the entry's code while it is imported, its module name if it is one)."""
    path = Path(entry).expanduser()
    if entry.endswith(".py"):
        return os.path.realpath(path), None
    if os.sep in entry or path.is_dir():
        return os.path.realpath(path) + os.sep, None
    folder = entry_folder(entry)
    return (os.path.realpath(folder) + os.sep if folder is not None else "\0"), entry.split(".")[0]


def _registered() -> dict:
    """{(registry, option name): its function} of every option registered so far: the options an entry's
    import registers are its, and the modules their functions come from are its code, wherever they live."""
    from rlvr_sweep.config.options import REGISTRIES

    return {(registry.what, option.name): option.fn for registry in REGISTRIES for option in registry.options()}


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
    spec = file_from_spec(name, file, search)
    sys.modules[name] = module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return name


def _forget(entry: str) -> None:
    path = Path(entry)
    for name in (f"{FILE_PREFIX}{path.stem}", path.name):
        module = sys.modules.get(name)
        if module is not None and is_user_file(getattr(module, "__file__", None)):
            sys.modules.pop(name, None)


def _entry_files(entry: str) -> set[str]:
    path = Path(entry)
    return {str(path.resolve())} if entry.endswith(".py") else set()


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


class PluginCodeChanged(RuntimeError):
    """Plugin code ran that the run's identity does not hold."""


def compiled_now() -> set[str]:
    """The user source files compiled in this process so far (`unrecorded_code`'s `before`)."""
    return set(COMPILED)


def unrecorded_code(record: dict | None, before: set[str]) -> list[str]:
    """What of the user code compiled since `before` (`compiled_now()` at the run's start) the run's plugin
    record (`code_record`) does not hold, or holds other bytes of: a module imported during the run by a name
    the record could not follow (`importlib.import_module(computed)`), or a recorded file edited before its
    first import. Empty when the code that ran is the code recorded."""
    if record is None:
        return []
    paths = {str(Path(f).resolve()): key for key, f in (record.get("paths") or {}).items()}
    shas = record.get("files") or {}
    out = []
    for file, sha in sorted(COMPILED.items()):
        key = paths.get(file)
        if key is not None and shas.get(key) != sha:
            out.append(f"{key} ({file}) ran as other bytes than its recorded sha256 (edited before it was imported)")
        elif key is None and file not in before:
            out.append(f"{file} was imported during the run by a name its plugin's code does not spell out; "
                       "import it at the plugin's top level or with a plain import statement, or keep it in the "
                       "plugin's package folder")
    return out


def conf_dirs(entries: list[str] | None = None) -> list[Path]:
    """The `conf/` folder beside each plugin (the environment's by default): a `.py` file's folder's, a
    package's own; found without importing the plugin (Hydra's search path, `hydra_plugins`)."""
    out = []
    for entry in environment_plugins() if entries is None else entries:
        folder = entry_folder(entry)
        if folder is not None and (folder / "conf").is_dir():
            out.append((folder / "conf").resolve())
    return list(dict.fromkeys(out))


def entry_folder(entry: str) -> Path | None:
    """The folder of an entry: a `.py` file's, a package folder itself, or a module name's (its package's folder,
    else its file's), found by the path finder part by part without running any of it (`importlib.util.find_spec`
    would import a dotted name's parent packages, through their bytecode caches, before they are recorded)."""
    path = Path(entry).expanduser()
    if entry.endswith(".py"):
        return path.parent
    if os.sep in entry or path.is_dir():
        return path
    spec, search = None, None
    try:
        for part in entry.split("."):
            spec = importlib.machinery.PathFinder.find_spec(part, search)
            if spec is None:
                return None
            search = list(spec.submodule_search_locations or [])
    except (ImportError, ValueError):
        return None
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(spec.origin).parent if spec.origin else None

"""Importing plugins: the environment's (`RLVR_SWEEP_PLUGINS`) and a run's (`plugins`), each entry once per
process, its files recorded as they were imported; the code record a run's identity holds; the `conf/`
folder beside a plugin (Hydra's search path).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path

from rlvr_sweep.config.rules import ConfigError
from rlvr_sweep.plugins.errors import plugin_frame
from rlvr_sweep.plugins.files import is_user_file, loaded_files
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
    a failure is a ConfigError naming the entry and what it raised."""
    for entry in entries:
        if entry in LOADED:
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
        LOADED[entry] = Loaded(name, loaded_files(name, new))
    return {e: LOADED[e] for e in entries}


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

"""The code that ran is the code hashed: a user module (neither the package's, nor the standard library's,
nor an installed library's: a plugin and what it imports) is compiled from the bytes whose sha256 is
recorded, never from a bytecode cache.

Python reuses a module's `__pycache__/*.pyc` when the source's size and modification time match what the
cache recorded, so two versions of a file with the same size and second (`tar x`, `cp -p`, `rsync -t`) run
the old code while the new source is the one read. `install()` puts `UserSourceFinder` on `sys.meta_path`
just before the standard path finder (finders placed earlier, such as pytest's assertion rewriting, keep
precedence): for an import plugin code asks for (while an entry is imported, or from a frame in a plugin's
file), it finds a user module as the path finder does and loads it with `HashedSourceLoader`, which reads the
source once, notes its sha256 in `COMPILED` and compiles those very bytes (no cache read or written). Other
imports (a library's lazy imports of its own modules, an editable install's included) are left as they were.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import os
import sys
from pathlib import Path

from rlvr_sweep.plugins.loaded import plugin_files
from rlvr_sweep.plugins.roots import is_user_file

COMPILED: dict[str, str] = {}  # resolved source file -> sha256 of the bytes compiled from it, in this process
COMPILED_BYTES: dict[str, bytes] = {}  # resolved source file -> those bytes (what a run keeps: `kept`)


class HashedSourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles the source bytes it hashes; never reads or writes a bytecode cache."""

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        data = self.get_data(path)
        resolved = str(Path(path).resolve())
        COMPILED[resolved], COMPILED_BYTES[resolved] = hashlib.sha256(data).hexdigest(), bytes(data)
        return self.source_to_code(data, path)


IMPORTING: list[tuple[str, str | None]] = []  # (file or folder, module name) of the entries being imported
PLUGIN_PLACES: list[str] = []  # the files and folders (ending in a separator) of the entries imported so far


def _from_plugin_code(module: str) -> bool:
    """Whether the import under way was asked for by plugin code: an entry being imported (by its name), or an
    import made from a frame in a plugin's file or an entry's folder (not a library's lazy import of its own
    modules, nor the user's other code)."""
    if any(module == name or module.startswith(f"{name}.") for _, name in IMPORTING if name):
        return True
    files, prefixes = plugin_files(), tuple(prefix for prefix, _ in IMPORTING)
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name in files:
            return True
        real = os.path.realpath(name)
        if real in files or (prefixes and real.startswith(prefixes)):
            return True
        frame = frame.f_back
    return False


class UserSourceFinder(importlib.abc.MetaPathFinder):
    """The standard path finder's spec for a user module that plugin code imports, loaded by
    `HashedSourceLoader`; any other import is left to the finders after it."""

    def find_spec(self, name, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader or not is_user_file(spec.origin):
            return None
        origin = os.path.realpath(spec.origin)
        if not (origin.startswith(tuple(PLUGIN_PLACES)) or _from_plugin_code(name)):
            return None  # neither a plugin's own file nor imported by plugin code
        spec.loader = HashedSourceLoader(spec.name, spec.origin)
        return spec


def install() -> None:
    """Put `UserSourceFinder` just before the standard path finder (once per process)."""
    if any(isinstance(f, UserSourceFinder) for f in sys.meta_path):
        return
    at = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder), len(sys.meta_path))
    sys.meta_path.insert(at, UserSourceFinder())


def file_from_spec(name: str, file: Path, search: list[str] | None):
    """`importlib.util.spec_from_file_location` with the hashing loader (a `.py` file or package folder entry)."""
    import importlib.util

    return importlib.util.spec_from_file_location(name, file, loader=HashedSourceLoader(name, str(file)),
                                                  submodule_search_locations=search)

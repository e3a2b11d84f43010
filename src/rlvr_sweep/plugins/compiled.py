"""The code that ran is the code hashed: a user module (neither the package's, nor the standard library's,
nor an installed library's: a plugin and what it imports) is compiled from the bytes whose sha256 is
recorded, never from a bytecode cache.

Python reuses a module's `__pycache__/*.pyc` when the source's size and modification time match what the
cache recorded, so two versions of a file with the same size and second (`tar x`, `cp -p`, `rsync -t`) run
the old code while the new source is the one read. `install()` puts `UserSourceFinder` on `sys.meta_path`
just before the standard path finder (finders placed earlier, such as pytest's assertion rewriting, keep
precedence): it finds user modules as the path finder does and loads them with `HashedSourceLoader`, which
reads the source once, notes its sha256 in `COMPILED` and compiles those very bytes (no cache read or written).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import sys
from pathlib import Path

from rlvr_sweep.plugins.roots import is_user_file

COMPILED: dict[str, str] = {}  # resolved source file -> sha256 of the bytes compiled from it, in this process


class HashedSourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles the source bytes it hashes; never reads or writes a bytecode cache."""

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        data = self.get_data(path)
        COMPILED[str(Path(path).resolve())] = hashlib.sha256(data).hexdigest()
        return self.source_to_code(data, path)


class UserSourceFinder(importlib.abc.MetaPathFinder):
    """The standard path finder's spec for a user module, loaded by `HashedSourceLoader`."""

    def find_spec(self, name, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader or not is_user_file(spec.origin):
            return None
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

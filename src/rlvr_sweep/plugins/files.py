"""Which source files are plugin code: neither the package's, nor the standard library's, nor an installed
library's; and the files one plugin's import brought in (its module, the modules first imported with it, and
those its namespace refers to), each with the sha256 of its bytes.
"""

from __future__ import annotations

import hashlib
import os
import site
import sys
import sysconfig
import types
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # src/rlvr_sweep


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


def is_user_file(file) -> bool:
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
    return str(Path(file).resolve()) if is_user_file(file) else None


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


def loaded_files(name: str, new: list[str]) -> dict[str, tuple[str, str]]:
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

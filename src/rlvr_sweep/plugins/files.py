"""Which files are a plugin's code, each with the sha256 of its bytes (docs/extending.md, "Identity").

A plugin entry's code is: the single file of a `.py` entry; every file under a package's folder (its
modules, imported or not, and its data files; not `conf/`, which Hydra reads and the run's config records,
nor `__pycache__`, hidden entries or README / LICENSE / CHANGELOG files); for a module installed as a
distribution (not from a user folder), every file its RECORD lists in the library folder (bytecode and its
`.dist-info` metadata aside); and, followed through
each user module found, the user modules it imports (a module of an installed distribution, an editable
install included, is a library's unless it is the entry's own): statically (every `import` and `from ... import` in
its source, inside functions too, so a lazy import counts before it runs), during its import, or as the home
of a function or class its namespace holds or an option it registers (`loading.import_plugins`). A module's sha256 is of the bytes it was compiled from
(`compiled.COMPILED`), or of the file as read when it has not been compiled here yet.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.machinery
import os
import sys
import types
from pathlib import Path

from rlvr_sweep.plugins.compiled import COMPILED
from rlvr_sweep.plugins.roots import PACKAGE_DIR, is_user_file

SKIPPED_DIRS = {"conf", "__pycache__"}  # under a plugin's folder: Hydra's config, bytecode
SKIPPED_PREFIXES = ("README", "LICENSE", "CHANGELOG")  # documentation beside the code


def sha256_of(file: str) -> str:
    """The sha256 of the bytes `file` was compiled from in this process, else of its bytes now."""
    resolved = str(Path(file).resolve())
    return COMPILED.get(resolved) or hashlib.sha256(Path(resolved).read_bytes()).hexdigest()


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


def static_imports(file: str, module: str) -> set[str]:
    """Every module name `file` (the source of `module`) imports anywhere, relative imports resolved; for
    `from a import b` both `a` and `a.b` (b may be a submodule)."""
    try:
        tree = ast.parse(Path(file).read_bytes(), filename=file)
    except (SyntaxError, ValueError, OSError):
        return set()
    package = module if Path(file).name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                base_parts = parts[: len(parts) - node.level + 1] if node.level <= len(parts) else []
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            if base:
                out.add(base)
                out |= {f"{base}.{a.name}" for a in node.names if a.name != "*"}
    return out


def _find_file(name: str) -> str | None:
    """The user source file of module `name`, found without importing anything new (None: not a user module)."""
    known = _module_file(name)
    if known is not None or name in sys.modules:
        return known
    parts = name.split(".")
    parent = sys.modules.get(parts[0])
    try:
        spec = importlib.machinery.PathFinder.find_spec(parts[0]) if parent is None else None
    except (ImportError, ValueError):
        return None
    locations = list(getattr(parent, "__path__", None) or (spec.submodule_search_locations if spec else None) or [])
    origin = getattr(parent, "__file__", None) if parent is not None else (spec.origin if spec else None)
    for part in parts[1:]:
        found = None
        for folder in locations:
            for candidate in (Path(folder) / part / "__init__.py", Path(folder) / f"{part}.py"):
                if candidate.is_file():
                    found = candidate
                    break
            if found:
                break
        if found is None:
            return None
        origin, locations = str(found), [str(found.parent)] if found.name == "__init__.py" else []
    return str(Path(origin).resolve()) if origin and is_user_file(origin) else None


@functools.lru_cache(maxsize=1)
def _installed_top_levels() -> frozenset[str]:
    """The top-level module names of every installed distribution (editable installs included)."""
    from importlib import metadata

    try:
        return frozenset(metadata.packages_distributions())
    except Exception:  # noqa: BLE001  (a broken installation's metadata: no name is taken for a library)
        return frozenset()


def loaded_files(name: str, new: list[str]) -> dict[str, tuple[str, str]]:
    """{key: (file, sha256)} of one entry's code (the module's docstring): module names for modules, and
    `<package>:<path>` for the other files of a package's folder, `<distribution>==<version>:<path>` for an
    installed distribution's."""
    todo, seen, files = [name, *sorted(new)], set(), {}
    own, libraries = name.split(".")[0], _installed_top_levels()
    while todo:
        module_name = todo.pop()
        if module_name in seen:
            continue
        seen.add(module_name)
        if module_name.split(".")[0] in libraries and module_name.split(".")[0] != own:
            continue  # an installed distribution's (an editable library's too): a library, not the plugin's code
        file = _module_file(module_name) if module_name in sys.modules else _find_file(module_name)
        if file is None:
            continue
        files[module_name] = (file, sha256_of(file))
        if module_name in sys.modules:
            todo.extend(_referenced_modules(sys.modules[module_name]) - seen)
        todo.extend(static_imports(file, module_name) - seen)
    files.update(_folder_files(name))
    files.update(_distribution_files(name))
    return dict(sorted(files.items()))


def _folder_files(name: str) -> dict[str, tuple[str, str]]:
    """Every file under a package entry's folder (the module docstring's exceptions aside)."""
    init = _module_file(name)
    if init is None or Path(init).name != "__init__.py":
        return {}
    return folder_files(Path(init).parent, name)


def folder_files(folder: Path, name: str) -> dict[str, tuple[str, str]]:
    """{key: (file, sha256)} of every file under package `name`'s `folder` (found without importing it),
    symlinked folders followed (each real folder once). A `.py` file is code whatever its name (a README or
    LICENSE prefix skips documentation only); a module shadowed by a package of the same name (`a.py` beside
    `a/__init__.py`) is kept under its path (`<package>:a.py`), never dropped."""
    out, seen = {}, set()
    for root, dirs, names in os.walk(folder, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:  # a link back up the tree, or a second link to one folder
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (d in SKIPPED_DIRS and
                                                                            (d == "__pycache__" or Path(root) == folder)))
        for file_name in sorted(names):
            code = file_name.endswith(".py")
            if file_name.startswith(".") or file_name.endswith(".pyc") or (not code and file_name.startswith(SKIPPED_PREFIXES)):
                continue
            path = Path(root) / file_name
            if not path.is_file():
                continue  # a dangling link
            rel = path.relative_to(folder)
            key = f"{name}:{rel.as_posix()}"
            shadowed = file_name != "__init__.py" and (path.parent / path.stem / "__init__.py").is_file()
            if code and not shadowed:  # the package `a/` is what `import pkg.a` finds, as Python's finder does
                key = ".".join([name, *rel.parent.parts, *([] if file_name == "__init__.py" else [path.stem])])
            out[key] = (str(path.resolve()), sha256_of(str(path)))
    return out


def _distribution_files(name: str) -> dict[str, tuple[str, str]]:
    """An entry installed as a distribution (its files neither the package's nor a user's): every file its
    RECORD lists in the library folder, bytecode and the installer's `.dist-info` metadata aside (they hold
    the install's own paths, so a moved install would otherwise be other code)."""
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None) if module is not None else None
    if not isinstance(file, str) or is_user_file(file) or str(Path(file).resolve()).startswith(str(PACKAGE_DIR)):
        return {}
    from importlib import metadata

    out = {}
    for dist_name in metadata.packages_distributions().get(name.split(".")[0], []):
        dist = metadata.distribution(dist_name)
        for entry in dist.files or []:
            if entry.suffix == ".pyc" or "__pycache__" in entry.parts or (entry.parts and (
                    entry.parts[0].endswith(".dist-info") or entry.parts[0] == "..")):
                continue  # bytecode, the installer's metadata (its paths and tools), scripts outside the library
            path = Path(dist.locate_file(entry))
            if path.is_file():
                out[f"{dist_name}=={dist.version}:{entry.as_posix()}"] = (str(path.resolve()), sha256_of(str(path)))
    return out

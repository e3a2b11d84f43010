"""Where code comes from: the package's own folder, the standard library's and installed libraries' folders,
and everything else, which is a user's (a plugin and the modules it imports)."""

from __future__ import annotations

import os
import site
import sys
import sysconfig
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


def in_library(path) -> bool:
    """`path` lies in the package's folder, the standard library's or an installed library's."""
    return str(Path(path).resolve()).startswith(_LIBRARY_ROOTS)

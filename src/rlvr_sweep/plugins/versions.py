"""Several versions of one plugin in one process (`verify` re-deriving runs whose plugin was edited between
them, each with the code it kept): a version is imported only once the modules of another version, under the
same names, are put aside.

Putting a version aside drops, for its module names, the modules (`sys.modules`), the options their functions
registered (each registry's `forget`) and the entries whose import loaded them (`loaded.LOADED`), so the next
import of those names, from wherever the next run's record points, runs and registers afresh. What was built
from the version put aside (a bound reward, an estimator) keeps working: its functions hold their own module.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rlvr_sweep.plugins.loaded import LOADED


def module_names(record: dict) -> set[str]:
    """The module names a code record holds (its keys that are modules, not a package's data files or an
    installed distribution's files)."""
    return {key for key in (record.get("paths") or {}) if ":" not in key}


def switch_to(record: dict) -> None:
    """Put aside the imported modules of `record`'s names when one of them was imported from another file than
    the record's (another version of the plugin); nothing when the record's own files are the ones imported."""
    names = module_names(record)
    for name in sorted(names):
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None) if module is not None else None
        if isinstance(file, str) and Path(file).resolve() != Path(record["paths"][name]).resolve():
            put_aside(names)
            return


def put_aside(names: set[str]) -> None:
    from rlvr_sweep.config.options import REGISTRIES

    tops = {name.split(".")[0] for name in names}
    gone = {m for m in sys.modules if m in names or m.split(".")[0] in tops and m.split(".")[0] in names}
    for registry in REGISTRIES:
        registry.forget(gone | names)
    for module in gone:
        sys.modules.pop(module, None)
    for entry, loaded in list(LOADED.items()):
        if loaded.module in names or set(loaded.files) & names:
            del LOADED[entry]

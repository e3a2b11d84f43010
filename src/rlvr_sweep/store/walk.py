"""One walker for every reader of the store: `collect`, analysis, `verify` and `status` find runs here.

`walk(root)` visits every folder under `root` once and sorts what it finds:

- a folder holding a `run.json` is a **run** (and is not descended into: its `model/` and temporary
  folders are its own); a folder holding a `probe.json` is a **probe** (`evaluation probe`);
- a folder whose name carries `.stale-` was **moved aside** by a run that started over (not read);
- everything else is descended into, hidden folders and symlinked folders included (a bigger disk
  linked into the root is part of the sweep); a symlink that leads back to a folder already visited is
  not followed twice, so a link loop ends the branch, and is named.

Folders may appear and vanish while a sweep writes (a run saving its model, a folder moved aside): a
folder that vanished between being listed and being read is named in `skipped`, never an error, as is a
folder that cannot be read. Results are sorted, so every reader sees the same order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

RUN_JSON, PROBE_JSON = "run.json", "probe.json"
STALE_MARK = ".stale-"


def is_stale(path) -> bool:
    return STALE_MARK in Path(path).name


@dataclass
class Walk:
    root: Path
    runs: list[Path] = field(default_factory=list)
    probes: list[Path] = field(default_factory=list)
    stale: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # (folder, why it was not read)

    def notes(self) -> list[str]:
        return [f"not read {path}: {why}" for path, why in self.skipped]


def walk(root) -> Walk:
    root = Path(root)
    out = Walk(root)
    seen: set[tuple[int, int]] = set()
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            st = folder.stat()  # follows a symlink: the folder it leads to
            if (st.st_dev, st.st_ino) in seen:
                out.skipped.append((folder, "a symlink to a folder already visited (a link loop or a second link)"))
                continue
            seen.add((st.st_dev, st.st_ino))
            with os.scandir(folder) as entries:
                children = sorted(entries, key=lambda e: e.name)
            names = {e.name for e in children}
        except FileNotFoundError:
            out.skipped.append((folder, "vanished while the root was read (moved or removed by a writer)"))
            continue
        except OSError as err:
            out.skipped.append((folder, f"cannot be read ({err.strerror or err})"))
            continue
        if RUN_JSON in names:
            out.runs.append(folder)
            continue
        if PROBE_JSON in names:
            out.probes.append(folder)
            continue
        for entry in reversed(children):
            path = folder / entry.name
            try:
                is_dir = entry.is_dir()  # follows symlinks; False for a broken link
            except OSError as err:  # cannot even be told a folder or not: named, as a folder not read is
                out.skipped.append((path, f"cannot be read ({err.strerror or err})"))
                continue
            if not is_dir:
                continue
            if is_stale(path):
                out.stale.append(path)
            else:
                pending.append(path)
    out.runs.sort()
    out.probes.sort()
    out.stale.sort()
    return out

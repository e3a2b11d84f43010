"""Prefix-splice probe folders under a sweep root (written by `python -m rlvr_sweep.evaluation probe`).

A probe folder holds `probe.json` (the two checkpoints, settings in the profile's tokens, counts and the
names of its tables), `probe_greedy.parquet`, `probe_items.parquet` and `probe_rows.parquet`, a manifest
and a `DONE` marker. `load_probes(root)` reads every finished, intact one; an unfinished or damaged
folder is left out and named in the notes, as `collect` does for runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rlvr_sweep.store import DONE_MARKER, verify_manifest, walk
from rlvr_sweep.store.walk import PROBE_JSON  # the marker of a probe folder

TABLES = ("greedy", "items", "rows")


@dataclass
class Probe:
    path: Path
    info: dict  # probe.json
    greedy: pd.DataFrame  # both checkpoints' greedy read-outs, `role` donor / recipient
    items: pd.DataFrame  # one row per discordant item
    rows: pd.DataFrame  # one row per item and condition

    @property
    def label(self) -> str:
        return f"{self.info['donor']['label']} -> {self.info['recipient']['label']}"


def probe_folders(root) -> list[Path]:
    return walk(root).probes


def load_probes(root, profile: str | None = None) -> tuple[list[Probe], list[str]]:
    """(finished, intact probes under `root`, notes on the folders left out)."""
    probes, notes = [], []
    for folder in probe_folders(root):
        if profile is not None and profile not in folder.relative_to(root).parts:
            continue
        if not (folder / DONE_MARKER).is_file():
            notes.append(f"left out probe {folder}: unfinished (no {DONE_MARKER})")
            continue
        damaged = verify_manifest(folder)
        if damaged:
            notes.append(f"left out probe {folder}: damaged: " + "; ".join(damaged))
            continue
        try:
            info = json.loads((folder / PROBE_JSON).read_text())
            frames = {name: pd.read_parquet(folder / info["files"][name]) for name in TABLES}
        except (OSError, ValueError, KeyError) as err:
            notes.append(f"left out probe {folder}: unreadable ({err})")
            continue
        probes.append(Probe(folder, info, **frames))
    return probes, notes

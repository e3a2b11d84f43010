"""PASS 4: every read-out of a checkpoint and every probe is credited to the right training run.

A read-out belongs to a training run exactly when the digest of the model it read equals the digest
of the model that run saved (`analysis.checkpoints`). Re-derived here from the digests alone: the
saved-model digest of each run from the file digests its manifest lists (PASS 1 checks those against
the files), each read-out's model digest against the checkpoint folder it names when that folder is
still there, and then the owner each read-out must have, against the owner the tables gave it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from rlvr_sweep.analysis import Sweep
from rlvr_sweep.analysis.checkpoints import checkpoint_of
from rlvr_sweep.store import MANIFEST
from rlvr_sweep.store.identity import model_digest, saved_model_digest


def _saved_digests(runs: pd.DataFrame) -> dict[str, list[str]]:
    """{digest of a saved model: run folders that saved it}, from the manifests."""
    out: dict[str, list[str]] = {}
    for run_dir in runs["run_dir"]:
        try:
            files = json.loads((Path(run_dir) / MANIFEST).read_text())["files"]
        except (OSError, ValueError, KeyError):
            continue
        digest = saved_model_digest(files)
        if digest:
            out.setdefault(digest, []).append(str(run_dir))
    return out


def attribution_problems(sweep: Sweep) -> tuple[int, list[str]]:
    """(read-outs and probe checkpoints checked, problems)."""
    if not len(sweep.eval_runs) and not sweep.probes:
        return 0, []
    saved = _saved_digests(sweep.runs) if len(sweep.runs) else {}
    by_dir = {str(d): r for d, r in zip(sweep.runs["run_dir"], sweep.runs.to_dict("records"))} if len(sweep.runs) else {}
    checked, problems = 0, []
    for _, run in sweep.eval_runs.iterrows():
        where = f"read-out {run['run_dir']}"
        digest = run.get("model_digest")
        if not isinstance(digest, str):
            problems.append(f"{where}: run.json records no model_digest; it cannot be credited")
            continue
        folder = Path(_folder(run))
        if folder.name and folder.is_dir() and model_digest(folder)["sha256"] != digest:
            problems.append(f"{where}: its checkpoint folder {folder} no longer holds the model it read "
                            f"(digest {digest[:16]}, now {model_digest(folder)['sha256'][:16]})")
        owners = saved.get(digest, [])
        _, label, credited = checkpoint_of(sweep, run, "eval")
        got = str(credited["run_dir"]) if credited is not None else None
        read = os.path.realpath(folder) if folder.name else ""
        named = [o for o in owners if os.path.realpath(Path(o) / "model") == read]
        checked += 1
        if (got is None) != (not owners) or (got is not None and got not in (named or owners)):
            problems.append(f"{where}: credited to {got or 'no training run'}, but the model it read "
                            f"(digest {digest[:16]}) was saved by {', '.join(named or owners) or 'no run of the sweep'}")
    for probe in sweep.probes:
        for role in ("donor", "recipient"):
            part = probe.info.get(role, {})
            digest = part.get("model_digest")
            checked += 1
            if not isinstance(digest, str):
                problems.append(f"probe {probe.path} {role}: probe.json records no model_digest")
                continue
            named = part.get("run_dir")
            if named and str(named) in by_dir and by_dir[str(named)].get("saved_model_digest") != digest:
                problems.append(f"probe {probe.path} {role}: names run {named}, whose saved model is not the one it "
                                f"read (digest {digest[:16]})")
    return checked, problems


def _folder(run) -> str:
    """The folder the read-out's model was loaded from (run.json inputs), else its model.path."""
    try:
        info = json.loads((Path(str(run["run_dir"])) / "run.json").read_text())
        return str(info.get("inputs", {}).get("model", {}).get("folder") or run.get("model_path") or "")
    except (OSError, ValueError):
        return str(run.get("model_path") or "")

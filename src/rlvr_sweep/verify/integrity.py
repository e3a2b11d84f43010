"""PASS 1, second half: each finished run folder is whole (paper §7 "verified supplement").

A finished run (with its `DONE` marker) must hold `config.yaml`, a `run.json` that says it finished,
and its ledger tables (`steps`, `rollouts`, `pairs`, except in a `task=evaluate` run, which trains
nothing; `grades` unless the run read nothing out), each
readable, carrying the result schema's columns and only rows of this run (its arm, horizon, seed and
config hash). Its manifest must match the files byte for byte (`rlvr_sweep.store.verify_manifest`:
size and sha256 of every file, written when the run finished).
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr_sweep.store import RUN_JSON, RUN_KEYS, read_table, verify_manifest
from rlvr_sweep.store.schema import REQUIRED_COLUMNS

LEDGERS = ("steps", "rollouts", "pairs")


def run_problems(run_dir) -> list[str]:
    """What is wrong with one finished run folder's files; empty when it is intact."""
    run_dir = Path(run_dir)
    problems = list(verify_manifest(run_dir))
    if not (run_dir / "config.yaml").is_file():
        problems.append(f"{run_dir}: no config.yaml")
    try:
        info = json.loads((run_dir / RUN_JSON).read_text())
    except (OSError, ValueError) as err:
        return problems + [f"{run_dir / RUN_JSON}: unreadable ({err})"]
    if info.get("status") != "finished":
        problems.append(f"{run_dir / RUN_JSON}: status {info.get('status')!r} in a folder marked DONE")
    read_out = bool(info.get("accuracy"))
    trained = info.get("task", "train") != "evaluate"
    for name in (*LEDGERS, "grades"):
        path = run_dir / f"{name}.parquet"
        if not path.is_file():
            if (name in LEDGERS and trained) or (name == "grades" and read_out):
                problems.append(f"{path}: missing")
            continue
        try:
            frame = read_table(run_dir, name)
        except Exception as err:  # pyarrow raises its own types (ArrowInvalid, ...)
            problems.append(f"{path}: unreadable ({type(err).__name__}: {err})")
            continue
        if not len(frame):
            continue
        missing = [c for c in REQUIRED_COLUMNS[name] if c not in frame.columns]
        if missing:
            problems.append(f"{path}: lacks columns {missing}")
            continue
        for key in RUN_KEYS:
            wrong = frame[frame[key].astype(str) != str(info.get(key))]
            if len(wrong):
                problems.append(f"{path}: {len(wrong)} row(s) with {key} {wrong[key].iloc[0]!r}, "
                                f"not this run's {info.get(key)!r}")
    return problems

"""PASS 1, second half: each finished run folder is whole (paper §7 "verified supplement").

A finished run (with its `DONE` marker) must hold `config.yaml`, a `run.json` that says it finished,
and its ledger tables (`steps`, `rollouts`, `pairs`, except in a `task=evaluate` run, which trains
nothing; `grades` unless the run read nothing out), each
readable, written with this code's result schema (a table without its schema version, or of an older
one, cannot enter the tables and fails here), carrying the schema's columns and only rows of this run
(its arm, horizon, seed and run hash). Its manifest must match the files byte for byte
(`rlvr_sweep.store.verify_manifest`: size and sha256 of every file, written when the run finished), and
the digest it recorded for its saved model must be the digest of the saved model's files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from rlvr_sweep.store import MANIFEST, RUN_JSON, RUN_KEYS, verify_manifest
from rlvr_sweep.store.identity import saved_model_digest
from rlvr_sweep.store.schema import REQUIRED_COLUMNS, SCHEMA_VERSION, check_version

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
    if "run_hash" not in info:
        problems.append(f"{run_dir / RUN_JSON}: written with an older result schema (no run_hash); "
                        f"this code reads {SCHEMA_VERSION}: rerun the run")
    problems += _saved_model_problems(run_dir, info)
    read_out = bool(info.get("accuracy"))
    trained = info.get("task", "train") != "evaluate"
    for name in (*LEDGERS, "grades"):
        path = run_dir / f"{name}.parquet"
        if not path.is_file():
            if (name in LEDGERS and trained) or (name == "grades" and read_out):
                problems.append(f"{path}: missing")
            continue
        try:  # the run keys are read; the manifest has proved every byte, and PASS 1 / 3 decode the rest
            parquet = pq.ParquetFile(path)
            version = check_version(parquet.schema_arrow.metadata, str(path))
            columns = parquet.schema_arrow.names
            keys = parquet.read(columns=[k for k in RUN_KEYS if k in columns], use_threads=False)
        except Exception as err:  # pyarrow raises its own types (ArrowInvalid, ...)
            problems.append(f"{path}: unreadable ({type(err).__name__}: {err})")
            continue
        if version != SCHEMA_VERSION:
            problems.append(f"{path}: written with result schema {version or 'none (no schema metadata)'}, this code "
                            f"reads {SCHEMA_VERSION}: the run cannot enter the tables")
            continue
        if not keys.num_rows:
            continue
        missing = [c for c in REQUIRED_COLUMNS[name] if c not in columns]
        if missing:
            problems.append(f"{path}: lacks columns {missing}")
            continue
        for key in RUN_KEYS:
            counted = keys.column(key).value_counts().to_pylist()  # each value once, in the order rows hold them
            wrong = [(c["values"], c["counts"]) for c in counted if str(c["values"]) != str(info.get(key))]
            if wrong:
                problems.append(f"{path}: {sum(n for _, n in wrong)} row(s) with {key} {wrong[0][0]!r}, "
                                f"not this run's {info.get(key)!r}")
    return problems


def _saved_model_problems(run_dir: Path, info: dict) -> list[str]:
    """The recorded `saved_model_digest` against the digest of the saved model's files in the manifest
    (what credits a read-out of those weights to this run)."""
    recorded = info.get("saved_model_digest")
    try:
        listed = json.loads((run_dir / MANIFEST).read_text())["files"]
    except (OSError, ValueError, KeyError):
        return []  # the manifest problem is reported already
    actual = saved_model_digest(listed)
    if recorded != actual and (recorded or actual):
        return [f"{run_dir / RUN_JSON}: saved_model_digest {str(recorded)[:16]} is not the digest of the saved "
                f"model's files ({str(actual)[:16]}): read-outs of this checkpoint would be credited wrongly"]
    return []

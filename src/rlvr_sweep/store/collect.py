"""Collate a sweep: every finished run's tables under a root, one DataFrame per table.

`python -m rlvr_sweep.store collect ROOT --out PREFIX` writes `PREFIX.<table>.parquet`;
`rlvr_sweep.store.collect(root)` returns the same tables in a notebook.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from rlvr_sweep.store import schema
from rlvr_sweep.store.rundir import DONE_MARKER, RUN_JSON, RUN_KEYS
from rlvr_sweep.store.tables import TABLES


def finished_run_dirs(root) -> list[Path]:
    """Run folders under a sweep root (fixed depth profile/arm/run) that have their DONE marker."""
    return sorted(p.parent for p in Path(root).glob(f"*/*/*/{DONE_MARKER}"))


def run_infos(root, finished_only: bool = True) -> list[dict]:
    """The run.json of every run folder under `root` (finished ones only by default)."""
    paths = [d / RUN_JSON for d in finished_run_dirs(root)] if finished_only else sorted(Path(root).glob(f"*/*/*/{RUN_JSON}"))
    # run_dir is where the folder is now (it may have been moved since it was written)
    return [{**json.loads(p.read_text()), "run_dir": str(p.parent)} for p in paths]


def collect(root, finished_only: bool = True) -> dict[str, pd.DataFrame]:
    """Every run's tables under `root`, concatenated (one pyarrow dataset scan per table).

    Returns {"runs": one row per run (run.json, flattened), "steps", "rollouts", "pairs", "grades"}.
    """
    infos = run_infos(root, finished_only)
    out = {"runs": pd.json_normalize(infos) if infos else pd.DataFrame(columns=list(RUN_KEYS))}
    for name in TABLES:
        files = [str(Path(i["run_dir"]) / f"{name}.parquet") for i in infos]
        files = [f for f in files if os.path.exists(f)]
        if not files:
            out[name] = pd.DataFrame(columns=list(RUN_KEYS))
            continue
        schemas = [pq.read_schema(f) for f in files]
        for f, s in zip(files, schemas):
            schema.check_version(s.metadata, f)
        dataset = pads.dataset(files, schema=pa.unify_schemas([s.remove_metadata() for s in schemas]), format="parquet")
        out[name] = dataset.to_table().to_pandas()
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m rlvr_sweep.store collect ROOT --out PREFIX`: one parquet file per table."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m rlvr_sweep.store")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="gather every finished run's tables under ROOT")
    c.add_argument("root")
    c.add_argument("--out", required=True, help="output prefix: writes OUT.<table>.parquet")
    c.add_argument("--all", action="store_true", help="include unfinished runs")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not Path(args.root).is_dir():
        print(f"no such folder: {args.root}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    tables = collect(args.root, finished_only=not args.all)
    for name, frame in tables.items():
        path = Path(f"{args.out}.{name}.parquet")
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_parquet(path, index=False)
        print(f"{name}: {len(frame)} rows -> {path}")
    print(f"collected {len(tables['runs'])} runs in {time.perf_counter() - started:.2f}s")
    return 0


"""`python -m rlvr_sweep.store collect ROOT --out PREFIX`: a sweep's tables as one parquet file each
(`PREFIX.<table>.parquet`), written run by run, so memory stays about that of one run's tables
whatever the number of runs (`collect`, which analysis uses, holds every table in memory).

Two passes. The first checks every run as `collect` does (finished, manifest, schema version, run
keys; every table's bytes hashed against the manifest, the saved model's files by size) and reads
each table's schema (a table an earlier call checked, in the state it is in now, is not read:
`store.remembered`); a table's schemas are unified (a column one run stores empty takes the type
another run gives it). The second reads each table file again, checks that its bytes hash as they did
in the first pass (a file changed in between stops the collection, naming it), decodes it, casts it
to the unified schema and appends it. Each file is renamed into place when whole. A table whose
schemas cannot be unified (a column one arm stores as text and another as numbers) is joined in
memory as `collect` joins it. Reading the files back (`pandas.read_parquet`) gives `collect`'s frames.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rlvr_sweep.io.atomic import atomic_write
from rlvr_sweep.store import schema
from rlvr_sweep.store.collect import CollectError, _joined, gather, read_checked, runs_frame, skipped_frame
from rlvr_sweep.store.parallel import folder_map
from rlvr_sweep.store.snapshot import BATCH, Snapshot
from rlvr_sweep.store.tables import TABLES



def collect_to_files(root, prefix, allow_skipped: bool = False) -> dict:
    """Write `prefix.<table>.parquet` for runs, steps, rollouts, pairs, grades and skipped, all renamed
    into place once every one is whole; returns {"paths": {table: path}, "rows": {table: rows},
    "skipped": [{run_dir, reason}], "stale": [moved-aside folders]}."""
    infos, skipped, checked, stale = gather(root, allow_skipped)
    paths = {name: Path(f"{prefix}.{name}.parquet") for name in ("runs", *TABLES, "skipped")}
    paths["runs"].parent.mkdir(parents=True, exist_ok=True)
    partial = {name: path.with_name(path.name + ".partial") for name, path in paths.items()}
    try:
        rows = {name: _write_table(partial[name], checked[name], Snapshot(root, name)) for name in TABLES}
        for name, frame in (("runs", runs_frame(infos)), ("skipped", skipped_frame(skipped))):
            _write_frame(partial[name], frame)
            rows[name] = len(frame)
        for name, path in paths.items():
            os.replace(partial[name], path)
    finally:
        for path in partial.values():
            path.unlink(missing_ok=True)
    return {"paths": paths, "rows": rows, "skipped": skipped, "stale": stale}


def _write_frame(path: Path, frame) -> None:
    atomic_write(path, lambda f: frame.to_parquet(f, index=False))


def _write_table(path: Path, runs: list[tuple[Path, str, pa.Schema]], kept: Snapshot) -> int:
    """Append every run's table to one parquet file (see the module docstring); its row count. `kept`:
    the snapshot of the last collection, read instead of the files when it holds exactly these, and
    kept anew when it does not."""
    if not runs:
        _write_frame(path, pd.DataFrame(columns=list(schema.TABLE_KEYS)))
        return 0
    try:
        unified = pa.unify_schemas([s for _, _, s in runs], promote_options="default")
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        frame = _joined([read_checked(file, digest) for file, digest, _ in runs])
        _write_frame(path, frame)
        return len(frame)
    total = 0
    reused = kept.batches(runs, unified)

    def write(f) -> None:
        nonlocal total
        batches = [(runs[i:i + BATCH], unified) for i in range(0, len(runs), BATCH)]
        with pq.ParquetWriter(f, unified) as writer, kept.recording(runs, unified, off=reused is not None) as record:
            for table in reused if reused is not None else folder_map(_batch, batches):
                writer.write_table(table, row_group_size=max(table.num_rows, 1))  # one row group per batch
                record(table)
                total += table.num_rows

    atomic_write(path, write)
    return total


def _batch(work: tuple[list, pa.Schema]) -> pa.Table:
    """One batch of runs' tables, read, checked, decoded and cast to the unified schema."""
    runs, unified = work
    return pa.concat_tables([_aligned(read_checked(file, digest), unified) for file, digest, _ in runs])


def _aligned(table: pa.Table, unified: pa.Schema) -> pa.Table:
    """`table` with the unified schema's columns in its order: missing ones null, empty ones typed."""
    if table.schema.equals(unified):
        return table
    have = table.schema
    columns = [(table.column(f.name) if have.field(f.name).type == f.type else table.column(f.name).cast(f.type))
               if f.name in have.names else pa.nulls(table.num_rows, f.type) for f in unified]
    return pa.Table.from_arrays(columns, schema=unified)


def _parser():
    import argparse

    parser = argparse.ArgumentParser(prog="python -m rlvr_sweep.store")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="gather every finished, intact run's tables under ROOT")
    c.add_argument("root")
    c.add_argument("--out", required=True, help="output prefix: writes OUT.<table>.parquet")
    c.add_argument("--allow-skipped", action="store_true",
                   help="collect the intact runs and exit 0 even when others are skipped (they are listed)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """`python -m rlvr_sweep.store collect ROOT --out PREFIX [--allow-skipped]`."""
    import sys

    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    try:
        done = collect_to_files(args.root, args.out, allow_skipped=args.allow_skipped)
    except CollectError as err:
        print(f"collect: error: {err}", file=sys.stderr)
        return 2
    for name, path in done["paths"].items():
        print(f"{name}: {done['rows'][name]} rows -> {path}")
    for row in done["skipped"]:
        print(f"skipped {row['run_dir']}: {row['reason']}", file=sys.stderr)
    stale, skipped = done["stale"], done["skipped"]
    print(f"collected {done['rows']['runs']} runs in {time.perf_counter() - started:.2f}s"
          + (f" ({len(skipped)} skipped)" if skipped else "")
          + (f"; ignored {len(stale)} moved-aside folder(s)" if stale else ""))
    return 0

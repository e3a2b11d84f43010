"""Parquet tables of a run folder (steps, rollouts, pairs, grades), written whole and atomically.

Each table carries the run keys as columns and the result schema version in its metadata
(`schema`), so a sweep's files concatenate with one pyarrow dataset scan (`collect`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rlvr_sweep.io import atomic_write
from rlvr_sweep.store import schema

TABLES = ("steps", "rollouts", "pairs", "grades")


def write_table(run_dir: Path, name: str, rows: list[dict], keys: dict | None = None) -> None:
    """(Re)write one parquet table atomically from its rows so far, with the run keys as columns."""
    frame = pd.DataFrame(rows)
    if keys:
        frame = frame.assign(**keys)[[*keys, *frame.columns]] if len(frame) else pd.DataFrame(columns=[*keys])
    if len(frame):
        schema.check_columns(name, frame.columns, str(run_dir))
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), schema.METADATA_KEY: str(schema.SCHEMA_VERSION).encode()})
    atomic_write(Path(run_dir) / f"{name}.parquet", lambda f: pq.write_table(table, f))


def read_table(run_dir: Path, name: str, columns=None) -> pd.DataFrame:
    """A run's table as a DataFrame (its result schema version checked). `columns`: decode only those of
    them the table has (a reader of a few columns skips the token lists and texts it does not read)."""
    path = Path(run_dir) / f"{name}.parquet"
    if columns is None:
        table = pq.read_table(path)
    else:
        parquet = pq.ParquetFile(path)
        have = set(parquet.schema_arrow.names)
        table = parquet.read(columns=[c for c in dict.fromkeys(columns) if c in have], use_threads=False)
    schema.check_version(table.schema.metadata, str(path))
    return table.to_pandas()

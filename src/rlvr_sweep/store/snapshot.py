"""A sweep's last collection, kept under its root so the next call need not decode every run's files.

Decoding 4,096 small parquet files is most of the time `load_sweep` takes at 1,024 runs (and 40,000 most
of `store collect --out` at 10,000), and the tables of finished runs do not change. So each collection
keeps the table it joined, `<root>/.rlvr_sweep/collected.<table>.arrow` (Arrow IPC, zstd, one record
batch per `BATCH` runs in the collection's order, the joined schema), and an index beside it,
`collected.<table>.json`: which files it was built from, by path and sha256, and the sha256 of the
`.arrow` file itself.

A later collection uses it only when it finds exactly the same files, in the same order, with the same
sha256 (which `collect` establishes on every call, by hashing or by the remembered digest of the file
in its present state, `store.remembered`), and when the `.arrow` file hashes to its index's digest.
Anything else (a run added, removed or rewritten, a damaged or foreign snapshot) reads every file again,
checked against its digest, and keeps a new snapshot. So what a collection gives is the same with or
without it (tested). `verify all` reads none (`collect(kept=False)`): it decodes the runs' own files,
whose bytes it hashes. `RLVR_SWEEP_REMEMBER=0` turns it off with the other caches; a root that cannot
be written keeps none; deleting `.rlvr_sweep/` is always safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from rlvr_sweep.io.atomic import atomic_file, atomic_write_bytes
from rlvr_sweep.store.remembered import FOLDER, enabled

BATCH = 64  # runs per record batch here, and per row group in `store collect --out`
VERSION = 1
_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


def _files(entries) -> list[list[str]]:
    """[[absolute path, sha256]] of `collect`'s (path, sha256, ...) entries, in order."""
    return [[os.path.abspath(entry[0]), entry[1]] for entry in entries]


class Snapshot:
    """The kept collection of one table (`name`: steps, rollouts, pairs, grades) under a sweep root."""

    def __init__(self, root, name: str):
        folder = Path(root) / FOLDER
        self.data, self.index = folder / f"collected.{name}.arrow", folder / f"collected.{name}.json"
        self.name = name
        self.on = enabled()

    def table(self, entries) -> pa.Table | None:
        """The joined table of exactly these files (`entries`: (path, sha256, ...) in order), else None."""
        reader = self._reader(entries)
        return reader.read_all() if reader is not None else None

    def batches(self, entries, schema: pa.Schema) -> Iterator[pa.Table] | None:
        """The joined table of exactly these files, `BATCH` runs at a time, when it has `schema`; else None."""
        reader = self._reader(entries)
        if reader is None or not reader.schema.equals(schema):
            return None
        return (pa.Table.from_batches([reader.get_batch(i)]) for i in range(reader.num_record_batches))

    def _reader(self, entries) -> pa.RecordBatchFileReader | None:
        if not self.on:
            return None
        try:
            index = json.loads(self.index.read_bytes())
        except (OSError, ValueError):
            return None
        if not (isinstance(index, dict) and index.get("version") == VERSION and index.get("table") == self.name
                and index.get("batch") == BATCH and index.get("files") == _files(entries)):
            return None
        try:
            mapped = pa.memory_map(str(self.data)).read_buffer()  # hashed and read from the same mapping
            if mapped.size != index.get("bytes") or hashlib.sha256(mapped).hexdigest() != index.get("sha256"):
                return None
            reader = pa.ipc.open_file(pa.BufferReader(mapped))
        except (OSError, pa.ArrowException):
            return None
        return reader if reader.num_record_batches == -(-len(entries) // BATCH) else None

    @contextlib.contextmanager
    def recording(self, entries, schema: pa.Schema, off: bool = False):
        """Yields `record(table)`, to be called with each `BATCH` runs' joined table in order; the
        snapshot is put in place when the block ends without an error. A snapshot that cannot be
        written (a read-only root, a full disk) is given up silently: the collection goes on."""
        if off or not self.on:
            yield _ignore
            return
        broken: list[Exception] = []  # the snapshot's own failures; the caller's propagate
        yielded = raised = False
        try:
            self.data.parent.mkdir(exist_ok=True)
            with atomic_file(self.data) as f:
                sink = _Hashing(f)
                with pa.ipc.new_file(sink, schema, options=_OPTIONS) as writer:

                    def record(table: pa.Table) -> None:
                        if not broken:
                            try:
                                writer.write_batch(_one_batch(table))
                            except (OSError, pa.ArrowException) as err:
                                broken.append(err)

                    yielded = True
                    try:
                        yield record
                    except BaseException:
                        raised = True
                        raise
                    if broken:
                        raise broken[0]  # no half snapshot is put in place
            atomic_write_bytes(self.index, json.dumps(
                {"version": VERSION, "table": self.name, "batch": BATCH, "files": _files(entries),
                 "bytes": sink.size, "sha256": sink.digest.hexdigest()}, separators=(",", ":")).encode())
        except (OSError, pa.ArrowException):
            if raised:
                raise
            if not yielded:
                yield _ignore

    def keep(self, entries, rows: list[int], table: pa.Table) -> None:
        """Keep `table`, the join of `entries`' files whose row counts are `rows`."""
        with self.recording(entries, table.schema) as record:
            start = 0
            for i in range(0, len(rows), BATCH):
                n = sum(rows[i:i + BATCH])
                record(table.slice(start, n))
                start += n


def _ignore(table: pa.Table) -> None:
    pass


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    """`table` as one record batch, however many rows (none included)."""
    return pa.record_batch([column.combine_chunks() for column in table.columns], schema=table.schema)


class _Hashing:
    """A binary file that hashes what is written to it."""

    def __init__(self, f):
        self.f, self.digest, self.size = f, hashlib.sha256(), 0

    def write(self, data) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.f.write(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self.f.flush()

    @property
    def closed(self) -> bool:
        return self.f.closed

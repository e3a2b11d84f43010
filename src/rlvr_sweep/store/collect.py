"""Collate a sweep: every finished, intact run's tables under a root, one DataFrame per table.

`collect(root)` finds run folders with the store's one walker (`store.walk`: at any depth, through
symlinked folders, tolerating folders that appear and vanish; moved-aside `*.stale-*` folders are not
runs). It includes a run only when it is finished (`DONE`), intact (every file matches its manifest),
written with this code's result schema, and when every row of its tables carries that folder's own run
keys (a table copied in from another run is refused, even with a regenerated manifest); every other
run is listed in the `skipped` table with the reason, naming the file, and so is every folder the
walker could not read. Two folders holding the same run (the same run keys) are refused, naming both.
Finding no run at all is an error that says where it looked. Unless `allow_skipped=True`, a skipped
run is an error too (`CollectError`), so a table never silently lacks a run.

What a call learns of the files (digests, schemas) is remembered under the root for the next call, by
each file's stamp (`store.remembered`): a file that changed since is read and hashed again. The tables
it joins are kept there too (`store.snapshot`): a later call that finds exactly the same files, with
the same digests, reads the joined table instead of decoding every file again.

Schema versions: a table or run.json written by another version is refused by name (older files are
not upgraded: version 2 keyed runs by their settings alone, version 1 lacks `paper_arm`), so rerun
such runs with this code.

`python -m rlvr_sweep.store collect ROOT --out PREFIX [--allow-skipped]` writes `PREFIX.<table>.parquet`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rlvr_sweep.io.digest import stamp
from rlvr_sweep.store import schema
from rlvr_sweep.store.manifest import verify_manifest
from rlvr_sweep.store.parallel import folder_map
from rlvr_sweep.store.remembered import Remembered
from rlvr_sweep.store.snapshot import Snapshot
from rlvr_sweep.store.rundir import DONE_MARKER, RUN_JSON, RUN_KEYS
from rlvr_sweep.store.tables import TABLES
from rlvr_sweep.store.walk import walk


class CollectError(RuntimeError):
    """The collection would be wrong or incomplete; the message says which folders and why."""


def run_folders(root) -> tuple[list[Path], list[Path]]:
    """(run folders, moved-aside folders) under `root` (`store.walk`)."""
    found = walk(root)
    return found.runs, found.stale


def finished_run_dirs(root) -> list[Path]:
    """Run folders under `root` that have their DONE marker (intact or not)."""
    return [d for d in run_folders(root)[0] if (d / DONE_MARKER).is_file()]


def run_infos(root, finished_only: bool = True) -> list[dict]:
    """The run.json of every run folder under `root` (finished ones only by default), for monitoring;
    `run_dir` is where the folder is now. Unreadable run.json files are left out."""
    folders = finished_run_dirs(root) if finished_only else run_folders(root)[0]
    infos = []
    for folder in folders:
        try:
            infos.append({**json.loads((folder / RUN_JSON).read_text()), "run_dir": str(folder)})
        except (OSError, ValueError):
            continue
    return infos


def _foreign_rows(path: Path, parquet: pq.ParquetFile, info: dict) -> str | None:
    """Why a table's rows are not all this run's (its run keys, from the row groups' statistics), or None."""
    meta = parquet.metadata
    names = meta.schema.names
    for key in RUN_KEYS:
        if key not in names:
            return f"{path}: no {key!r} column"
        j = names.index(key)
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(j).statistics
            if stats is None or not stats.has_min_max:
                values = set(parquet.read(columns=[key]).column(0).to_pylist())
                low, high = (min(values), max(values)) if values else (info[key], info[key])
            else:
                low, high = stats.min, stats.max
            if low != info[key] or high != info[key]:
                shown = low if low != info[key] else high
                return (f"{path}: holds rows of another run ({key} {shown!r}, this folder's run.json says "
                        f"{info[key]!r}); the table was copied or replaced")
    return None


def _recorded_error(recorded) -> str:
    """A failed run's recorded error, first line (and where a plugin raised it), as the reason it shows."""
    error = recorded.get("error") if isinstance(recorded, dict) else None
    if not isinstance(error, str) or not error.strip():
        return ""
    first = error.strip().splitlines()[0][:300]
    where = recorded.get("error_in")
    return f": {first}" + (f" ({where})" if isinstance(where, str) and where else "")


def _check_run(folder: Path, memo: Remembered | None = None) -> tuple[dict | None, str | None, dict]:
    """(run.json, None, its tables) for a finished, intact, current-schema run; else (None, why, {}).
    The tables are {name: (path, sha256, arrow schema)}: each file's bytes hashed against the manifest
    and its footer checked, not decoded. `memo`: what earlier calls learnt of the files
    (`store.remembered`): a table in the state it was checked in is not read at all."""
    if not (folder / DONE_MARKER).is_file():
        try:
            recorded = json.loads((folder / RUN_JSON).read_text())
            status = recorded.get("status", "?")
        except (OSError, ValueError, AttributeError):
            recorded, status = {}, "unknown"
        return None, f"unfinished (run.json status: {status}{_recorded_error(recorded)})", {}
    try:
        info = json.loads((folder / RUN_JSON).read_text())
    except (OSError, ValueError) as err:
        return None, f"{folder / RUN_JSON}: unreadable ({err})", {}
    if isinstance(info, dict) and "config_hash" in info and "run_hash" not in info:
        return None, (f"{folder / RUN_JSON}: written with an older result schema (runs keyed by their settings "
                      f"alone, schema 2 or older), this code reads {schema.SCHEMA_VERSION}; rerun the run with this "
                      "code"), {}
    if not isinstance(info, dict) or not all(k in info for k in RUN_KEYS):
        return None, f"{folder / RUN_JSON}: not a run record (needs {list(RUN_KEYS)})", {}
    keys = [info[k] for k in RUN_KEYS]
    blobs, seen, hits = {}, {}, {}
    for name in TABLES:
        path = folder / f"{name}.parquet"
        try:
            read_at = time.time()
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                hit = memo.get(path, st) if memo is not None else None
                if hit is not None and not (isinstance(hit, dict) and hit.get("keys") == keys
                                            and memo.schema(hit.get("schema", "")) is not None):
                    hit = None
                if hit is None:
                    blobs[name] = f.read()
                    if stamp(os.fstat(f.fileno())) != stamp(st):
                        hit, read_at = None, 0.0  # written while being read: nothing remembered of it
            seen[name], hits[name] = (st, read_at), hit
        except FileNotFoundError:
            continue
        except OSError as err:
            return None, f"{path}: unreadable ({err})", {}
    known = {f"{name}.parquet": {"size": seen[name][0].st_size, "sha256": hits[name]["sha256"]} if hits[name]
             else {"size": len(blobs[name]), "sha256": hashlib.sha256(blobs[name]).hexdigest()} for name in seen}
    problems = verify_manifest(folder, hash_model=False, known=known)  # verify hashes the weights too
    if problems and any(hits.values()):  # a remembered digest the manifest disputes: read and hash it all
        return _check_run(folder, memo=None)
    if problems:
        return None, "damaged: " + "; ".join(problems), {}
    tables = {}
    for name in seen:
        path, sha = folder / f"{name}.parquet", known[f"{name}.parquet"]["sha256"]
        if hits[name] is not None:  # checked by an earlier call in this very state
            tables[name] = (path, sha, memo.schema(hits[name]["schema"]))
            continue
        try:
            parquet = pq.ParquetFile(pa.BufferReader(blobs[name]), pre_buffer=False)
            meta = parquet.metadata
        except (OSError, pa.ArrowException) as err:
            return None, f"{path}: not a readable parquet file ({err})", {}
        raw = (meta.metadata or {}).get(schema.METADATA_KEY)
        version = int(raw) if raw else 0
        if version != schema.SCHEMA_VERSION:
            return None, (f"{path}: written with result schema {version}, this code reads {schema.SCHEMA_VERSION}; "
                          "rerun the run with this code (or read it with the rlvr_sweep that wrote it)"), {}
        if meta.num_rows:
            foreign = _foreign_rows(path, parquet, info)
            if foreign:
                return None, foreign, {}
        arrow_schema = parquet.schema_arrow.remove_metadata()
        if memo is not None and hits[name] is None:
            st, read_at = seen[name]
            memo.put(path, st, {"sha256": sha, "keys": keys, "schema": memo.schema_id(arrow_schema)}, read_at)
        tables[name] = (path, sha, arrow_schema)
    return {**info, "run_dir": str(folder)}, None, tables


def decoded(parquet: pq.ParquetFile) -> pa.Table:
    """A run's table, read on this thread (arrow's own threads cost more than they save on small files)."""
    return parquet.read(use_threads=False).replace_schema_metadata(None)


def collect(root, allow_skipped: bool = False, kept: bool = True) -> dict[str, pd.DataFrame]:
    """Every finished, intact run's tables under `root`, concatenated: {"runs": one row per run
    (run.json, flattened), "steps", "rollouts", "pairs", "grades", "skipped": one row per run left out
    (run_dir, reason)}. A table whose files are exactly those of the last collection, unchanged, is
    read from its snapshot (`store.snapshot`; `kept=False`: none is read or kept, as `verify` reads);
    otherwise each file is read, checked against the digest the first pass took, and joined. See the
    module docstring."""
    infos, skipped, checked, _ = gather(root, allow_skipped)
    out = {"runs": runs_frame(infos)}
    for name in TABLES:
        out[name] = _frame(root, name, checked.pop(name), kept)
    out["skipped"] = skipped_frame(skipped)
    return out


def _frame(root, name: str, runs: list[tuple], use_kept: bool = True) -> pd.DataFrame:
    """One frame of every run's table `name` (`runs`: `gather`'s (path, sha256, schema) entries)."""
    if not runs:
        return pd.DataFrame(columns=list(schema.TABLE_KEYS))
    kept = Snapshot(root, name)
    table = kept.table(runs) if use_kept else None
    if table is None:
        parts = list(folder_map(lambda run: read_checked(run[0], run[1]), runs))
        try:
            table = pa.concat_tables(parts, promote_options="default")
        except (pa.ArrowTypeError, pa.ArrowInvalid):
            return _joined(parts)
        if use_kept:
            kept.keep(runs, [part.num_rows for part in parts], table)
    return one_chunk(table).to_pandas()


def read_checked(file: Path, digest: str) -> pa.Table:
    """A run's table, decoded from bytes that hash to `digest` (what the first pass found)."""
    blob = file.read_bytes()
    if hashlib.sha256(blob).hexdigest() != digest:
        raise CollectError(f"{file}: changed while being collected (its sha256 differs from the first pass's); "
                           "collect again once the sweep is quiet")
    try:
        return decoded(pq.ParquetFile(pa.BufferReader(blob), pre_buffer=False))
    except (OSError, pa.ArrowException) as err:  # its footer read, its manifest agrees: written broken
        raise CollectError(f"{file}: not a readable parquet file ({err}), though its manifest lists these bytes; "
                           "rerun that run, or move its folder out of the root") from None


def gather(root, allow_skipped: bool) -> tuple[list[dict], list[dict], dict[str, list], list]:
    """(run.json of each run collected, the skipped {run_dir, reason}, {table: one entry per run that has it
    (`_check_run`'s)}, moved-aside folders), raising CollectError as `collect` does. What it learns of
    the tables is remembered under the root for the next call (`store.remembered`)."""
    root = Path(root)
    if not root.is_dir():
        raise CollectError(f"no such folder: {root}")
    found = walk(root)
    folders, stale = found.runs, found.stale
    if not folders:
        raise CollectError(f"found no run under {root.resolve()} (looked for run folders, i.e. folders holding a "
                           f"{RUN_JSON}, at any depth{'; only moved-aside *.stale-* folders' if stale else ''})"
                           + "".join(f"\n  {note}" for note in found.notes()))
    infos, skipped = [], [{"run_dir": str(path), "reason": f"not read: {why}"} for path, why in found.skipped
                          if "already visited" not in why]
    read: dict[str, list] = {name: [] for name in TABLES}
    memo = Remembered(root, "tables")
    check = functools.partial(_check_run, memo=memo)
    for folder, (info, why, tables) in zip(folders, _checked(check, folders, memo)):
        if info is None:
            skipped.append({"run_dir": str(folder), "reason": why})
            continue
        infos.append(info)
        for name, table in tables.items():
            read[name].append(table)
    seen: dict[tuple, str] = {}
    for info in infos:
        key = tuple(info[k] for k in RUN_KEYS)
        if key in seen:
            raise CollectError(f"two folders hold the same run {dict(zip(RUN_KEYS, key))}: {seen[key]} and "
                               f"{info['run_dir']}; keep one of them (e.g. move the other out of {root})")
        seen[key] = info["run_dir"]
    memo.save()
    if skipped and not allow_skipped:
        raise CollectError(f"{len(skipped)} of {len(folders)} run(s) or folders under {root} cannot be collected:\n" +
                           "\n".join(f"  {s['run_dir']}: {s['reason']}" for s in skipped) +
                           "\n(allow_skipped=True / --allow-skipped collects the others)")
    return infos, skipped, read, stale


def _checked(check, folders: list[Path], memo: Remembered):
    """`check` of every folder, in order. Folders whose tables an earlier call checked cost a few stats
    and JSON reads, Python work that threads only slow down: they are checked on this thread, the others
    (hashing, parsing: work in C that lets threads run) on `folder_map`'s threads."""
    known = [memo.knows(folder / f"{TABLES[0]}.parquet") for folder in folders]
    fresh = iter(folder_map(check, [f for f, k in zip(folders, known) if not k]))
    return (check(folder) if k else next(fresh) for folder, k in zip(folders, known))


def runs_frame(infos: list[dict]) -> pd.DataFrame:
    """One row per run: its run.json flattened, the inputs as {name: sha256} columns (`inputs.model`,
    `inputs.benchmark/math500`, ...; run.json keeps what each was: files, rows, folder)."""
    flat = [{**i, "inputs": {k: (v or {}).get("sha256") for k, v in (i.get("inputs") or {}).items()}} for i in infos]
    return pd.json_normalize(flat) if infos else pd.DataFrame(columns=list(RUN_KEYS))


def skipped_frame(skipped: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(skipped, columns=["run_dir", "reason"])


def _joined(parts: list[pa.Table]) -> pd.DataFrame:
    """One frame of every run's table. Runs of different arms can store a column under two types (a
    column one arm fills with text and another leaves empty, stored as null floats): then the tables
    are joined as pandas frames, which keeps each value."""
    try:
        table = pa.concat_tables(parts, promote_options="default")
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return pd.concat([part.to_pandas() for part in parts], ignore_index=True)
    return one_chunk(table).to_pandas()


def one_chunk(table: pa.Table) -> pa.Table:
    """Every text column as one contiguous array (large_string, so none overflows 2 GiB). Read file by
    file, a column is one chunk per run, and every later row lookup in the frame (pandas keeps text in
    those arrow chunks) would walk all of them: quadratic in the number of runs."""
    for i, field in enumerate(table.schema):
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            column = table.column(i)
            if column.num_chunks > 1 or pa.types.is_string(field.type):
                table = table.set_column(i, field.with_type(pa.large_string()),
                                         column.cast(pa.large_string()).combine_chunks())
    return table

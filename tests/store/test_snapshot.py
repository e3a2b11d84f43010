"""The kept collection (`store.snapshot`): read instead of every run's files when, and only when, the
files are exactly those it was built from; what a collection gives is the same with it or without."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json

import pandas as pd
import pyarrow as pa
import pytest

from rlvr_sweep.store import CollectError, collect, remembered
from rlvr_sweep.store.collect import read_checked
from rlvr_sweep.store.collect_files import collect_to_files
from rlvr_sweep.store.snapshot import BATCH, Snapshot
from tests.conftest import REPO
from tests.store.test_remembered import flip_a_byte_keeping_size_and_mtime, settled_now  # noqa: F401

TABLES = ("steps", "rollouts", "pairs", "grades")
_spec = importlib.util.spec_from_file_location("bench_store", REPO / "bench" / "bench_store.py")
bench_store = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_store)


def _sweep(tmp_path, finished_run, n: int):
    """A sweep root of `n` distinct runs: copies of the finished run under new identities (the bench's)."""
    root = tmp_path / "runs"
    for variant in range(n):
        bench_store.clone(finished_run, root, variant)
    return root


def _reads(monkeypatch) -> list:
    """The run table files `collect` decodes from here on."""
    module = importlib.import_module("rlvr_sweep.store.collect")  # the package's `collect` is the function
    calls, real = [], module.read_checked
    monkeypatch.setattr(module, "read_checked", lambda file, digest: calls.append(file.name) or real(file, digest))
    return calls


def _same(a: dict, b: dict) -> None:
    for name in ("runs", *TABLES):
        pd.testing.assert_frame_equal(a[name], b[name], check_exact=True)


def test_a_second_collection_reads_the_snapshot_and_gives_the_same_frames(tmp_path, finished_run, settled_now,
                                                                           monkeypatch):
    root = _sweep(tmp_path, finished_run, 3)
    reads = _reads(monkeypatch)
    first = collect(root)
    assert sorted(reads) == sorted(f"{t}.parquet" for t in TABLES for _ in range(3))
    index = json.loads((root / ".rlvr_sweep/collected.rollouts.json").read_text())
    assert index["batch"] == BATCH and len(index["files"]) == 3 and index["bytes"] > 0
    reads.clear()
    second = collect(root)
    assert reads == []  # nothing decoded: every table came from its snapshot
    _same(first, second)
    monkeypatch.setenv(remembered.ENV, "0")
    _same(first, collect(root))  # the same frames with every cache off, every file read
    assert sorted(reads) == sorted(f"{t}.parquet" for t in TABLES for _ in range(3))


def test_a_changed_sweep_or_a_damaged_snapshot_reads_every_file_again(tmp_path, finished_run, settled_now,
                                                                      monkeypatch):
    root = _sweep(tmp_path, finished_run, 2)
    collect(root)
    reads = _reads(monkeypatch)
    bench_store.clone(finished_run, root, 2)  # a run added: three files per table now
    grown = collect(root)
    assert len(reads) == 12 and len(grown["runs"]) == 3
    reads.clear()
    snapshot = root / ".rlvr_sweep/collected.pairs.arrow"
    data = bytearray(snapshot.read_bytes())
    data[len(data) // 2] ^= 0xFF  # the snapshot no longer hashes to its index's digest
    snapshot.write_bytes(bytes(data))
    again = collect(root)
    assert sorted(reads) == ["pairs.parquet"] * 3  # that table read from the files; the others kept
    _same(grown, again)
    reads.clear()
    _same(grown, collect(root))  # and kept anew
    assert reads == []


def test_a_flipped_byte_in_a_run_is_caught_whatever_the_snapshot_holds(tmp_path, finished_run, settled_now):
    root = _sweep(tmp_path, finished_run, 2)
    collect(root)
    flip_a_byte_keeping_size_and_mtime(next(root.glob("smoke/ra_flat/*/steps.parquet")))
    with pytest.raises(CollectError, match="content differs from the manifest"):
        collect(root)


def test_collect_to_files_writes_the_same_bytes_from_the_snapshot(tmp_path, finished_run, settled_now, monkeypatch):
    root = _sweep(tmp_path, finished_run, 3)
    monkeypatch.setenv(remembered.ENV, "0")
    collect_to_files(root, tmp_path / "plain/c")  # no cache at all: every file decoded
    assert not (root / ".rlvr_sweep").exists()
    monkeypatch.delenv(remembered.ENV)
    collect(root)  # the snapshot as `collect` keeps it
    reads = []
    import rlvr_sweep.store.collect_files as module

    real = module.read_checked
    monkeypatch.setattr(module, "read_checked", lambda file, digest: reads.append(file.name) or real(file, digest))
    collect_to_files(root, tmp_path / "kept/c")
    assert reads == []
    for name in ("runs", *TABLES, "skipped"):
        assert (tmp_path / f"kept/c.{name}.parquet").read_bytes() == (tmp_path / f"plain/c.{name}.parquet").read_bytes()
    (root / ".rlvr_sweep/collected.steps.json").unlink()  # steps decoded again, and kept by collect_to_files
    collect_to_files(root, tmp_path / "again/c")
    assert reads == ["steps.parquet"] * 3
    assert Snapshot(root, "steps").table([(p, d) for p, d in _files(root, "steps")]) is not None


def _files(root, name):
    index = json.loads((root / f".rlvr_sweep/collected.{name}.json").read_text())
    return index["files"]


def test_a_file_that_changed_after_the_first_pass_stops_the_collection(tmp_path, finished_run):
    path = next(iter(finished_run.glob("steps.parquet")))
    with pytest.raises(CollectError, match="changed while being collected"):
        read_checked(path, "0" * 64)


def test_a_table_whose_pages_cannot_be_decoded_is_named(tmp_path, finished_run):
    """Its footer reads and its manifest lists its bytes (resealed): decoding it is a clear error."""
    path = tmp_path / "rollouts.parquet"
    data = bytearray((finished_run / "rollouts.parquet").read_bytes())
    data[8:200] = b"\xab" * 192  # the first page header overwritten
    path.write_bytes(bytes(data))
    with pytest.raises(CollectError, match="rollouts.parquet: not a readable parquet file"):
        read_checked(path, hashlib.sha256(bytes(data)).hexdigest())


def test_a_failing_collection_puts_no_snapshot_in_place_and_its_error_propagates(tmp_path):
    kept = Snapshot(tmp_path, "steps")
    table = pa.table({"run_hash": ["a", "a"], "x": [1, 2]})
    with pytest.raises(OSError, match="the caller's"):
        with kept.recording([("f", "d")], table.schema) as record:
            record(table)
            raise OSError("the caller's")
    assert not kept.data.exists() and not kept.index.exists()
    assert list((tmp_path / ".rlvr_sweep").iterdir()) == []  # no temporary file left either
    kept.keep([("f", "d")], [2], table)
    assert kept.table([("f", "d")]).equals(table) and kept.table([("f", "other")]) is None


def test_verify_reads_the_runs_own_files_never_a_snapshot(tmp_path, finished_run, settled_now):
    """A snapshot forged whole (its index rewritten to match) fools `collect`, which trusts the cache as
    it trusts the remembered digests; `verify`'s load decodes the runs' files, whose bytes PASS 1 hashes."""
    from rlvr_sweep.verify.passes import load_checked_sweep

    root = _sweep(tmp_path, finished_run, 2)
    real = collect(root)
    entries = [(p, d) for p, d in _files(root, "steps")]
    forged = pa.Table.from_pandas(real["steps"].assign(gen_tokens=real["steps"]["gen_tokens"] + 1000), preserve_index=False)
    Snapshot(root, "steps").keep(entries, [len(real["steps"]) // 2] * 2, forged)
    assert (collect(root)["steps"]["gen_tokens"] >= 1000).all()  # the cache is believed here
    assert collect(root, kept=False)["steps"].equals(real["steps"])
    sweep = load_checked_sweep(root)
    assert sorted(sweep.steps["gen_tokens"]) == sorted(real["steps"]["gen_tokens"])

"""What collect remembers between calls (`store.remembered`): nothing read twice that has not changed,
and nothing changed that goes unread: a flipped byte is caught whatever the cache holds."""

from __future__ import annotations

import importlib
import json
import os

import pytest

from rlvr_sweep.analysis.grouping import read_config
from rlvr_sweep.store import CollectError, collect
from rlvr_sweep.store import remembered
from rlvr_sweep.store.collect import gather
from tests.store.test_collect import sweep_of

TABLES = ("steps", "rollouts", "pairs", "grades")


@pytest.fixture
def settled_now(monkeypatch):
    """Files count as settled at once (a copy made by the test is seconds old, not RACY_S)."""
    monkeypatch.setattr(remembered, "RACY_S", -1.0)
    monkeypatch.delenv(remembered.ENV, raising=False)


def flip_a_byte_keeping_size_and_mtime(path) -> None:
    """A flipped byte that size and mtime do not show (what the stamp's ctime and inode are for)."""
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _cache(root) -> dict:
    return json.loads((root / remembered.FOLDER / "tables.json").read_text())


def _count_hashes(monkeypatch) -> list:
    module = importlib.import_module("rlvr_sweep.store.collect")  # the package's `collect` is the function
    calls, real = [], module.hashlib.sha256

    class Counting:
        @staticmethod
        def sha256(data=b""):
            calls.append(len(data))
            return real(data)

    monkeypatch.setattr(module, "hashlib", Counting)
    return calls


def test_a_second_collect_reads_no_table_it_has_checked(tmp_path, finished_run, settled_now, monkeypatch):
    root = sweep_of(tmp_path, finished_run, "a")
    first = gather(root, False)
    entries = _cache(root)["entries"]
    assert sorted(os.path.basename(k) for k in entries) == sorted(f"{t}.parquet" for t in TABLES)
    hashes = _count_hashes(monkeypatch)
    second = gather(root, False)
    assert hashes == []  # nothing hashed: every table was remembered in the state it is in
    assert [(p, d, s) for p, d, s in second[2]["rollouts"]] == [(p, d, s) for p, d, s in first[2]["rollouts"]]
    assert all(second[2][t][0][2].equals(first[2][t][0][2]) for t in TABLES)  # the same arrow schemas
    frames = collect(root)  # decoded: each file read and checked against the first pass's digest
    assert len(frames["steps"]) == 2 and len(hashes) == 4
    hashes.clear()
    again = collect(root)  # the same files: their joined tables come from the snapshot, none read
    assert hashes == [] and all(again[t].equals(frames[t]) for t in TABLES)


def test_a_flipped_byte_is_caught_after_the_cache_remembered_the_file(tmp_path, finished_run, settled_now):
    root = sweep_of(tmp_path, finished_run, "a")
    collect(root)
    flip_a_byte_keeping_size_and_mtime(root / "smoke/ra_flat/a/steps.parquet")
    with pytest.raises(CollectError, match="content differs from the manifest"):
        gather(root, False)
    with pytest.raises(CollectError, match="content differs from the manifest"):
        collect(root)


def test_a_file_changed_just_before_it_was_read_is_not_remembered(tmp_path, finished_run, monkeypatch):
    monkeypatch.delenv(remembered.ENV, raising=False)
    monkeypatch.setattr(remembered, "RACY_S", 3600.0)  # the rule, not the machine's speed: within the hour
    root = sweep_of(tmp_path, finished_run, "a")  # just copied: its ctime is now
    collect(root)
    assert not (root / remembered.FOLDER / "tables.json").exists()


def test_the_cache_can_be_turned_off_and_a_garbled_one_is_ignored(tmp_path, finished_run, settled_now, monkeypatch):
    root = sweep_of(tmp_path, finished_run, "a")
    monkeypatch.setenv(remembered.ENV, "0")
    collect(root)
    assert not (root / remembered.FOLDER).exists()
    monkeypatch.delenv(remembered.ENV)
    (root / remembered.FOLDER).mkdir()
    (root / remembered.FOLDER / "tables.json").write_text("{not json")
    assert len(collect(root)["runs"]) == 1
    assert len(_cache(root)["entries"]) == 4  # rewritten whole


def test_a_remembered_digest_the_manifest_disputes_is_taken_again(tmp_path, finished_run, settled_now, monkeypatch):
    root = sweep_of(tmp_path, finished_run, "a")
    collect(root)
    cache = _cache(root)
    key = next(k for k in cache["entries"] if k.endswith("pairs.parquet"))
    cache["entries"][key][1]["sha256"] = "0" * 64  # a wrong entry for the file in the state it is in
    cache["entries"][key][1]["schema"] = ["not", "an", "id"]
    (root / remembered.FOLDER / "tables.json").write_text(json.dumps(cache))
    assert len(collect(root)["pairs"]) > 0  # hashed again, and it matches its manifest: not a false alarm
    cache = _cache(root)
    cache["entries"][key][1]["sha256"] = "0" * 64
    (root / remembered.FOLDER / "tables.json").write_text(json.dumps(cache))
    hashes = _count_hashes(monkeypatch)
    assert len(gather(root, False)[2]["pairs"]) == 1
    assert len(hashes) == 4  # that run's four tables read and hashed again, nothing believed


def test_parsed_configs_are_remembered_flattened_and_yaml_is_not_parsed_again(tmp_path, finished_run, settled_now,
                                                                            monkeypatch):
    root = sweep_of(tmp_path, finished_run, "a")
    memo = remembered.Remembered(root, "configs")
    first = read_config(root / "smoke/ra_flat/a", memo)
    memo.save()
    assert first["paper_arms.512"] is not None and first["train.steps"] == 2  # int keys: flattened, so JSON-safe
    import rlvr_sweep.analysis.grouping as grouping

    monkeypatch.setattr(grouping.yaml, "load", lambda *a, **k: pytest.fail("parsed again"))
    assert read_config(root / "smoke/ra_flat/a", remembered.Remembered(root, "configs")) == first


def test_facts_that_do_not_read_back_the_same_from_json_are_not_remembered(tmp_path, settled_now):
    import datetime

    path = tmp_path / "f"
    path.write_text("x")
    memo = remembered.Remembered(tmp_path, "configs")
    memo.put(path, path.stat(), {"a": datetime.date(2026, 1, 1)}, read_at=path.stat().st_mtime + 10)
    memo.put(path, path.stat(), {"a": float("nan")}, read_at=path.stat().st_mtime + 10)
    assert memo.get(path, path.stat()) is None
    memo.put(path, path.stat(), {"a": 1.5}, read_at=path.stat().st_mtime + 10)
    assert memo.get(path, path.stat()) == {"a": 1.5}

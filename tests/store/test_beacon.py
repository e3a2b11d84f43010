"""`progress.json` is put in place whole: a write that fails halfway leaves the previous file, and a
reader polling while the run rewrites it never reads part of one (what `status --watch` relies on)."""

from __future__ import annotations

import builtins
import errno
import io
import json
import multiprocessing
import os
import time

import pytest

from rlvr_sweep.store.beacon import PROGRESS_JSON, Beacon, read_progress


class HalfWrite:
    """A file whose writes put down half of what they are given, then fail as a full disk does."""

    def __init__(self, real):
        self.real = real

    def write(self, data):
        self.real.write(data[: len(data) // 2])
        self.real.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.real.close()


@pytest.fixture
def full_disk_for_progress(monkeypatch):
    """Every open of the progress file (or of its temporary file beside it) for writing: a half write."""
    real_open = builtins.open

    def opener(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        name = os.path.basename(os.fspath(file)) if isinstance(file, (str, os.PathLike)) else ""
        return HalfWrite(f) if PROGRESS_JSON in name and any(m in mode for m in "wax") else f

    monkeypatch.setattr(builtins, "open", opener)
    monkeypatch.setattr(io, "open", opener)


def test_a_write_that_fails_halfway_leaves_the_previous_file(tmp_path, request):
    beacon = Beacon(tmp_path, phase="train", done=3, total=50)
    beacon.update()
    before = (tmp_path / PROGRESS_JSON).read_bytes()
    assert json.loads(before)["done"] == 3
    request.getfixturevalue("full_disk_for_progress")
    beacon.update(done=4, note="x" * 4096)  # fails halfway: advisory, so the run goes on
    assert (tmp_path / PROGRESS_JSON).read_bytes() == before
    assert read_progress(tmp_path)["done"] == 3
    assert [p.name for p in tmp_path.iterdir()] == [PROGRESS_JSON]  # no temporary file left behind


def _rewrite_many(run_dir: str, times: int, ready) -> None:
    beacon = Beacon(run_dir, phase="train", total=times)
    beacon.update(done=0, padding="p" * 200_000)
    ready.set()
    for done in range(1, times + 1):
        beacon.update(done=done, padding=("p" if done % 2 else "q") * (200_000 + done))


def test_a_reader_polling_during_many_updates_never_reads_part_of_a_file(tmp_path):
    """A writer process rewrites a ~200 KB progress file 400 times while this one reads it as fast as
    it can: every read is the whole of one version (valid JSON, its padding as long as its step says)."""
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    writer = context.Process(target=_rewrite_many, args=(str(tmp_path), 400, ready))
    writer.start()
    assert ready.wait(120), "the writer did not start"
    reads, last, deadline = 0, 0, time.monotonic() + 300
    while writer.is_alive() and time.monotonic() < deadline:
        text = (tmp_path / PROGRESS_JSON).read_text()  # always there: the rename replaces it whole
        fields = json.loads(text)
        assert len(fields["padding"]) == 200_000 + fields["done"] * (fields["done"] > 0)
        assert fields["done"] >= last  # versions in order: never an older file after a newer one
        last, reads = fields["done"], reads + 1
    writer.join(60)
    assert writer.exitcode == 0
    assert reads >= 20, f"only {reads} reads overlapped the writes: the test saw too little to tell"
    assert read_progress(tmp_path)["done"] == 400

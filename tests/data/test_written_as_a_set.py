"""`data prepare` and `data build-splits` write their files as a set (#33). Seen: a full disk gave an
`OSError: [Errno 28]` traceback and a half set (2 of 4 files new, `data check` then 0 of 7), and a data
root that is a file `[Errno 17] File exists`, exit 1. Want: one line, exit 2, and the previous files
byte for byte (or none); the disk is filled by a simulated ENOSPC on the third file here, and by a real
tmpfs in the slow tier."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr_sweep.data import jsonl
from rlvr_sweep.data.canonical import check
from rlvr_sweep.data.cli import main
from rlvr_sweep.data.prepare import prepare
from tests.conftest import need_data
from tests.data.upstream import FILES, edit_array, edit_line, write_upstream


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> Path:
    return write_upstream(tmp_path_factory.mktemp("upstream"))


@pytest.fixture(scope="module")
def other_upstream(upstream, tmp_path_factory) -> Path:
    """The upstream files with one row of each changed, so all four outputs differ."""
    raw = tmp_path_factory.mktemp("other") / "raw"
    shutil.copytree(upstream, raw)
    edit_array(raw / "math_full_minus_math500.json", 4, answer="another answer")
    _edit_small(raw)
    return raw


def _edit_small(raw: Path) -> None:
    edit_array(raw / "math500_test.json", 3, answer="another answer")
    edit_line(raw / "gsm8k/test.jsonl", 2, answer="Another solution.\n#### 12345")
    edit_line(raw / "amc23/test.jsonl", 1, answer=999.0)


def _files(folder: Path) -> dict[str, bytes | str]:
    """Every entry of `folder`, hidden ones (a temporary folder left behind) included."""
    return {p.name: p.read_bytes() if p.is_file() else "a folder" for p in sorted(folder.iterdir())}


def _full_on(monkeypatch, nth: int) -> list[str]:
    """Make the `nth` file `write_files` writes fail as on a full disk; the names it was asked to write."""
    asked, real = [], jsonl.atomic_write_bytes

    def write(path: Path, data: bytes) -> None:
        asked.append(Path(path).name)
        if len(asked) == nth:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, data)

    monkeypatch.setattr(jsonl, "atomic_write_bytes", write)
    return asked


def test_a_full_disk_leaves_the_previous_set_byte_for_byte(upstream, other_upstream, tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    prepare(upstream, data, say=lambda _: None)
    before = _files(data)
    asked = _full_on(monkeypatch, 3)
    assert main(["prepare", "--raw", str(other_upstream), "--data-root", str(data), "--force"]) == 2
    assert asked == ["math_train.jsonl", "math500.jsonl", "gsm8k_test.jsonl"]
    assert capsys.readouterr().err == (f"prepare: error: {data / 'gsm8k_test.jsonl'}: No space left on device; "
                                       f"nothing in {data} was changed\n")
    assert _files(data) == before  # no new file beside old ones, no temporary folder left
    assert [f.status for f in check(data)[:4]] == ["ok"] * 4
    monkeypatch.undo()  # room again: the whole new set goes in
    assert main(["prepare", "--raw", str(other_upstream), "--data-root", str(data), "--force"]) == 0
    after = _files(data)
    assert sorted(after) == sorted(FILES) and all(after[n] != before[n] for n in FILES)


def test_a_full_disk_on_a_new_data_root_leaves_no_data_file(upstream, tmp_path, monkeypatch, capsys):
    _full_on(monkeypatch, 3)
    assert main(["prepare", "--raw", str(upstream), "--data-root", str(tmp_path / "data")]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert _files(tmp_path / "data") == {}


def test_a_rename_that_fails_puts_the_files_it_replaced_back(upstream, other_upstream, tmp_path, monkeypatch, capsys):
    """The moves are renames, which a full disk does not stop; should one fail anyway (an I/O error), the
    files already moved in are swapped back for the previous ones."""
    data = tmp_path / "data"
    prepare(upstream, data, say=lambda _: None)
    before = _files(data)
    real, moves_in = os.replace, []

    def replace(src, dst):
        if Path(dst).parent == data and Path(src).parent.name.startswith(".new-files"):
            moves_in.append(Path(dst).name)
            if len(moves_in) == 2:
                raise OSError(errno.EIO, os.strerror(errno.EIO), str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    assert main(["prepare", "--raw", str(other_upstream), "--data-root", str(data), "--force"]) == 2
    monkeypatch.undo()
    assert moves_in[:2] == ["math_train.jsonl", "math500.jsonl"]
    assert capsys.readouterr().err == (f"prepare: error: {data / 'math500.jsonl'}: Input/output error; "
                                       f"the previous files in {data} were put back\n")
    assert _files(data) == before


def test_build_splits_writes_its_seven_files_as_a_set(tmp_path, monkeypatch, capsys):
    shared = need_data("math_train.jsonl", "math500.jsonl")
    out = tmp_path / "splits"
    split = ["build-splits", "--out", str(out), "--data-root", str(shared)]
    assert main([*split, "--seed", "0"]) == 0
    before = _files(out)
    capsys.readouterr()
    asked = _full_on(monkeypatch, 3)
    assert main([*split, "--seed", "1", "--force"]) == 2
    err = capsys.readouterr().err
    assert len(asked) == 3 and err == (f"build-splits: error: {out / asked[2]}: No space left on device; "
                                       f"nothing in {out} was changed\n")
    assert _files(out) == before


def test_a_data_root_that_is_a_file_is_named_as_such(upstream, tmp_path, capsys):
    mine = tmp_path / "data"
    mine.write_text("mine")
    assert main(["prepare", "--raw", str(upstream), "--data-root", str(mine)]) == 2
    assert capsys.readouterr().err == f"prepare: error: data root {mine} is a file, not a folder\n"
    assert main(["prepare", "--raw", str(upstream), "--data-root", str(mine / "sub")]) == 2
    assert capsys.readouterr().err == (f"prepare: error: data root {mine / 'sub'} cannot be made: {mine} is a file, "
                                       "not a folder\n")
    assert main(["check", "--data-root", str(mine)]) == 2
    assert capsys.readouterr().err == f"check: error: data root {mine} is a file, not a folder (--data-root, or " \
                                      "RLVR_SWEEP_DATA)\n"
    assert main(["build-splits", "--out", str(tmp_path / "s"), "--seed", "0", "--data-root", str(mine)]) == 2
    assert f"data root {mine} is a file, not a folder" in capsys.readouterr().err
    shared = need_data("math_train.jsonl", "math500.jsonl")
    assert main(["build-splits", "--out", str(mine), "--seed", "0", "--data-root", str(shared)]) == 2
    assert capsys.readouterr().err == f"build-splits: error: splits folder {mine} is a file, not a folder\n"
    assert mine.read_text() == "mine"


def _pages(size: int) -> int:
    return -(-size // 4096)


@pytest.mark.slow
def test_a_real_full_disk_leaves_the_previous_set(upstream, tmp_path):
    """A tmpfs (in a private mount namespace, so it goes with the process) that holds the first set and
    600 KiB more: room for the new math500.jsonl (436 KiB) but not then for the new gsm8k_test.jsonl
    (820 KiB), whichever way they are written. `prepare --force` of a set whose three small files changed
    runs out of room on gsm8k_test.jsonl; the data root keeps the first set byte for byte (written one
    by one, it became a new math500.jsonl beside an old gsm8k_test.jsonl)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    probe = subprocess.run(["unshare", "-m", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                           capture_output=True) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (unshare -m and mount need root); the simulated ENOSPC tests cover it")
    raw = tmp_path / "raw"
    shutil.copytree(upstream, raw)
    _edit_small(raw)
    shared = need_data(*FILES)
    first = sum(_pages((shared / n).stat().st_size) for n in FILES)
    size = (first + 150) * 4096
    data, command = mnt / "data", f"{sys.executable} -m rlvr_sweep.data prepare"
    script = (f"mount -t tmpfs -o size={size} tmpfs {mnt} && {command} --raw {upstream} --data-root {data} >/dev/null"
              f" && cp -a {data} {tmp_path / 'before'} || exit 90\n"
              f"{command} --raw {raw} --data-root {data} --force 2>{tmp_path / 'err'}; echo $? >{tmp_path / 'rc'}\n"
              f"cp -a {data} {tmp_path / 'after'}\n")
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    err = (tmp_path / "err").read_text()
    assert (tmp_path / "rc").read_text() == "2\n", err
    assert err == (f"prepare: error: {data / 'gsm8k_test.jsonl'}: No space left on device; nothing in {data} "
                   "was changed\n")
    assert _files(tmp_path / "after") == _files(tmp_path / "before")
    assert all((tmp_path / "after" / n).read_bytes() == (shared / n).read_bytes() for n in FILES)

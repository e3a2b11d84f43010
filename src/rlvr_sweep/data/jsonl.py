"""JSON Lines data files: every row an object with string `problem` and `answer` fields and an id of its own.

A missing file or a malformed line (not UTF-8, not a JSON object, a field missing) fails with the file,
the line number and what is wrong; so do two rows that share an id, naming both lines. A row's id is its
`id`, else its `unique_id`, else `<stem>/<line - 1>`; two problems under one id would be graded, voted
and counted as one item (a 3-item benchmark reported as 2), so every file the run reads is refused
with them (`read_jsonl`, which the training and benchmark loaders go through).

`write_files` puts a set of data files into a folder whole or not at all (`data prepare` writes four,
`build-splits` seven): a reader, and `data check`, see the previous set or the new one, never a mix.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from rlvr_sweep.io import atomic_write_bytes, temp_name

REQUIRED_FIELDS = ("problem", "answer")


class DataError(ValueError):
    """A data file is missing or a row is malformed; the message names the file and line."""


_READ: dict[tuple, list[dict]] = {}


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSON Lines file, each checked to have string `problem` and `answer` fields and an id no
    other row has. A file read once in a process is not parsed again while its inode, size, mtime and ctime
    stay the same (a sweep plans every job on the same files); each call gets its own copies of the rows."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"data file not found: {path} (set data.root or RLVR_SWEEP_DATA to the folder holding it; "
                        "`python -m rlvr_sweep.data prepare` makes the files: docs/configuration.md)")
    st = path.stat()
    key = (os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _READ:
        _READ[key] = _parse(path)
    return [dict(row) for row in _READ[key]]


def _parse(path: Path) -> list[dict]:
    rows, seen = [], {}  # seen: id -> its line
    try:
        with path.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError) as err:
                    raise DataError(f"{path}:{lineno}: not valid JSON ({json_problem(err)})") from None
                if not isinstance(row, dict):
                    raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
                for key in REQUIRED_FIELDS:
                    if not isinstance(row.get(key), str):
                        raise DataError(f"{path}:{lineno}: field {key!r} missing or not a string")
                row.setdefault("id", str(row.get("unique_id", f"{path.stem}/{lineno - 1}")))
                row["id"] = str(row["id"])
                if row["id"] in seen:
                    raise DataError(f"{path}:{seen[row['id']]} and :{lineno} share the id {row['id']!r} "
                                    "(each row's id, its `id` or else `unique_id`, must name one problem)")
                seen[row["id"]] = lineno
                rows.append(row)
    except UnicodeDecodeError:
        raise DataError(not_utf8(path)) from None
    if not rows:
        raise DataError(f"{path}: no rows")
    return rows


def json_problem(err: Exception) -> str:
    """What `json.loads` refused, in a few words: its message, a number too long, or nesting too deep."""
    if isinstance(err, json.JSONDecodeError):
        return err.msg
    if isinstance(err, RecursionError):
        return "nested too deeply"
    return str(err).split(";")[0]  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"


def not_utf8(path: Path, data: bytes | None = None) -> str:
    """The one-line error for a file that is not UTF-8 text: its first bad line and byte. (A byte of a
    multi-byte character is never `\\n`, so the lines can be decoded one by one.)"""
    lines = (Path(path).read_bytes() if data is None else data).split(b"\n")
    for lineno, line in enumerate(lines, start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as err:
            return f"{path}:{lineno}: not UTF-8 text (byte {line[err.start]:#04x} at column {err.start + 1})"
    return f"{path}: not UTF-8 text"


def line_of(path: Path, index: int) -> int:
    """The line number (1-based) of the `index`-th row of a JSON Lines file (blank lines are no rows)."""
    seen = -1
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            seen += bool(line.strip())
            if seen == index:
                return lineno
    return index + 1


# -- writing a set of files -----------------------------------------------------------------------

def need_folder(path: Path, what: str) -> None:
    """A DataError naming `path` when it, or a folder above it, exists and is not a folder (where `mkdir`
    would say only `[Errno 17] File exists`). A path that does not exist yet passes."""
    path = Path(path)
    for above in (path, *path.parents):
        if above.exists():
            if not above.is_dir():
                raise DataError(f"{what} {path} is a file, not a folder" if above == path else
                                f"{what} {path} cannot be made: {above} is a file, not a folder")
            return


def os_error_line(err: OSError) -> str:
    """An OSError as one line naming its file (`[Errno 28] ...: '/x'` reads as a traceback's last line)."""
    return f"{err.filename}: {err.strerror}" if err.filename and err.strerror else str(err)


def write_files(folder: Path, files: dict[str, bytes]) -> None:
    """Put every file of `files` ({name: content}) into `folder`, or none of them.

    Each is written whole and flushed to disk in a temporary folder inside `folder` (`.new-files.tmp-<pid>`,
    what a killed writer leaves), and only when all are there are they renamed in; a rename that fails puts
    the files already replaced back. So a full disk leaves the previous set (or nothing), never new files
    beside old ones. Raises an OSError naming the file and saying what was left, or a DataError for a folder
    that is a file."""
    folder = Path(folder)
    need_folder(folder, "folder")
    if not files:
        return
    odd = [folder / n for n in files if (folder / n).exists() and not (folder / n).is_file()]
    if odd:
        raise DataError(f"{odd[0]} is not a file; nothing in {folder} was changed")
    stage = temp_name(folder / "new-files")
    try:
        target = folder
        try:
            folder.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(stage, ignore_errors=True)  # a killed writer's, under this pid
            stage.mkdir()
            for name, body in files.items():
                target = folder / name
                atomic_write_bytes(stage / name, body)
        except OSError as err:
            raise OSError(err.errno, f"{err.strerror}; nothing in {folder} was changed", str(target)) from None
        _move_in(stage, folder, list(files))
    finally:
        if not any(stage.glob("*.previous")):  # else the previous files could not be put back: keep them
            shutil.rmtree(stage, ignore_errors=True)


def _move_in(stage: Path, folder: Path, names: list[str]) -> None:
    """Rename `stage/<name>` over `folder/<name>` for each name, each replaced file kept in `stage` as
    `<name>.previous` until all are in; on a failure, the replaced files are put back and an OSError raised."""
    moved = []  # (name, where the file it replaced went, None when there was none)
    try:
        for name in names:
            target, previous = folder / name, stage / f"{name}.previous"
            if target.exists() or target.is_symlink():
                os.replace(target, previous)
            else:
                previous = None
            moved.append((name, previous))
            os.replace(stage / name, target)
    except OSError as err:
        failed = folder / name
        try:
            for name, previous in reversed(moved):
                if previous is None:
                    (folder / name).unlink(missing_ok=True)
                elif previous.exists():
                    os.replace(previous, folder / name)
        except OSError:
            raise OSError(err.errno, f"{err.strerror}; putting the previous files back failed too: they are in "
                                     f"{stage}", str(failed)) from None
        raise OSError(err.errno, f"{err.strerror}; the previous files in {folder} were put back",
                      str(failed)) from None
    for _, previous in moved:
        if previous is not None:
            previous.unlink()

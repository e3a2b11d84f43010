"""JSON Lines data files: every row an object with string `problem` and `answer` fields.

A missing file or a malformed line fails with the file, the line number and what is wrong.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

REQUIRED_FIELDS = ("problem", "answer")


class DataError(ValueError):
    """A data file is missing or a row is malformed; the message names the file and line."""


_READ: dict[tuple, list[dict]] = {}


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSON Lines file, each checked to have string `problem` and `answer` fields. A file read
    once in a process is not parsed again while its inode, size, mtime and ctime stay the same (a sweep
    plans every job on the same files); each call gets its own copies of the rows."""
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
    rows = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
            for key in REQUIRED_FIELDS:
                if not isinstance(row.get(key), str):
                    raise DataError(f"{path}:{lineno}: field {key!r} missing or not a string")
            row.setdefault("id", str(row.get("unique_id", f"{path.stem}/{lineno - 1}")))
            row["id"] = str(row["id"])
            rows.append(row)
    if not rows:
        raise DataError(f"{path}: no rows")
    return rows


def line_of(path: Path, index: int) -> int:
    """The line number (1-based) of the `index`-th row of a JSON Lines file (blank lines are no rows)."""
    seen = -1
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            seen += bool(line.strip())
            if seen == index:
                return lineno
    return index + 1

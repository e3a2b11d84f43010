"""JSON Lines data files: every row an object with string `problem` and `answer` fields.

A missing file or a malformed line fails with the file, the line number and what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

REQUIRED_FIELDS = ("problem", "answer")


class DataError(ValueError):
    """A data file is missing or a row is malformed; the message names the file and line."""


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSON Lines file, each checked to have string `problem` and `answer` fields."""
    if not path.is_file():
        raise DataError(f"data file not found: {path} (set data.root or RLVR_SWEEP_DATA to the folder holding it; see README)")
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

"""Problems and gold answers: MATH training rows, benchmark files, and the embedded toy task.

Every row handed to training or evaluation is a dict with at least `id`, `problem` and `answer`
(strings). JSONL files live under `data.root` (README: where each file comes from); a missing or
malformed file fails with the file, the line and what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr_sweep.config import DataConfig

# benchmark name -> JSONL file under data.root (the toy split is generated, not read)
BENCHMARK_FILES = {"math500": "math500.jsonl"}
TOY_BENCHMARKS = ("toy_heldout",)
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


def training_rows(cfg: DataConfig) -> list[dict]:
    """The ordered training rows; step s uses row s % len(rows)."""
    if cfg.name == "toy_arith":
        from rlvr_sweep import toy_arith

        rows = toy_arith.load_split("train", cfg.toy_train_size, seed=cfg.toy_seed)
    elif cfg.name == "math_train":
        rows = read_jsonl(Path(cfg.root) / cfg.train_file)
    else:
        raise DataError(f"unknown data {cfg.name!r}; valid: ['math_train', 'toy_arith']")
    return rows[: cfg.limit] if cfg.limit is not None else rows


def benchmark_rows(name: str, cfg: DataConfig, limit: int | None = None) -> list[dict]:
    """The items of one evaluation benchmark, in file order."""
    if name in TOY_BENCHMARKS:
        from rlvr_sweep import toy_arith

        rows = toy_arith.load_split("heldout", cfg.toy_heldout_size, seed=cfg.toy_seed)
    elif name in BENCHMARK_FILES:
        rows = read_jsonl(Path(cfg.root) / BENCHMARK_FILES[name])
    else:
        raise DataError(f"unknown benchmark {name!r}; valid: {sorted([*BENCHMARK_FILES, *TOY_BENCHMARKS])}")
    return rows[:limit] if limit is not None else rows

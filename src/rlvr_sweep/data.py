"""Problems and gold answers: MATH training rows, benchmark files, and the embedded toy task.

Every row handed to training or evaluation is a dict with at least `id`, `problem` and `answer`
(strings). JSONL files live under `data.root` (README: where each file comes from); a missing or
malformed file fails with the file, the line and what is wrong.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rlvr_sweep.config import DataConfig

# benchmark name -> (JSONL file, rows kept); see data_file for where each file is looked up
BENCHMARK_FILES = {
    "math500": ("math500.jsonl", None),
    "math_val210": ("math_val210.jsonl", None),
    "gsm8k200": ("gsm8k_test.jsonl", 200),
    "amc23": ("amc23.jsonl", None),
}
COMBINED_BENCHMARKS = {"ext240": ("gsm8k200", "amc23")}  # GSM8K-200 followed by AMC23-40
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


def data_file(name: str, cfg: DataConfig) -> Path:
    """Where a data file lives: the built splits (math_val210, math_train_stratified,
    math_train_zpd; `python -m rlvr_sweep.data build-splits --out DIR`) in `data.splits_dir`
    (default `<data.root>/splits`), every other file in `data.root`."""
    from rlvr_sweep.splits import SPLIT_NAMES

    if Path(name).stem in SPLIT_NAMES:
        return Path(cfg.splits_dir or Path(cfg.root) / "splits") / name
    return Path(cfg.root) / name


def read_data_file(name: str, cfg: DataConfig) -> list[dict]:
    path = data_file(name, cfg)
    if path.parent != Path(cfg.root) and not path.is_file():
        raise DataError(f"split file not found: {path}; build the splits with "
                        f"`python -m rlvr_sweep.data build-splits --out {path.parent} --seed 0` or set data.splits_dir")
    return read_jsonl(path)


def training_rows(cfg: DataConfig) -> list[dict]:
    """The ordered training rows; step s uses row s % len(rows)."""
    if cfg.name == "toy_arith":
        from rlvr_sweep import toy_arith

        rows = toy_arith.load_split("train", cfg.toy_train_size, seed=cfg.toy_seed)
    elif cfg.train_file:
        rows = read_data_file(cfg.train_file, cfg)
    else:
        raise DataError(f"data {cfg.name!r} names no data.train_file")
    return rows[: cfg.limit] if cfg.limit is not None else rows


def benchmark_names() -> list[str]:
    return sorted([*BENCHMARK_FILES, *COMBINED_BENCHMARKS, *TOY_BENCHMARKS])


def benchmark_rows(name: str, cfg: DataConfig, limit: int | None = None) -> list[dict]:
    """The items of one evaluation benchmark, in file order; each row carries its `source`
    benchmark (ext240 rows say gsm8k200 or amc23, so results can be split back)."""
    if name in TOY_BENCHMARKS:
        from rlvr_sweep import toy_arith

        rows = toy_arith.load_split("heldout", cfg.toy_heldout_size, seed=cfg.toy_seed)
    elif name in BENCHMARK_FILES:
        file, keep = BENCHMARK_FILES[name]
        rows = read_data_file(file, cfg)[:keep]
    elif name in COMBINED_BENCHMARKS:
        return [row for part in COMBINED_BENCHMARKS[name] for row in benchmark_rows(part, cfg)][:limit]
    else:
        raise DataError(f"unknown benchmark {name!r}; valid: {benchmark_names()}")
    rows = [{**row, "source": name} for row in rows]
    return rows[:limit] if limit is not None else rows


def main(argv: list[str] | None = None) -> int:
    """`python -m rlvr_sweep.data build-splits --out DIR --seed N [--data-root DIR]`."""
    from rlvr_sweep import splits

    return splits.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())

"""Problems and gold answers: MATH training rows, benchmark files, and the embedded toy task.

Every row handed to training or evaluation is a dict with at least `id`, `problem` and `answer`
(strings). JSONL files live under `data.root` (docs/configuration.md: where each file comes from); a missing or
malformed file fails with the file, the line and what is wrong. The built-in benchmarks are entries of
`tasks.BENCHMARKS` beside those a task of one's own adds (`tasks.TASKS`), and a `data.name` a task
registered makes its training rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rlvr_sweep.data import toy_arith
from rlvr_sweep.data.prepare import NUMBER
from rlvr_sweep.data.jsonl import DataError, line_of, read_jsonl
from rlvr_sweep.data.splits import SPLIT_NAMES
from rlvr_sweep.data.tasks import BENCHMARKS, TASKS, Benchmark, task_rows

if TYPE_CHECKING:  # a type only: reading data files needs no Hydra
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


def data_file(name: str, cfg: DataConfig) -> Path:
    """Where a data file lives: the built splits (math_val210, math_train_stratified,
    math_train_zpd; `python -m rlvr_sweep.data build-splits --out DIR`) in `data.splits_dir`
    (default `<data.root>/splits`), every other file in `data.root`."""
    if Path(name).stem in SPLIT_NAMES:
        return Path(cfg.splits_dir or Path(cfg.root) / "splits") / name
    return Path(cfg.root) / name


# file -> (what its gold answers must be, the rule): a file whose answers break it would be graded all wrong
ANSWER_RULES = {
    "gsm8k_test.jsonl": ("a number", lambda a: bool(NUMBER.fullmatch(a.strip()))),
    "amc23.jsonl": ("a whole number", lambda a: a.strip().lstrip("-").isdigit()),
}


def read_data_file(name: str, cfg: DataConfig) -> list[dict]:
    """The rows of a training or benchmark file as a run reads them (`read_jsonl`: well-formed rows, no two
    sharing an id) with its gold answers checked; `data check` reads a file that differs through it too."""
    path = data_file(name, cfg)
    if path.parent != Path(cfg.root) and not path.is_file():
        raise DataError(f"split file not found: {path}; build the splits with "
                        f"`python -m rlvr_sweep.data build-splits --out {path.parent} --seed 0` or set data.splits_dir")
    rows = read_jsonl(path)
    if path.name in ANSWER_RULES:
        what, ok = ANSWER_RULES[path.name]
        for i, row in enumerate(rows):
            if not ok(row["answer"]):
                raise DataError(f"{path}:{line_of(path, i)}: answer {row['answer'][:40]!r} is not {what} "
                                "(python -m rlvr_sweep.data prepare writes the file from its upstream source)")
    return rows


def training_rows(cfg: DataConfig) -> list[dict]:
    """The ordered training rows; step s uses row s % len(rows)."""
    if cfg.name in TASKS:
        rows = task_rows(cfg)
    elif cfg.name == "toy_arith":
        rows = toy_arith.load_split("train", cfg.toy_train_size, seed=cfg.toy_seed)
    elif training_file(cfg):
        rows = read_data_file(cfg.train_file, cfg)
    else:
        raise DataError(f"data {cfg.name!r} names no data.train_file")
    return rows[: cfg.limit] if cfg.limit is not None else rows


def benchmark_names() -> list[str]:
    return sorted(BENCHMARKS)


def benchmark_files(name: str, cfg: DataConfig) -> list[Path]:
    """The files a benchmark's rows are read from ([] for the generated toy task and a task's own rows)."""
    return BENCHMARKS[name].files(cfg) if name in BENCHMARKS else []


def training_file(cfg: DataConfig) -> Path | None:
    """The file the training rows are read from (None for the generated toy task and a task's own rows)."""
    if cfg.name == "toy_arith" or cfg.name in TASKS or not cfg.train_file:
        return None
    return data_file(cfg.train_file, cfg)


def benchmark_rows(name: str, cfg: DataConfig, limit: int | None = None) -> list[dict]:
    """The items of one evaluation benchmark, in file order; each row carries its `source`
    benchmark (ext240 rows say gsm8k200 or amc23, so results can be split back)."""
    if name not in BENCHMARKS:
        raise DataError(f"unknown benchmark {name!r}; valid: {benchmark_names()}")
    rows = BENCHMARKS[name].rows(cfg)
    return rows[:limit] if limit is not None else rows


def _file_rows(name: str):
    file, keep = BENCHMARK_FILES[name]
    return lambda cfg: [{**row, "source": name} for row in read_data_file(file, cfg)[:keep]]


def _combined_rows(name: str):
    return lambda cfg: [row for part in COMBINED_BENCHMARKS[name] for row in benchmark_rows(part, cfg)]


for _name in BENCHMARK_FILES:
    BENCHMARKS[_name] = Benchmark(_name, _file_rows(_name), lambda cfg, n=_name: [data_file(BENCHMARK_FILES[n][0], cfg)])
for _name in COMBINED_BENCHMARKS:
    BENCHMARKS[_name] = Benchmark(_name, _combined_rows(_name), lambda cfg, n=_name: [
        f for part in COMBINED_BENCHMARKS[n] for f in benchmark_files(part, cfg)])
BENCHMARKS["toy_heldout"] = Benchmark("toy_heldout", lambda cfg: [
    {**row, "source": "toy_heldout"} for row in toy_arith.load_split("heldout", cfg.toy_heldout_size, seed=cfg.toy_seed)])

"""Data stage: problems and gold answers (paper §1, §5.1; baseline spec §2).

MATH training rows, the benchmark files (MATH-500, math_val210, GSM8K-200 + AMC23-40), the
deterministic splits built from them, the embedded toy task of the smoke profile, the prompt
template shared by training and evaluation, and tasks of one's own (`TASKS`: their rows, prompt and
benchmarks; their answer rules are filled in by the reward stage). `python -m rlvr_sweep.data build-splits` builds the splits.
"""

from rlvr_sweep.data.benchmarks import (
    BENCHMARK_FILES, COMBINED_BENCHMARKS, TOY_BENCHMARKS, benchmark_files, benchmark_names, benchmark_rows,
    data_file, training_file, training_rows,
)
from rlvr_sweep.data.jsonl import DataError, read_jsonl
from rlvr_sweep.data.prompts import PROMPT_TEMPLATE, encode_prompts, render_prompt
from rlvr_sweep.data.tasks import BENCHMARKS, MATH, TASKS, Benchmark, Task, benchmark_task, task_of
from rlvr_sweep.data.splits import SPLIT_NAMES, build_splits, write_splits

__all__ = [
    "BENCHMARKS", "BENCHMARK_FILES", "Benchmark", "COMBINED_BENCHMARKS", "MATH", "PROMPT_TEMPLATE", "TASKS", "TOY_BENCHMARKS",
    "DataError", "SPLIT_NAMES", "Task", "benchmark_task", "task_of",
    "benchmark_files", "benchmark_names", "training_file", "benchmark_rows", "build_splits", "data_file", "encode_prompts", "read_jsonl",
    "render_prompt", "training_rows", "write_splits",
]

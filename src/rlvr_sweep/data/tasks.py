"""Tasks: what a verifiable task is besides its rows, and the benchmarks that read each task out.

A `Task` says how a problem is asked (its prompt template, `{problem}` filled in, no chat template), how
an answer is read from a response (`extract`, for read-outs; `extract_reward`, for the training reward)
and graded (`grade(pred, gold)`), and what a gold answer must be (`gold`: a description and a check, applied
to every row it reads). MATH is the built-in task: the baseline's prompt (`prompts.PROMPT_TEMPLATE`), the
last `\\boxed{...}` (read-outs fall back to the last number; the reward does not) and the run's grader
(`grader.name`); the toy arithmetic task and any JSONL data of one's own (`data.train_file`) are asked and
graded as MATH. Its extraction and graders live in the reward stage, which fills a task's unset rules
with them (`reward.answering`).

A task of one's own is one registration, in a plugin (docs/extending.md):

    @TASKS.register("countdown", prompt=PROMPT, extract=expression, grade=reaches_target,
                    gold=("'<target>: <numbers>'", is_target_line), benchmarks={"countdown_heldout": heldout},
                    params={"size": param(2000, at_least(1)), "seed": param(0, at_least(0))})
    def countdown(*, size, seed) -> list[dict]: ...   # the training rows, in training order

It is the data option `data=countdown` (`data.name`; parameters as `data.params.size=500`) and every
benchmark it names is an `eval.benchmarks` name. A rows function (the task's, or a benchmark's) takes any of
the task's parameters and `root` (the data folder, `data.root`, for rows read from files) by keyword;
it returns dicts with string `id`, `problem` and `answer`, checked here (`checked_rows`) before any run uses
them. `checksums` ({"train" or a benchmark: sha256 of its rows at the default parameters}) lets
`python -m rlvr_sweep.data check --task NAME` say whether a machine makes the same rows.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rlvr_sweep.config.options import Option, Registry
from rlvr_sweep.data.jsonl import DataError
from rlvr_sweep.data.prompts import PROMPT_TEMPLATE, render_prompt
from rlvr_sweep.io import rows_digest

if TYPE_CHECKING:  # a type here; built where a task's defaults are needed, so reading rows needs no Hydra
    from rlvr_sweep.config import DataConfig

ROW_FIELDS = ("id", "problem", "answer")


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str = PROMPT_TEMPLATE  # "{problem}" is replaced by the row's problem
    extract: Callable[[str], str] | None = None  # response -> answer ("" when none); None: MATH's (reward stage)
    extract_reward: Callable[[str], str] | None = None  # for the training reward; None: `extract` (MATH: strict)
    grade: Callable[[str, str], bool] | None = None  # (pred, gold) -> correct; None: the run's grader.name
    gold: tuple[str, Callable[[str], bool]] | None = None  # (what a gold answer must be, its check)
    benchmarks: tuple[str, ...] = ()
    checksums: dict[str, str] = field(default_factory=dict)
    test_sets: tuple[str, ...] = ()  # its benchmarks that are test sets: never a search's objective by accident

    @property
    def built_in(self) -> bool:
        return self.name == MATH.name

    def render(self, problem: str) -> str:
        return render_prompt(problem, self.prompt)


MATH = Task("math")  # MATH, the toy task, and JSONL data of one's own
# the package's own data names (conf/data/ and the task MATH's name): no plugin task may take one
BUILT_IN_DATA = frozenset({MATH.name, "math_train", "math_train_stratified", "math_train_zpd", "toy_arith"})


@dataclass(frozen=True)
class Benchmark:
    """A set of read-out items: its rows (in read-out order) and the files they are read from."""

    name: str
    rows: Callable[[DataConfig], list[dict]]
    files: Callable[[DataConfig], list[Path]] = lambda cfg: []
    task: str = MATH.name


BENCHMARKS: dict[str, Benchmark] = {}  # name -> Benchmark: the built-in ones (`benchmarks`) and the tasks'


class TaskRegistry(Registry):
    """`data.name` options that are tasks of their own (`TASKS.register(name, prompt=..., ...)`)."""

    def register(self, name: str, *, prompt: str = PROMPT_TEMPLATE, extract=None, extract_reward=None, grade=None,
                 gold=None, benchmarks: dict | None = None, checksums: dict | None = None,
                 test_sets: tuple[str, ...] = (), **declared) -> Callable:
        if "{problem}" not in prompt:
            raise ValueError(f"task {name!r}: its prompt has no '{{problem}}' for the problem to go in")
        if gold is not None and not (isinstance(gold, tuple) and len(gold) == 2 and callable(gold[1])):
            raise ValueError(f"task {name!r}: gold is (what a gold answer must be, a check of one answer)")
        benchmarks = dict(benchmarks or {})
        unknown = [b for b in test_sets if b not in benchmarks]
        if isinstance(test_sets, str) or unknown:
            raise ValueError(f"task {name!r}: test_sets names {unknown or test_sets!r}, not among its benchmarks "
                             f"{sorted(benchmarks)} (a tuple of their names)")
        task = Task(name, prompt, extract, extract_reward, grade, gold, tuple(benchmarks), dict(checksums or {}),
                    tuple(test_sets))

        def decorate(fn: Callable) -> Callable:
            if name in BUILT_IN_DATA or name in BENCHMARKS:
                raise ValueError(f"task {name!r}: the name is the package's own ({'data' if name in BUILT_IN_DATA else 'benchmark'}"
                                 f" {name!r}): a plugin's task cannot stand in for it; give it a name of its own")
            builtin = [b for b in benchmarks if b in BENCHMARKS and BENCHMARKS[b].task == MATH.name]
            if builtin:
                raise ValueError(f"task {name!r}: benchmark name(s) {builtin} are the package's own: a plugin's rows "
                                 "cannot stand in for them (every run reading them would read the plugin's); give "
                                 "each benchmark a name of its own")
            taken = [b for b in benchmarks if b in BENCHMARKS and BENCHMARKS[b].task != name]
            if taken:
                raise ValueError(f"task {name!r}: benchmark name(s) {taken} are taken by another task")
            self.add(Option(name, fn, doc=(fn.__doc__ or "").strip().split("\n")[0], task=task, **declared))
            for bench, rows in benchmarks.items():
                BENCHMARKS[bench] = Benchmark(bench, _task_rows(name, bench, rows), task=name)
            return fn

        return decorate


TASKS = TaskRegistry("task", group="data")


def declared_test_sets() -> dict[str, str]:
    """{benchmark: the task that declares it a test set} over every task registered so far."""
    return {b: option.name for option in TASKS.options() for b in (option.task.test_sets if option.task else ())}


def task_of(data_name: str) -> Task:
    """The task a `data.name` belongs to (MATH unless a task registered it)."""
    return TASKS[data_name].task if data_name in TASKS else MATH


def benchmark_task(name: str) -> Task:
    """The task a benchmark's items are asked and graded as."""
    bench = BENCHMARKS.get(name)
    return MATH if bench is None or bench.task == MATH.name else TASKS[bench.task].task


def task_rows(data: DataConfig) -> list[dict]:
    """The training rows of a registered task, checked (and, for a plugin's task, fixed: `_fixed`)."""
    option = TASKS[data.name]
    return _fixed(option, "training rows", data,
                  lambda: checked_rows(_call(option, option.fn, data), option.task, "training rows", option.fn))


_FIXED: set[tuple] = set()  # (task, set, its settings) whose rows this process found fixed: made once from then on


def _fixed(option: Option, what: str, data: DataConfig, make: Callable[[], list[dict]]) -> list[dict]:
    """A plugin task's rows, made twice and refused, before any run folder exists, when the two differ (an
    unseeded random generator): a run's identity holds its rows' digest, so rows that change from call to call
    would train in a folder the preflight never planned. Once per process and settings: later calls make them
    once (rows that differ between processes are the job's to find: `sweep.planned`)."""
    first = make()
    key = (option.name, what, repr(sorted(option.settings(data).items())), str(data.root))
    if option.built_in or key in _FIXED:
        return first
    if rows_digest(make()) != rows_digest(first):
        raise DataError(f"task {option.name!r}: its {what} differ between two calls with the same parameters (an "
                        "unseeded random generator?): a task's rows must be fixed by its parameters (seed its "
                        "generator from a parameter, e.g. data.params.seed); nothing was started")
    _FIXED.add(key)
    return first


def _task_rows(task: str, bench: str, fn: Callable) -> Callable[[DataConfig], list[dict]]:
    def rows(data: DataConfig) -> list[dict]:
        from rlvr_sweep.config import DataConfig

        option = TASKS[task]
        own = data if data.name == task else DataConfig(name=task, root=data.root)  # another task's run: defaults
        rows = _fixed(option, f"benchmark {bench!r} rows", own,
                      lambda: checked_rows(_call(option, fn, own), option.task, f"benchmark {bench!r}", fn))
        return [{**row, "source": bench} for row in rows]
    return rows


def _call(option: Option, fn: Callable, data: DataConfig):
    """`fn` with the task's parameters (and `root`) it takes by keyword."""
    available = {**option.settings(data), "root": Path(data.root)}
    try:
        accepted = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        accepted = {}
    takes_any = any(p.kind is p.VAR_KEYWORD for p in accepted.values())
    return fn(**{k: v for k, v in available.items() if takes_any or k in accepted})


def checked_rows(rows, task: Task, what: str, fn: Callable) -> list[dict]:
    """`rows` as a list of dicts with string id, problem and answer (the `gold` rule applied), else a
    DataError naming the task, the set, the row and what is wrong. Ids must be distinct."""
    where = f"task {task.name!r} {what} ({getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)})"
    if not isinstance(rows, (list, tuple)) or not rows:
        raise DataError(f"{where}: returned {type(rows).__name__ if rows is not None else 'None'}, "
                        "not a non-empty list of rows")
    out, seen = [], {}
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataError(f"{where}: row {index} is a {type(row).__name__}, not a dict")
        for key in ROW_FIELDS:
            if not isinstance(row.get(key), str) or not row[key]:
                raise DataError(f"{where}: row {index}: field {key!r} missing or not a non-empty string")
            try:
                row[key].encode("utf-8")
            except UnicodeEncodeError as err:  # a lone surrogate: no file, table or tokenizer can hold it
                raise DataError(f"{where}: row {index}: field {key!r} is not valid text ({err.reason} at character "
                                f"{err.start}: {row[key][max(0, err.start - 20):err.start]!r}...)") from None
        if task.gold is not None and not _holds(task.gold[1], row["answer"]):
            raise DataError(f"{where}: row {index} ({row['id']!r}): answer {row['answer'][:60]!r} is not "
                            f"{task.gold[0]}")
        if row["id"] in seen:
            raise DataError(f"{where}: rows {seen[row['id']]} and {index} share the id {row['id']!r}")
        seen[row["id"]] = index
        out.append(dict(row))
    return out


def _holds(check: Callable[[str], bool], answer: str) -> bool:
    try:
        return bool(check(answer))
    except Exception:  # noqa: BLE001  (a gold check that raises says no)
        return False


def task_checksums(name: str, root: str) -> list[tuple[str, int, str, str | None]]:
    """(set, rows, sha256 of its rows, the task's declared sha256 or None) of a task's training rows and each
    of its benchmarks, at the task's default parameters (`data check --task`; the digests a run records as
    its `train` and `benchmark/<name>` inputs)."""
    from rlvr_sweep.config import DataConfig
    from rlvr_sweep.io import rows_digest

    option = TASKS[name]
    data = DataConfig(name=name, root=root, train_file=None)
    sets = [("train", task_rows(data))] + [(b, BENCHMARKS[b].rows(data)) for b in option.task.benchmarks]
    return [(what, len(rows), rows_digest(rows), option.task.checksums.get(what)) for what, rows in sets]

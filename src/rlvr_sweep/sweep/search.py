"""Hyperparameter search under Hydra's search sweepers (`hydra/sweeper=optuna`; docs/search.md).

A search sweeper (any sweeper but the grid's `checked` / basic one) launches trials one batch at a time and
needs each trial's value as a float. A trial is a job like a grid's: its config built and its run planned
(`run.plan`) before anything runs, its run identity-hashed, a finished one skipped. Its value is the
objective (`sweep.objective`, `objective_of`) read from its run's record, averaged over
`sweep.objective_seeds` when given (each seed its own run). A trial that is refused or whose run fails
returns a failure marker that no sweeper can take for a number (`failed_trial`): Optuna records the trial
as failed and the search goes on.

Tuning on a benchmark the paper reports on (MATH-500, Ext240 and its parts, Pool950) would select on the
test set; such an objective is refused unless `sweep.allow_test_objective=true`. The documented default is
the validation split (`math_val210`, or the toy task's held-out split on the smoke profile).

What a search did is kept per launch under the runs' root (`sweep.search_record`).
"""

from __future__ import annotations

import math

from rlvr_sweep.config import ConfigError

GRID_SWEEPERS = ("hydra_plugins.rlvr_sweep_launchers.sweeper.CheckedSweeper",
                 "hydra._internal.core_plugins.basic_sweeper.BasicSweeper")
# benchmarks the paper reports its results on: never the objective of a search by accident
TEST_BENCHMARKS = {"math500": "MATH-500", "ext240": "Ext240", "gsm8k200": "GSM8K-200 (part of Ext240)",
                   "amc23": "AMC23-40 (part of Ext240)", "pool950": "Pool950"}
VALIDATION_SPLITS = ("math_val210", "toy_heldout")  # the default objective: the first of these read out
ACCURACY_PARTS = ("trained", "base", "eval")  # `<part>.<benchmark>`: run.json `accuracy.<part>.<benchmark>`
FAILED = "trial failed"


def is_search(sweeper_target: str | None) -> bool:
    """Whether a sweeper (its `_target_`) searches, trial by trial, rather than launching a grid."""
    return bool(sweeper_target) and sweeper_target not in GRID_SWEEPERS


def objective_of(cfg) -> str:
    """The dotted key a trial's value is read at (`trained.math_val210`), checked against what the run reads
    out and against the test benchmarks (ConfigError naming the problem)."""
    name = cfg.sweep.objective
    if name is None:
        split = next((b for b in VALIDATION_SPLITS if b in cfg.eval.benchmarks), None)
        if split is None:
            raise ConfigError(f"sweep.objective: not given, and no validation split ({', '.join(VALIDATION_SPLITS)}) "
                              f"is read out (eval.benchmarks={list(cfg.eval.benchmarks)}): name the objective, "
                              "e.g. sweep.objective=trained.<benchmark>")
        name = f"{'eval' if cfg.task == 'evaluate' else 'trained'}.{split}"
    seeds = list(cfg.sweep.objective_seeds or [])
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise ConfigError(f"sweep.objective_seeds={seeds}: seed {twice[0]} given twice (each seed is one run, "
                          "counted once in the trial's mean)")
    parts = name.split(".")
    from rlvr_sweep.data.tasks import declared_test_sets

    declared = declared_test_sets()
    tested = [p for p in parts if p in TEST_BENCHMARKS or p in declared]
    if tested and not cfg.sweep.allow_test_objective:
        what = (f"{TEST_BENCHMARKS[tested[0]]} is a benchmark the paper reports on" if tested[0] in TEST_BENCHMARKS
                else f"{tested[0]} is a test set of task {declared[tested[0]]!r} (its test_sets)")
        raise ConfigError(f"sweep.objective={name}: {what}; tuning on it selects on the test set. Tune on the "
                          "validation split (sweep.objective=trained.math_val210), or say so with "
                          "sweep.allow_test_objective=true")
    if parts[0] in ACCURACY_PARTS:
        if len(parts) != 2:
            raise ConfigError(f"sweep.objective={name}: an accuracy is named <part>.<benchmark>, e.g. "
                              "trained.math_val210")
        part, bench = parts
        if bench not in cfg.eval.benchmarks:
            raise ConfigError(f"sweep.objective={name}: {bench!r} is not read out (eval.benchmarks="
                              f"{list(cfg.eval.benchmarks)})")
        wanted = {"trained": cfg.task == "train" and cfg.eval.after, "base": cfg.task == "train" and cfg.eval.before,
                  "eval": cfg.task == "evaluate"}[part]
        if not wanted:
            raise ConfigError(f"sweep.objective={name}: this run reads out no {part!r} accuracy "
                              f"(task={cfg.task}, eval.before={cfg.eval.before}, eval.after={cfg.eval.after})")
    return name


def value_of(info: dict, objective: str) -> float:
    """The objective's value in a run's record (run.json), ValueError naming what is missing."""
    node = info.get("accuracy", {}) if objective.split(".")[0] in ACCURACY_PARTS else info
    for part in objective.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ValueError(f"the run's record has no {objective} ({info.get('run_dir', 'run.json')})")
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, (int, float)) or not math.isfinite(node):
        raise ValueError(f"{objective} in the run's record is {node!r}, not a number")
    return float(node)


def failed_trial(why: str) -> str:
    """What a failed trial returns: text no sweeper can read as a number, so Optuna records the trial as
    failed (and says why in its warning) and goes on."""
    return f"{FAILED}: {why}"

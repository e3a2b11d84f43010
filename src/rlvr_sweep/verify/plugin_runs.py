"""PASS 1 on runs that loaded plugins: what is re-derived without their code, and, on request, with it.

A reader never runs code from a results folder unless its user asks: by default `verify` imports no plugin.
A run's run.json says which of its choices came from plugins (`inputs.plugins.options`: its reward, its
training task, the task of each benchmark it read out) and the plugins' code (each module's file and
sha256). Without the code, those parts are not re-derived and say so: a plugin reward's rollout rewards, a
plugin task's correctness (its answer extraction and grader) and the grades of its benchmarks; the pass is
then INCOMPLETE (its own exit code), never ok and never FAILED on their account. With `--plugins`
(`load`), exactly the modules run.json names are imported (from the files it recorded, else as its
`plugins` setting names them) and only when each module's sha256 is the recorded one; the stored rewards
and grades are then recomputed with the run's own reward (its settings from config.yaml, lengths scaled by
its profile), task and grader.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from rlvr_sweep.config import ConfigError, EstimatorConfig, RewardConfig, scaled_length
from rlvr_sweep.plugins import FILE_PREFIX, code_record, import_plugins
from rlvr_sweep.data import MATH, TASKS, benchmark_task
from rlvr_sweep.reward import REWARDS, Answering, answering, shaped

OPT_IN = "--plugins"


@dataclass(frozen=True)
class PluginParts:
    """The parts of a run a plugin decided (names as run.json records them)."""

    reward: str | None
    task: str | None  # the training task
    benchmarks: dict  # {benchmark: its task}
    estimator: str | None = None

    def __bool__(self) -> bool:
        return bool(self.reward or self.task or self.benchmarks)


def parts_of(info: dict) -> PluginParts:
    """What run.json says came from plugins (nothing for a run without plugins or an older run.json)."""
    plugins = (info.get("inputs") or {}).get("plugins") if isinstance(info.get("inputs"), dict) else None
    options = plugins.get("options") if isinstance(plugins, dict) else None
    options = {k: v for k, v in options.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(options, dict) else {}
    benchmarks = {k[len("eval.benchmarks."):]: v for k, v in options.items() if k.startswith("eval.benchmarks.")}
    return PluginParts(options.get("reward.name"), options.get("data.name"), benchmarks, options.get("estimator.name"))


@dataclass(frozen=True)
class Rules:
    """A run's plugin code, imported and matched: what re-derives its rewards and grades."""

    reward: object | None  # reward(texts, gold, tokens) -> (rewards, correct), bound as the run bound it
    train: Answering | None  # the training task's answer rules
    benchmarks: dict  # {benchmark: Answering}
    estimator: object | None = None  # the run's `credit.BoundEstimator`, bound as the run bound it


def load(info: dict, config: dict, grader: str) -> tuple[Rules | None, str | None]:
    """(rules, None) with the run's plugins imported and their code the recorded code, else (None, why)."""
    record = info["inputs"]["plugins"]
    entries = [e for e in (config.get("plugins") or []) if isinstance(e, str)]
    try:
        resolved = [_importable(entry, module, record) for entry, module in
                    zip(entries, record.get("modules") or [None] * len(entries))]
        import_plugins(resolved)
        now = code_record(resolved)
    except ConfigError as err:
        return None, f"its plugins cannot be imported ({err})"
    recorded = record.get("files") or {}
    differ = sorted(m for m in set(recorded) | set(now["files"]) if recorded.get(m) != now["files"].get(m))
    if differ:
        shown = ", ".join(f"{m} (recorded {str(recorded.get(m))[:12]}, now {str(now['files'].get(m))[:12]})"
                          for m in differ[:3])
        return None, f"the plugin code at hand is not the code the run recorded: {shown}"
    parts = parts_of(info)
    try:
        reward = _bound_reward(parts.reward, config, grader, parts.task) if parts.reward else None
        train = answering(TASKS[parts.task].task, grader) if parts.task else None
        benchmarks = {b: answering(benchmark_task(b), grader) for b in parts.benchmarks}
        estimator = None
        if parts.estimator:
            from rlvr_sweep.credit import ESTIMATORS  # torch: only for a run whose plugin estimator is replayed

            estimator = bound_estimator(ESTIMATORS[parts.estimator], config.get("estimator"))
    except (ValueError, KeyError, TypeError) as err:
        return None, f"its plugins do not register what it used ({type(err).__name__}: {err})"
    return Rules(reward, train, benchmarks, estimator), None


def run_estimator(run_dir) -> tuple[object | None, str | None]:
    """(the run's plugin estimator, bound as the run bound it, None) or (None, why): for replaying its credit."""
    import json

    import yaml

    try:
        info = json.loads((Path(run_dir) / "run.json").read_text())
        config = yaml.safe_load((Path(run_dir) / "config.yaml").read_text()) or {}
    except (OSError, ValueError, yaml.YAMLError) as err:
        return None, f"its run.json or config.yaml cannot be read ({type(err).__name__})"
    if not isinstance(info, dict) or not isinstance(config, dict) or not parts_of(info).estimator:
        return None, "its run.json names no plugin estimator"
    grader = ((config.get("grader") or {}).get("name")) or "baseline"
    rules, why = load(info, config, grader)
    return (rules.estimator, None) if rules is not None else (None, why)


def _group_config(schema, group: dict | None):
    """The run's config group as its schema's dataclass (keys the schema lacks dropped)."""
    fields = {f.name for f in dataclasses.fields(schema)}
    return schema(**{k: v for k, v in (group or {}).items() if k in fields})


def bound_estimator(option, group: dict | None):
    """An estimator option bound from the run's `estimator` group as the run bound it (`credit.BoundEstimator`)."""
    from rlvr_sweep.credit import bind_estimator

    return bind_estimator(option, _group_config(EstimatorConfig, group))


def _importable(entry: str, module: str | None, record: dict) -> str:
    """The entry to import: the file the run recorded for its module when it is still there, else as named."""
    path = (record.get("paths") or {}).get(module) if module else None
    if not path or not os.path.isfile(path):
        return entry
    if module.startswith(FILE_PREFIX):
        return path
    if Path(path).name == "__init__.py" and Path(path).parent.name == module:
        return str(Path(path).parent)  # a package folder named as such
    depth = module.count(".") + (1 if Path(path).name == "__init__.py" else 0)
    root = Path(path).parents[depth]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))  # where the run found the module
    return module


def _bound_reward(name: str, config: dict, grader: str, task_name: str | None):
    option = REWARDS[name]
    fields = {f.name for f in dataclasses.fields(RewardConfig)}
    settings = RewardConfig(**{k: v for k, v in (config.get("reward") or {}).items() if k in fields})
    scale = float((config.get("profile") or {}).get("length_scale", 1.0))
    fn = option.bind(settings, scale)
    answers = answering(TASKS[task_name].task if task_name else MATH, grader)
    grade, extract = answers.grade, answers.extract_reward

    cap = scaled_length(int((config.get("horizon") or {}).get("tokens", 512)), scale)
    buffer = None if settings.overlong_buffer is None else scaled_length(settings.overlong_buffer, scale)

    def reward(texts, gold, tokens):
        extra = {}
        if "tokens" in option.receives:
            extra["tokens"] = tokens
        if "extract" in option.receives:
            extra["extract"] = extract
        rewards, correct = fn(texts, gold, grade=grade, **extra)
        if buffer is None:
            return rewards, correct
        return shaped(rewards, [len(t) for t in tokens], cap, buffer, settings.overlong_penalty), correct

    return reward

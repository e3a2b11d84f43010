"""Every named choice of a config checked against its registry, and every setting against the options
that read it (CONVENTIONS #17), when a job is built: single runs and each job of a sweep (`run.plan`).

- A choice's name must be registered (`sampler.name`, `estimator.name`, `reward.name`, `eval.name`,
  `eval.schedule`, `model.engine`) or one of its stage's names (`grader.name`, `optimizer_step.name`,
  `train.loss_recipe`, `model.dtype`, `eval.benchmarks`); an unknown one is refused with the valid ones.
- A setting that some option of its group declares it reads, but that no chosen option reads, is
  refused when it differs from its default: `+arm=cf_grpo sampler.t_min=5` (cf_fork never reads t_min)
  or `estimator.beta=0.25` with a counterfactual estimator would otherwise make a new run folder that
  computes what another does.
- A `<group>.params` key must be a parameter of the chosen option.
- The estimator's kind must be one the sampler's groups can be credited by (`credits`), and per-token
  credit needs `train.loss_recipe=scale_then_sum`; each chosen option's own `check` runs too.

`plugins` (a list of module names) are imported first, so options registered by a researcher's own
module (`@ESTIMATORS.register(...)`) are known to every check.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
from pathlib import Path

from rlvr_sweep.config import Config, ConfigError
from rlvr_sweep.config.options import Option, Registry
from rlvr_sweep.credit import ESTIMATORS
from rlvr_sweep.data import benchmark_names
from rlvr_sweep.evaluation import READOUTS, SCHEDULES
from rlvr_sweep.policy import DTYPES
from rlvr_sweep.reward import GRADERS, REWARDS
from rlvr_sweep.rollout import ENGINES, SAMPLERS
from rlvr_sweep.update import HOMOGENEOUS_STEPS, LOSS_RECIPES

# (group, key, registry): the choices whose options declare what they read
CHOICES = (("sampler", "name", SAMPLERS), ("estimator", "name", ESTIMATORS), ("reward", "name", REWARDS),
           ("eval", "name", READOUTS), ("eval", "schedule", SCHEDULES), ("model", "engine", ENGINES))
# (group, key, names): choices of a fixed set of names, kept by the stage that implements them
NAMED = (("grader", "name", GRADERS), ("optimizer_step", "name", HOMOGENEOUS_STEPS),
         ("train", "loss_recipe", LOSS_RECIPES), ("model", "dtype", DTYPES))


def import_plugins(cfg: Config) -> None:
    """Import each entry of `plugins`: a module name (on PYTHONPATH or installed) or a `.py` file's path."""
    for module in cfg.plugins:
        try:
            if module.endswith(".py"):
                path = Path(module).resolve()
                name = f"rlvr_sweep_plugin_{path.stem}"
                if name not in sys.modules:
                    spec = importlib.util.spec_from_file_location(name, path)
                    if spec is None or not path.is_file():
                        raise FileNotFoundError(f"no such file: {path}")
                    sys.modules[name] = importlib.util.module_from_spec(spec)
                    spec.loader.exec_module(sys.modules[name])
            else:
                importlib.import_module(module)
        except Exception as err:  # noqa: BLE001  (whatever the user's module raises, name it in one line)
            sys.modules.pop(f"rlvr_sweep_plugin_{Path(module).stem}", None)
            raise ConfigError(f"plugins={cfg.plugins}: cannot import {module!r} ({type(err).__name__}: {err}); "
                              "put its folder on PYTHONPATH, install it, or give the .py file's path") from None


def chosen(cfg: Config) -> dict[tuple[str, str], Option]:
    """{(group, key): the option chosen} for every registered choice (names checked by `check_choices`)."""
    return {(group, key): registry[getattr(getattr(cfg, group), key)] for group, key, registry in CHOICES}


def _default(group_cfg, name: str):
    f = next(f for f in dataclasses.fields(group_cfg) if f.name == name)
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _name_problems(cfg: Config) -> list[str]:
    problems = []
    for group, key, registry in CHOICES:
        name = getattr(getattr(cfg, group), key)
        if name not in registry:
            problems.append(f"{group}.{key}={name!r}: unknown {registry.what}; valid: {registry.names()}")
    for group, key, names in NAMED:
        name = getattr(getattr(cfg, group), key)
        if name not in names:
            problems.append(f"{group}.{key}={name!r}: must be one of {sorted(names)}")
    unknown = [b for b in cfg.eval.benchmarks if b not in benchmark_names()]
    if unknown:
        problems.append(f"eval.benchmarks={cfg.eval.benchmarks}: unknown {unknown}; valid: {benchmark_names()}")
    return problems


def _unread_problems(cfg: Config, picked: dict) -> list[str]:
    """Settings some option of their group declares, that no chosen option of the group reads."""
    problems = []
    groups: dict[str, list[tuple[Registry, Option]]] = {}
    for group, key, registry in CHOICES:
        groups.setdefault(group, []).append((registry, picked[(group, key)]))
    for group, options in groups.items():
        group_cfg = getattr(cfg, group)
        declared = set().union(*(registry.declared() for registry, _ in options))
        read = set().union(*(set(option.reads_of(group_cfg)) for _, option in options))
        for name in sorted(declared - read):
            value, default = getattr(group_cfg, name), _default(group_cfg, name)
            if value != default:
                readers = "; ".join(f"{registry.what} {option.name!r} reads "
                                    f"{list(option.reads_of(group_cfg)) or 'none of them'}"
                                    for registry, option in options if name in registry.declared())
                problems.append(f"{group}.{name}={value!r}: no chosen option reads it ({readers}); leave it at "
                                f"its default {default!r} or choose an option that reads it")
        params = getattr(group_cfg, "params", None)
        if params:
            allowed = set().union(*(set(option.params) for _, option in options))
            extra = sorted(set(params) - allowed)
            if extra:
                problems.append(f"{group}.params has {extra}: not parameters of "
                                f"{' / '.join(repr(o.name) for _, o in options)} (its parameters: {sorted(allowed)})")
    return problems


def _combination_problems(cfg: Config, picked: dict) -> list[str]:
    sampler, estimator = picked[("sampler", "name")], picked[("estimator", "name")]
    problems = []
    if estimator.kind not in sampler.credits:
        problems.append(f"estimator.name={estimator.name!r} ({estimator.kind} credit) with sampler.name="
                        f"{sampler.name!r}: its groups are credited by {list(sampler.credits)} estimators "
                        f"(e.g. {[e.name for e in ESTIMATORS.options() if e.kind in sampler.credits]})")
    if estimator.per_token and cfg.train.loss_recipe != "scale_then_sum":
        problems.append(f"estimator.name={estimator.name!r} gives per-token credit but train.loss_recipe="
                        f"{cfg.train.loss_recipe} needs one advantage per sequence: use scale_then_sum")
    for option in picked.values():
        if option.check is not None:
            problems += option.check(cfg)
    return problems


def check_choices(cfg: Config) -> Config:
    """Raise ConfigError naming every unknown choice, unread setting and bad combination; else `cfg`."""
    import_plugins(cfg)
    problems = _name_problems(cfg)
    if not problems:
        picked = chosen(cfg)
        problems = _unread_problems(cfg, picked) + _combination_problems(cfg, picked)
    if problems:
        raise ConfigError("invalid config: " + "; ".join(problems))
    return cfg

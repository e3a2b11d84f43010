"""Every named choice of a config checked against its registry, and every setting against the options
that read it (CONVENTIONS #17), when a job is built: single runs and each job of a sweep (`run.plan`).

- A choice's name must be registered (`sampler.name`, `estimator.name`, `reward.name`, `eval.name`,
  `eval.schedule`, `model.engine`) or one of its stage's names (`grader.name`, `optimizer_step.name`,
  `train.loss_recipe`, `model.dtype`, `eval.benchmarks`); an unknown one is refused with the valid ones.
- A setting that some option of its group declares it reads, but that no chosen option reads, is
  refused when it differs from its default: `+arm=cf_grpo sampler.t_min=5` (cf_fork never reads t_min)
  or `estimator.beta=0.25` with a counterfactual estimator would otherwise make a new run folder that
  computes what another does.
- A `<group>.params` key must be a parameter of the chosen option, and its value of the parameter's type and
  within its declared range (`config.options.Param`); an option's function must take every keyword it will
  be called with (its reads, parameters and what it receives).
- The estimator's kind must be one the sampler's groups can be credited by (`credits`; a batch estimator
  gives leaf credit), and per-token credit needs `train.loss_recipe=scale_then_sum`; each chosen option's own
  `check` runs too.
- A task of one's own (`data.name` a task registered in `data.TASKS`) has its `data.params` checked like
  an option's, and its own grader refuses a `grader.name` other than the default.

`plugins` (module names, `.py` files or package folders; `rlvr_sweep.plugins`) are imported first, so options
registered by a researcher's own module (`@ESTIMATORS.register(...)`) are known to every check.
"""

from __future__ import annotations

import dataclasses
import importlib.util

from rlvr_sweep.config import DTYPE_NAMES, Config, ConfigError
from rlvr_sweep.config.options import Option, Registry
from rlvr_sweep.plugins import (  # noqa: F401  (re-exported: how a run's plugins are resolved)
    chosen_plugins, complete_params, environment_plugins, import_plugins as _import_entries, resolve_plugins,
)
from rlvr_sweep.credit import ESTIMATORS, KINDS
from rlvr_sweep.data import TASKS, benchmark_names
from rlvr_sweep.evaluation import READOUTS, SCHEDULES
from rlvr_sweep.reward import GRADERS, REWARDS
from rlvr_sweep.rollout import ENGINES, SAMPLERS
from rlvr_sweep.update import AGGREGATIONS, HOMOGENEOUS_STEPS, LOSS_RECIPES, OBJECTIVES, PAPER_AGGREGATION

# (group, key, registry): the choices whose options declare what they read
CHOICES = (("sampler", "name", SAMPLERS), ("estimator", "name", ESTIMATORS), ("reward", "name", REWARDS),
           ("eval", "name", READOUTS), ("eval", "schedule", SCHEDULES), ("model", "engine", ENGINES),
           ("objective", "name", OBJECTIVES))
# (group, key, names): choices of a fixed set of names, kept by the stage that implements them
NAMED = (("grader", "name", GRADERS), ("optimizer_step", "name", HOMOGENEOUS_STEPS),
         ("train", "loss_recipe", LOSS_RECIPES), ("model", "dtype", DTYPE_NAMES),
         ("objective", "aggregation", AGGREGATIONS))


def import_plugins(cfg: Config) -> None:
    """Import the environment's plugins and each entry of `plugins` (`plugins.import_plugins`):
    ConfigError naming a failed one."""
    _import_entries(list(dict.fromkeys([*environment_plugins(), *cfg.plugins])))


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
            for _, option in options:
                problems += option.param_problems(group, {k: v for k, v in params.items() if k in option.params})
    return problems


# what each registry's calling convention passes by keyword, besides the settings an option declares
CONVENTION_KEYWORDS = {"reward": ("grade",), "estimator": (), "sampler": ("horizon",), "objective": ()}
# ... and how many arguments it passes by position: (texts, gold), (rewards, shape), (policy, prompt),
# (logp, old, advantages, mask)
CONVENTION_POSITIONAL = {"reward": 2, "estimator": 2, "sampler": 2, "objective": 4}


def _signature_problems(cfg: Config, picked: dict) -> list[str]:
    """A plugin's function that cannot take what it will be called with: named now, not at its first call."""
    problems = []
    for (group, key), option in picked.items():
        if option.built_in or key != "name" or group not in CONVENTION_KEYWORDS:
            continue  # read-outs take their settings as one object, engines the decoding contract
        problems += [f"{group}.name={option.name!r}: {p}" for p in option.signature_problems(
            getattr(cfg, group), CONVENTION_KEYWORDS.get(group, ()), CONVENTION_POSITIONAL.get(group, 0))]
    return problems


def _combination_problems(cfg: Config, picked: dict) -> list[str]:
    sampler, estimator = picked[("sampler", "name")], picked[("estimator", "name")]
    problems = []
    if estimator.kind not in KINDS:
        problems.append(f"estimator.name={estimator.name!r} is registered with kind={estimator.kind!r}; an estimator's "
                        f"kind is one of {sorted(KINDS)} (credit.kinds)")
    elif KINDS[estimator.kind].credited_as not in sampler.credits:
        problems.append(f"estimator.name={estimator.name!r} ({estimator.kind} credit) with sampler.name="
                        f"{sampler.name!r}: its groups are credited by {list(sampler.credits)} estimators "
                        f"(e.g. {[e.name for e in ESTIMATORS.options() if e.kind in sampler.credits]})")
    if estimator.per_token and cfg.train.loss_recipe != "scale_then_sum":
        problems.append(f"estimator.name={estimator.name!r} gives per-token credit but train.loss_recipe="
                        f"{cfg.train.loss_recipe} needs one advantage per sequence: use scale_then_sum")
    for option in picked.values():
        if option.check is not None:
            problems += option.check(cfg)
    return problems + _objective_problems(cfg, picked) + _task_problems(cfg) + _lora_problems(cfg) + \
        _seeding_problems(cfg)


def _seeding_problems(cfg: Config) -> list[str]:
    """Per-rollout seeds (`rollout.seeding`) draw through `engine.sample_next_token`: vLLM has its own sampler."""
    if cfg.train.rollout_seeding == "per_rollout" and cfg.model.engine == "vllm":
        return ["train.rollout_seeding=per_rollout draws each row from a generator of its own, which vLLM's sampler "
                "does not take: use model.engine=reference, static or auto"]
    return []


def _lora_problems(cfg: Config) -> list[str]:
    """An adapter (`lora.rank`) needs peft, trains (a read-out of a saved model has nothing to adapt), and decodes
    with the reference engine (the static step and vLLM read the base weights alone)."""
    lora = cfg.lora
    if not lora.enabled:
        return [f"lora.{name}={getattr(lora, name)!r} without lora.rank: no adapter is made; set lora.rank or leave it "
                f"at its default {_default(lora, name)!r}" for name in ("alpha", "dropout", "target_modules", "init_seed")
                if getattr(lora, name) != _default(lora, name)]
    problems = []
    if importlib.util.find_spec("peft") is None:
        problems.append(f"lora.rank={lora.rank} needs peft, which is not installed: pip install 'rlvr_sweep[lora]'")
    if cfg.task != "train":
        problems.append(f"lora.rank={lora.rank} with task={cfg.task}: an adapter is trained; a read-out of a saved "
                        "adapter run reads its merged model/ (model.path=<run>/model) without lora settings")
    if cfg.model.engine in ("static", "vllm"):
        problems.append(f"lora.rank={lora.rank} with model.engine={cfg.model.engine}: that engine reads the base "
                        "weights alone; an adapter decodes with model.engine=reference (auto picks it)")
    return problems


def _objective_problems(cfg: Config, picked: dict) -> list[str]:
    """The objective's settings against each other and the rest of the run (`update.backward.Objective`)."""
    o, problems = cfg.objective, []
    objective, sampler = picked[("objective", "name")], picked[("sampler", "name")]
    if objective.kind != "ratio" and (o.passes > 1 or o.mini_batches > 1):
        problems.append(f"objective.passes={o.passes}, objective.mini_batches={o.mini_batches} with objective.name="
                        f"{o.name!r}: an on-policy objective has no importance ratio to correct the rollouts of a "
                        f"second optimizer step; choose one of {[x.name for x in OBJECTIVES.options() if x.kind == 'ratio']}")
    paper_loss = o.name == "reinforce" and o.aggregation == PAPER_AGGREGATION and not o.mask_truncated and not (
        o.kl_beta and o.kl_in == "loss")
    if cfg.train.loss_recipe == "sum_then_scale" and not paper_loss:
        problems.append(f"train.loss_recipe=sum_then_scale (Arm 1's rounding of the paper's loss) goes with objective "
                        f"reinforce, aggregation {PAPER_AGGREGATION}, no KL loss term and no masked rollouts only: use "
                        "train.loss_recipe=scale_then_sum")
    if o.kl_beta == 0:
        for name in ("kl_estimator", "kl_in"):
            value, default = getattr(o, name), _default(o, name)
            if value != default:
                problems.append(f"objective.{name}={value!r}: no KL term is made with objective.kl_beta=0; leave it at "
                                f"its default {default!r} or set objective.kl_beta > 0")
    elif o.kl_in == "loss" and cfg.optimizer_step.name != "full_backward":
        problems.append(f"objective.kl_beta={o.kl_beta} in the loss with optimizer_step={cfg.optimizer_step.name}: "
                        "that step takes a homogeneous group's gradient to be zero, but the KL term gives it one; use "
                        "optimizer_step=full_backward (or objective.kl_in=reward)")
    rollouts = set()
    if "group_size" in sampler.reads_of(cfg.sampler):
        rollouts.add(cfg.sampler.group_size)
    if "K" in sampler.reads:
        rollouts.add(cfg.sampler.K * cfg.sampler.B)
    for n in sorted(rollouts):
        per_update = n * cfg.train.accumulate_questions
        if per_update % o.mini_batches:
            problems.append(f"objective.mini_batches={o.mini_batches} does not divide an update's {per_update} rollouts "
                            f"({cfg.train.accumulate_questions} question(s) of {n})")
        elif picked[("estimator", "name")].kind == "fork" and (per_update // o.mini_batches) % 2:
            problems.append(f"objective.mini_batches={o.mini_batches} splits a fork pair: each mini-batch of the update's "
                            f"{per_update} rollouts must hold an even number")
    return problems


def _task_problems(cfg: Config) -> list[str]:
    """A task of one's own (`data.name` registered in `data.TASKS`): its parameters declared and in range,
    its own grader not overridden by `grader.name`; other data take no `data.params`."""
    d = cfg.data
    if d.name not in TASKS:
        hint = (" (profile=smoke sets data.name=toy_arith after the data option: set data.name=<the task> too, "
                "as an arm training on a task does in its body)" if d.name == "toy_arith" else "")
        return [f"data.params={d.params}: data.name={d.name!r} is not a task of one's own (tasks: {TASKS.names()}); "
                f"only a task takes parameters{hint}"] if d.params else []
    option = TASKS[d.name]
    problems = option.param_problems("data", {k: v for k, v in d.params.items() if k in option.params})
    extra = sorted(set(d.params) - set(option.params))
    if extra:
        problems.append(f"data.params has {extra}: not parameters of task {d.name!r} (its parameters: "
                        f"{sorted(option.params)})")
    default = _default(cfg.grader, "name")
    if option.task.grade is not None and cfg.grader.name != default:
        rule = option.task.grade
        problems.append(f"grader.name={cfg.grader.name!r}: task {d.name!r} grades with its own rule "
                        f"({getattr(rule, '__module__', '?')}.{getattr(rule, '__qualname__', rule)}); leave grader.name "
                        f"at {default!r}")
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
        if not problems:
            problems = _signature_problems(cfg, picked)
    if problems:
        raise ConfigError("invalid config: " + "; ".join(problems))
    return cfg

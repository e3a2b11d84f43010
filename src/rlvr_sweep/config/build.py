"""The one place a composed Hydra config becomes a checked `Config`.

`build_config(raw)` refuses keys the schema does not declare (a typo such as `+train.stpes=5`
would otherwise be accepted and ignored), converts with `OmegaConf.to_object`, and runs
`check_config`: every declared range (`rules.range_problems`) plus the settings that cannot go
together (`combination_problems`). The error lists every problem as `key=value: what is allowed`.
"""

from __future__ import annotations

from omegaconf import OmegaConf

from rlvr_sweep.config.rules import ConfigError, range_problems, unknown_keys
from rlvr_sweep.config.schema import CF_ESTIMATORS, FORK_SAMPLERS, TREE_SAMPLERS, Config

TOP_LEVEL_EXTRAS = ("hydra",)  # Hydra's own node, when a config is composed with return_hydra_config


def combination_problems(cfg: Config) -> list[str]:
    """Settings that are each valid but cannot go together."""
    problems = []
    s, e, t = cfg.sampler, cfg.estimator, cfg.train
    cf_estimator, cf_sampler = e.name in CF_ESTIMATORS, s.name in FORK_SAMPLERS
    if cf_estimator != cf_sampler:
        problems.append(f"estimator.name={e.name!r} with sampler.name={s.name!r}: the counterfactual estimators "
                        f"{list(CF_ESTIMATORS)} credit fork pairs, which only sampler {list(FORK_SAMPLERS)} draws")
    if cf_sampler and t.backward_micro_batch is not None and t.backward_micro_batch % 2:
        problems.append(f"train.backward_micro_batch={t.backward_micro_batch} must be even with fork pairs: "
                        "a pair's two leaves (and its fork hinge) share a backward chunk")
    if cf_sampler and s.fork_start >= s.fork_end:
        problems.append(f"sampler.fork_start={s.fork_start} must be < sampler.fork_end={s.fork_end}")
    ev = cfg.eval
    if ev.name == "fork3" and not ev.fork_start < ev.fork_end <= ev.margin_tokens:
        problems.append(f"eval.fork_start={ev.fork_start}, eval.fork_end={ev.fork_end}, "
                        f"eval.margin_tokens={ev.margin_tokens}: fork3 needs fork_start < fork_end <= margin_tokens "
                        "(forks are picked from the margin pass)")
    if e.name != "grpo":
        if not cf_estimator and s.name not in TREE_SAMPLERS:
            problems.append(f"estimator.name={e.name!r} credits tree prefixes but sampler.name={s.name!r} draws "
                            "no tree: use a tree sampler or estimator=grpo")
        if t.loss_recipe == "sum_then_scale":
            problems.append(f"estimator.name={e.name!r} gives per-token credit but train.loss_recipe=sum_then_scale "
                            "needs one advantage per sequence: use scale_then_sum")
    if (cfg.reward.name == "gated") != (cfg.reward.gate_chars is not None):
        problems.append(f"reward.gate_chars={cfg.reward.gate_chars!r} with reward.name={cfg.reward.name!r}: "
                        "a gated reward needs gate_chars, an ungated one must leave it null")
    if s.split_tokens < s.t_min:
        problems.append(f"sampler.split_tokens={s.split_tokens} < sampler.t_min={s.t_min}: T_max must be >= T_min")
    if t.tail_average is not None:
        budget = t.max_steps if t.active_steps else t.steps
        if len(t.tail_average) != 2 or not t.tail_average[0] <= t.tail_average[1]:
            problems.append(f"train.tail_average={t.tail_average}: must be [first, last] with first <= last")
        elif t.tail_average[0] > budget:
            problems.append(f"train.tail_average={t.tail_average} starts after the last step ({budget}): "
                            "nothing would be averaged")
    if cfg.task == "train" and t.active_steps is None and t.steps == 0:
        problems.append("train.steps=0 trains nothing (a training run without ledgers cannot be verified): "
                        "read a model out with task=evaluate model.path=<folder> instead")
    if t.active_steps is None and t.steps % t.accumulate_questions:
        problems.append(f"train.steps={t.steps} is not a multiple of train.accumulate_questions="
                        f"{t.accumulate_questions}: the last questions would never reach an update")
    if cfg.task == "evaluate" and not cfg.model.path:
        problems.append("task=evaluate reads out a checkpoint: set model.path to a save_pretrained folder "
                        "(e.g. a finished run's <run>/model)")
    if cfg.task == "evaluate" and not cfg.eval.benchmarks:
        problems.append("task=evaluate with no eval.benchmarks has nothing to do")
    if cfg.eval.schedule == "refill" and cfg.model.engine == "reference":
        problems.append("eval.schedule=refill needs model.engine=static or vllm (the reference engine decodes "
                        "fixed batches only)")
    return problems


def check_config(cfg: Config) -> Config:
    """Raise ConfigError listing every out-of-range setting and every bad combination; else return cfg."""
    problems = range_problems(cfg)
    if not problems:  # combinations only make sense once each setting is in range
        problems = combination_problems(cfg)
    if problems:
        raise ConfigError("invalid config: " + "; ".join(problems))
    return cfg


def build_config(raw) -> Config:
    """Composed DictConfig (Hydra) -> checked Config dataclass."""
    extra = [k for k in unknown_keys(raw, Config) if k not in TOP_LEVEL_EXTRAS]
    if extra:
        raise ConfigError(f"unknown config key(s) {extra}: not declared in the config schema "
                          "(the only appends a run needs are +arm= and +sweep=; see `--cfg job` for every key)")
    return check_config(OmegaConf.to_object(raw))

"""The one place a composed Hydra config becomes a checked `Config`.

`build_config(raw)` refuses keys the schema does not declare (`check_keys`: a typo such as
`+train.stpes=5` would otherwise be accepted and ignored; the error names the declared keys closest to
it), converts with `OmegaConf.to_object`, and runs `check_config`: every declared range
(`rules.range_problems`) plus the settings that cannot go together (`combination_problems`). The
error lists every problem as `key=value: what is allowed`.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from rlvr_sweep.config.rules import ConfigError, no_such_setting, range_problems, unknown_keys
from rlvr_sweep.config.schema import Config, scaled_length

TOP_LEVEL_EXTRAS = ("hydra",)  # Hydra's own node, when a config is composed with return_hydra_config


def combination_problems(cfg: Config) -> list[str]:
    """Settings that are each valid but cannot go together (the ones that depend on which options are
    chosen, such as an estimator the sampler's groups cannot take, are `run.choices`' to check)."""
    problems = []
    s, t, e, scale = cfg.sampler, cfg.train, cfg.eval, cfg.profile.length_scale
    start, end = (scaled_length(e.fork_start, scale) if e.fork_start else 0), scaled_length(e.fork_end, scale)
    if e.fork_start < e.fork_end and not start < end:  # a window that scaling empties (ReadoutSettings refuses it)
        problems.append(f"eval.fork_start={e.fork_start}, eval.fork_end={e.fork_end} at profile.length_scale={scale:g} "
                        f"give the fork window [{start}, {end}) in tokens: it must hold at least one token "
                        "(a larger length_scale, or a wider window)")
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
    r = cfg.reward
    if r.overlong_buffer is None and r.overlong_penalty != 1.0:
        problems.append(f"reward.overlong_penalty={r.overlong_penalty}: no overlong shaping without reward.overlong_buffer; "
                        "leave it at 1.0 or set a buffer")
    elif r.overlong_buffer is not None and r.overlong_buffer > cfg.horizon.tokens:
        problems.append(f"reward.overlong_buffer={r.overlong_buffer} is longer than the rollout cap (horizon "
                        f"{cfg.horizon.tokens} paper tokens): the penalty would start before the first token")
    if cfg.task == "evaluate" and not cfg.model.path:
        problems.append("task=evaluate reads out a checkpoint: set model.path to a save_pretrained folder "
                        "(e.g. a finished run's <run>/model)")
    if cfg.task == "evaluate" and not cfg.eval.benchmarks:
        problems.append("task=evaluate with no eval.benchmarks has nothing to do")
    return problems


def check_config(cfg: Config) -> Config:
    """Raise ConfigError listing every out-of-range setting and every bad combination; else return cfg."""
    problems = range_problems(cfg)
    if not problems:  # combinations only make sense once each setting is in range
        problems = combination_problems(cfg)
    if problems:
        raise ConfigError("invalid config: " + "; ".join(problems))
    return cfg


def check_keys(raw) -> None:
    """Raise ConfigError naming each key of a composed config that the schema does not declare (an
    appended typo, `+train.stpes=5`), with the declared keys closest to it."""
    extra = [leaf for k in unknown_keys(raw, Config) if k not in TOP_LEVEL_EXTRAS for leaf in _leaves(raw, k)]
    if extra:
        raise ConfigError("; ".join(no_such_setting(k, Config) or f"{k}: no such setting" for k in extra))


def _leaves(raw, key: str) -> list[str]:
    """The keys under `key` as typed (`+trian.steps=5` adds `trian` holding `steps`: `trian.steps`)."""
    node = OmegaConf.select(raw, key)
    if isinstance(node, DictConfig) and len(node):
        return [leaf for k in node for leaf in _leaves(raw, f"{key}.{k}")]
    return [key]


def build_config(raw) -> Config:
    """Composed DictConfig (Hydra) -> checked Config dataclass."""
    check_keys(raw)
    return check_config(OmegaConf.to_object(raw))

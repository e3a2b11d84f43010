"""Config stage: the typed configuration every other stage receives (DESIGN "Config groups").

One dataclass per Hydra group (`schema`), each field declaring its valid values beside its default
(`rules.setting`); `build_config` turns a composed Hydra config into a checked `Config` and
`check_config` re-checks one built in Python. Bookkeeping fields stay out of the run's identity.
`Registry` / `Option` (`options`) are the one mechanism by which every stage names its choices and
declares the settings each reads; `run.choices` checks a config against them.
"""

from rlvr_sweep.config.build import build_config, check_config, check_keys, combination_problems
from rlvr_sweep.config.rules import (
    ConfigError, bookkeeping_keys, did_you_mean, identity_dict, no_such_setting, range_problems, unknown_keys,
)
from rlvr_sweep.config.options import Option, Registry
from rlvr_sweep.config.schema import (
    DTYPE_NAMES, STD_KINDS, TASKS, Config, DataConfig, EstimatorConfig, EvalConfig, GraderConfig, HorizonConfig,
    LoggerConfig, ModelConfig, OptimizerStepConfig, ProfileConfig, RewardConfig, RunConfig, SamplerConfig, TrainConfig,
    paper_arm, register_configs, scaled_length,
)

__all__ = [
    "Config", "ConfigError", "DTYPE_NAMES", "DataConfig", "EstimatorConfig", "EvalConfig", "GraderConfig",
    "HorizonConfig", "LoggerConfig", "ModelConfig", "Option", "OptimizerStepConfig", "ProfileConfig", "Registry",
    "RewardConfig", "RunConfig", "STD_KINDS", "SamplerConfig", "TASKS", "TrainConfig", "bookkeeping_keys",
    "build_config", "check_config", "check_keys", "combination_problems", "did_you_mean", "identity_dict",
    "no_such_setting", "paper_arm", "range_problems", "register_configs", "scaled_length", "unknown_keys",
]

"""Config stage: the typed configuration every other stage receives (DESIGN "Config groups").

One dataclass per Hydra group (`schema`), each field declaring its valid values beside its default
(`rules.setting`); `build_config` turns a composed Hydra config into a checked `Config` and
`check_config` re-checks one built in Python. Bookkeeping fields stay out of the run's identity.
"""

from rlvr_sweep.config.build import build_config, check_config, combination_problems
from rlvr_sweep.config.rules import ConfigError, bookkeeping_keys, identity_dict, range_problems, unknown_keys
from rlvr_sweep.config.schema import (
    BENCHMARK_NAMES, CF_ESTIMATORS, Config, DataConfig, ENGINE_NAMES, ESTIMATOR_NAMES, EstimatorConfig, EvalConfig,
    FORK_SAMPLERS, GRADER_NAMES, GraderConfig, HOMOGENEOUS_STEPS, HorizonConfig, LOSS_RECIPES, LoggerConfig,
    ModelConfig, OptimizerStepConfig, ProfileConfig, REWARD_NAMES, RewardConfig, RunConfig, SAMPLER_NAMES,
    SCHEDULE_NAMES, SamplerConfig, TASKS, TREE_SAMPLERS, TrainConfig, paper_arm, register_configs, scaled_length,
)

__all__ = [
    "BENCHMARK_NAMES", "CF_ESTIMATORS", "Config", "ConfigError", "DataConfig", "ENGINE_NAMES", "ESTIMATOR_NAMES",
    "EstimatorConfig", "EvalConfig", "FORK_SAMPLERS", "GRADER_NAMES", "GraderConfig", "HOMOGENEOUS_STEPS",
    "HorizonConfig", "LOSS_RECIPES", "LoggerConfig", "ModelConfig", "OptimizerStepConfig", "ProfileConfig",
    "REWARD_NAMES", "RewardConfig", "RunConfig", "SAMPLER_NAMES", "SCHEDULE_NAMES", "SamplerConfig", "TASKS",
    "TREE_SAMPLERS", "TrainConfig", "bookkeeping_keys", "build_config", "check_config", "combination_problems", "identity_dict",
    "paper_arm", "range_problems", "register_configs", "scaled_length", "unknown_keys",
]

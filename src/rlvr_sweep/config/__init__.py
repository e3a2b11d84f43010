"""Config stage: the typed configuration every other stage receives (DESIGN "Config groups").

One dataclass per Hydra group (`schema`), each field declaring its valid values beside its default
(`rules.setting`); `build_config` turns a composed Hydra config into a checked `Config` and
`check_config` re-checks one built in Python. Bookkeeping fields stay out of the run's identity.
"""

from rlvr_sweep.config.build import build_config, check_config, combination_problems
from rlvr_sweep.config.rules import ConfigError, identity_dict, range_problems, unknown_keys
from rlvr_sweep.config.schema import (
    BENCHMARK_NAMES, ENGINE_NAMES, ESTIMATOR_NAMES, GRADER_NAMES, HOMOGENEOUS_STEPS, LOSS_RECIPES, REWARD_NAMES, SAMPLER_NAMES,
    SCHEDULE_NAMES, TASKS, TREE_SAMPLERS, Config, DataConfig, EstimatorConfig, EvalConfig, GraderConfig, HorizonConfig, ModelConfig,
    OptimizerStepConfig, ProfileConfig, LoggerConfig, RewardConfig, RunConfig, SamplerConfig, TrainConfig, paper_arm,
    register_configs, scaled_length,
)

__all__ = [
    "BENCHMARK_NAMES", "ENGINE_NAMES", "ESTIMATOR_NAMES", "SCHEDULE_NAMES", "TASKS", "GRADER_NAMES", "HOMOGENEOUS_STEPS", "LOSS_RECIPES", "REWARD_NAMES",
    "SAMPLER_NAMES", "TREE_SAMPLERS", "Config", "ConfigError", "DataConfig", "EstimatorConfig", "EvalConfig",
    "GraderConfig", "HorizonConfig", "LoggerConfig", "ModelConfig", "OptimizerStepConfig", "ProfileConfig", "RewardConfig",
    "RunConfig", "SamplerConfig", "TrainConfig", "build_config", "check_config", "combination_problems",
    "identity_dict", "paper_arm", "range_problems", "register_configs", "scaled_length", "unknown_keys",
]

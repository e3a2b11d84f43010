"""Config stage: the typed configuration every other stage receives (DESIGN "Config groups").

One dataclass per Hydra group (`schema`), each field declaring its valid values beside its default
(`rules.setting`); `build_config` turns a composed Hydra config into a checked `Config` and
`check_config` re-checks one built in Python. Bookkeeping fields stay out of the run's identity.
`Registry` / `Option` (`options`) are the one mechanism by which every stage names its choices and
declares the settings each reads; `run.choices` checks a config against them.
"""

import importlib

# Each name is imported from its module on first use (PEP 562): reading a stage's `Option`s or a rule
# does not pull in Hydra and OmegaConf, which only building a config needs (some 0.3 s of a command's start).
_HOMES = {
    **dict.fromkeys(["build_config", "check_config", "check_keys", "combination_problems"], "build"),
    **dict.fromkeys(["ConfigError", "bookkeeping_keys", "did_you_mean", "identity_dict", "no_such_setting",
        "range_problems", "unknown_keys"], "rules"),
    **dict.fromkeys(["Option", "Registry"], "options"),
    **dict.fromkeys(["Config", "DTYPE_NAMES", "DataConfig", "EstimatorConfig", "EvalConfig", "GraderConfig",
        "HorizonConfig", "KL_ESTIMATORS", "KL_PLACES", "LoggerConfig", "LoraConfig", "ModelConfig", "ObjectiveConfig", "OptimizerStepConfig", "ProfileConfig",
        "RewardConfig", "RunConfig", "STD_KINDS", "SamplerConfig", "SweepConfig", "TASKS", "TrainConfig", "paper_arm", "register_configs",
        "scaled_length"], "schema"),
}

__all__ = [
    "Config", "ConfigError", "DTYPE_NAMES", "DataConfig", "EstimatorConfig", "EvalConfig", "GraderConfig",
    "HorizonConfig", "KL_ESTIMATORS", "KL_PLACES", "LoggerConfig", "LoraConfig", "ModelConfig", "ObjectiveConfig", "Option",
    "OptimizerStepConfig", "ProfileConfig", "Registry",
    "RewardConfig", "RunConfig", "STD_KINDS", "SamplerConfig", "SweepConfig", "TASKS", "TrainConfig",
    "bookkeeping_keys",
    "build_config", "check_config", "check_keys", "combination_problems", "did_you_mean", "identity_dict",
    "no_such_setting", "paper_arm", "range_problems", "register_configs", "scaled_length", "unknown_keys",
]


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_HOMES})

"""The one module a plugin imports: every registry a plugin registers an option in, the declarations of its
parameters, and the typed records it receives and returns (CONVENTIONS #23; docs/extending.md).

    from rlvr_sweep.extend import ESTIMATORS, OBJECTIVES, REWARDS, TASKS, Surrogate, param, above

Registries: `ESTIMATORS` (kinds `leaf`, `tree`, `fork`, `batch`: `credit.kinds` owns each one's calling
convention), `OBJECTIVES`, `REWARDS`, `TASKS`, `SAMPLERS`, `ENGINES`, `READOUTS`, `SCHEDULES`; each takes
`@REGISTRY.register(name, **declared)` over a function (`config.options`). Parameters: `param(default, *rules)`
with the rules `above`, `at_least`, `between`, `one_of`, `each`, `matches`. Records: `GroupShape` (what credit
sees of a group), `TreeCredit` (a tree estimator's result), `Credit` (a fork estimator's), `Surrogate` (an
objective's). Helpers: `grpo_advantages`, `is_homogeneous`, `score_rollouts`, `extract_answer`. Each name is
imported from its stage when first asked for, so a plugin that registers a reward does not import torch.
"""

import importlib

_HOMES = {
    "ESTIMATORS": "credit", "GroupShape": "credit", "TreeCredit": "credit", "Credit": "credit",
    "grpo_advantages": "credit", "is_homogeneous": "credit",
    "OBJECTIVES": "update", "Surrogate": "update",
    "REWARDS": "reward", "score_rollouts": "reward", "extract_answer": "reward",
    "TASKS": "data",
    "SAMPLERS": "rollout", "ENGINES": "rollout",
    "READOUTS": "evaluation", "SCHEDULES": "evaluation",
    "param": "config.options", "Param": "config.options",
    "above": "config.rules", "at_least": "config.rules", "between": "config.rules", "one_of": "config.rules",
    "each": "config.rules", "matches": "config.rules",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(importlib.import_module(f"rlvr_sweep.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'rlvr_sweep.extend' has no attribute {name!r}; it offers {__all__}")


def __dir__() -> list[str]:
    return __all__

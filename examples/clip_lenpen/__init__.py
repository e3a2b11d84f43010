"""Ideas past the paper as one plugin package (docs/extending.md): two estimators and two rewards.

- `estimator=grpo_clip` (`estimators.py`): GRPO advantages clipped to +-`clip` (a typed, ranged parameter);
- `estimator=reinforce_pp_baseline` (`estimators.py`): a batch estimator, REINFORCE++-baseline's credit;
- `reward=len_penalty` (`rewards.py`): correctness - coef * min(1, characters / max_chars);
- `reward=token_len_penalty` (`rewards.py`): the same in tokens, a token-aware reward whose `max_tokens` is a
  length in paper tokens (scaled by `profile.length_scale` like the built-in lengths).

Name the package once, in the environment, and every command finds its options and its arms (`conf/arm/`):

    RLVR_SWEEP_PLUGINS=examples/clip_lenpen python -m rlvr_sweep +arm=clip_lenpen profile=smoke -m seed=42,101,7
"""

from . import estimators, rewards  # noqa: F401  (importing them registers their options)

"""DAPO's soft overlong punishment: a length penalty over the last tokens before the rollout cap.

Yu et al. 2025 ("DAPO", arXiv 2503.14476, eq. 13) add to the correctness reward

    R_length(y) = 0                                  if |y| <= L_max - L_cache
                  ((L_max - L_cache) - |y|) / L_cache  if L_max - L_cache < |y| <= L_max

(-1 beyond L_max, which a capped rollout never reaches), scaled by a factor (verl's
`overlong_buffer.penalty_factor`, 1 in DAPO's script); here L_max is the run's rollout cap and L_cache
`reward.overlong_buffer` (paper tokens, scaled by the profile like every length). It applies to whatever
reward the run uses (`reward.name`, a plugin's too), on each rollout's completion tokens (a tree leaf's
shared prefix included), and `verify` re-derives it from the stored lengths.
"""

from __future__ import annotations


def overlong_penalty(length: int, cap: int, buffer: int, factor: float = 1.0) -> float:
    """The (non-positive) shaping of a rollout of `length` completion tokens under a cap of `cap`.

    >>> overlong_penalty(80, 100, 20), overlong_penalty(90, 100, 20), overlong_penalty(100, 100, 20, 0.5)
    (0.0, -0.5, -0.5)
    """
    if buffer < 1 or cap < buffer:
        raise ValueError(f"the overlong buffer ({buffer} tokens) must lie in [1, the rollout cap {cap}]")
    return min(-(length - (cap - buffer)) / buffer * factor, 0.0) + 0.0  # + 0.0: no -0.0


def shaped(rewards: list[float], lengths: list[int], cap: int, buffer: int | None, factor: float) -> list[float]:
    """Each reward plus its rollout's overlong penalty (unchanged without a buffer)."""
    if buffer is None:
        return list(rewards)
    return [float(r) + overlong_penalty(n, cap, buffer, factor) for r, n in zip(rewards, lengths)]

"""Many contrasts at once (docs/planning.md): each contrast's bootstrap p-value and Holm's step-down decisions
over the family a table reports for one benchmark.

A 19-arm study contrasts 18 arms with its baseline; at 95 % each, about one interval excludes 0 by chance alone.
The unadjusted two-level interval stays the paper's primary figure; beside it, `holm` says which contrasts a
family-wise error rate of `alpha` still calls different from 0 (Holm 1979, "A simple sequentially rejective
multiple test procedure", Scand. J. Statist. 6: uniformly more powerful than Bonferroni, valid under any
dependence between the contrasts, which share their baseline arm's runs).

The p-value is the two-level bootstrap's own (`stats.resample_means`, the same draws as the printed interval):
twice the smaller share of resampled means on either side of 0, counted with the usual +1 (Davison & Hinkley
1997, eq. 4.11), so an interval that excludes 0 at level 1 - a has p < a up to the resampling's granularity.
"""

from __future__ import annotations

import numpy as np

from rlvr_sweep.analysis.stats import resample_means


def bootstrap_p(d, n_resamples: int = 4000, seed: int = 0) -> float:
    """The two-sided two-level bootstrap p-value of "the mean difference is 0" (module docstring)."""
    means = resample_means(d, "two_level", n_resamples, seed)
    below, above = int((means <= 0).sum()), int((means >= 0).sum())
    return min(1.0, 2 * (min(below, above) + 1) / (n_resamples + 1))


def holm(p_values: list[float], alpha: float = 0.05) -> list[bool]:
    """Holm's decisions, in the order given: sorted ascending, the k-th smallest (from 0) is rejected while every
    one before it was and p <= alpha / (m - k); the first that is not stops the rejections."""
    m = len(p_values)
    rejected = [False] * m
    for k, i in enumerate(sorted(range(m), key=lambda j: (p_values[j], j))):
        if p_values[i] > alpha / (m - k):
            break
        rejected[i] = True
    return rejected


def holm_adjusted(p_values: list[float]) -> list[float]:
    """Holm-adjusted p-values (the smallest family-wise level at which each is rejected), in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda j: (p_values[j], j))
    adjusted, running = [0.0] * m, 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p_values[i]))
        adjusted[i] = running
    return adjusted

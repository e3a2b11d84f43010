"""Holm's step-down decisions over a benchmark's contrasts (`analysis.multiplicity`), checked against orderings
computed by hand, and the two-level bootstrap p-value they use."""

from __future__ import annotations

import numpy as np
import pytest

from rlvr_sweep.analysis.multiplicity import bootstrap_p, holm, holm_adjusted
from rlvr_sweep.analysis.stats import bootstrap_ci


@pytest.mark.parametrize("p, decisions, adjusted", [
    # sorted 0.005 <= .05/4, 0.01 <= .05/3, then 0.03 > .05/2 stops (0.04 would pass .05/1 alone: not reached)
    ([0.01, 0.04, 0.03, 0.005], [True, False, False, True], [0.03, 0.06, 0.06, 0.02]),
    # every step passes: .001 <= .0167, .02 <= .025, .045 <= .05
    ([0.045, 0.001, 0.02], [True, True, True], [0.045, 0.003, 0.04]),
    # the smallest fails its .05/3: nothing is rejected, though 0.02 < .05 unadjusted
    ([0.02, 0.02, 0.02], [False, False, False], [0.06, 0.06, 0.06]),
    ([0.049], [True], [0.049]),
    ([], [], []),
])
def test_holm_rejects_in_steps_as_computed_by_hand(p, decisions, adjusted):
    assert holm(p) == decisions
    assert holm_adjusted(p) == pytest.approx(adjusted)
    assert [a <= 0.05 for a in holm_adjusted(p)] == decisions  # the adjusted p-values say the same


def test_the_bootstrap_p_value_agrees_with_the_printed_interval():
    rng = np.random.default_rng(0)
    assert bootstrap_p(np.ones((3, 40)), 999) == pytest.approx(2 / 1000)  # every resampled mean above 0
    for shift in (0.0, 0.05, 0.1, 0.2):
        d = (rng.random((3, 200)) < 0.3 + shift).astype(float) - (rng.random((3, 200)) < 0.3).astype(float)
        _, lo, hi = bootstrap_ci(d, "two_level", 4000, 0)
        p = bootstrap_p(d, 4000, 0)
        assert (lo > 0 or hi < 0) == (p < 0.05), (shift, lo, hi, p)

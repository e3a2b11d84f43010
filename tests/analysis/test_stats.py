"""Seed statistics and the bootstrap, against hand values and a brute-force loop reference."""

from __future__ import annotations

import numpy as np
import pytest

from rlvr_sweep.analysis import bootstrap_ci, mean_sd
from rlvr_sweep.analysis.stats import METHODS, resample_means


def test_mean_sd_is_the_papers_arm1_math500():
    # (44.4 + 45.0 + 48.8) / 3 = 46.0667; deviations -1.6667, -1.0667, +2.7333; squares sum 11.3867;
    # / (3 - 1) = 5.6933; sqrt = 2.3861
    mean, sd = mean_sd([44.4, 45.0, 48.8])
    assert (round(mean, 2), round(sd, 2)) == (46.07, 2.39)
    assert mean == pytest.approx(46.066667, abs=1e-6) and sd == pytest.approx(2.386071, abs=1e-6)


def test_mean_sd_edge_cases():
    assert mean_sd([5.0, 5.0, 5.0]) == (5.0, 0.0)
    mean, sd = mean_sd([47.4])
    assert mean == 47.4 and np.isnan(sd)  # one seed has no sample SD
    with pytest.raises(ValueError):
        mean_sd([])


def loop_reference(d: np.ndarray, method: str, n: int, seed: int) -> np.ndarray:
    """The bootstrap means one resample at a time, drawing the indices in the documented order."""
    S, N = d.shape
    rng = np.random.default_rng(seed)
    means = []
    if method == "two_level":
        seed_idx = rng.integers(0, S, size=(n, S))
        item_idx = rng.integers(0, N, size=(n, N))
        for r in range(n):
            total = 0.0
            for a in seed_idx[r]:
                for b in item_idx[r]:
                    total += d[a, b]
            means.append(total / (S * N))
    elif method == "question":
        item_idx = rng.integers(0, N, size=(n, N))
        for r in range(n):
            means.append(np.mean([d[s, i] for s in range(S) for i in item_idx[r]]))
    else:
        cell_idx = rng.integers(0, S * N, size=(n, S * N))
        flat = d.ravel()
        for r in range(n):
            means.append(np.mean([flat[c] for c in cell_idx[r]]))
    return np.array(means)


@pytest.mark.parametrize("method", METHODS)
def test_bootstrap_matches_a_brute_force_loop(method):
    d = np.array([[1, 0, 1, 1, 0, 0, 1], [0, 0, 1, 0, 1, 0, 1], [1, 1, 1, 0, 0, 0, 0]], dtype=float)
    d[1] -= d[2]  # values in {-1, 0, 1}, like paired differences
    n = 1234  # not a multiple of the vectorised block size
    fast = resample_means(d, method, n, seed=7)
    slow = loop_reference(d, method, n, seed=7)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)
    mean, lo, hi = bootstrap_ci(d, method, n, seed=7)
    assert mean == pytest.approx(d.mean())
    assert (lo, hi) == pytest.approx(tuple(np.percentile(slow, [2.5, 97.5])), abs=1e-12)


@pytest.mark.parametrize("scale", [1, 3])
def test_one_seed_question_means_are_the_item_gathers_bit_for_bit(scale):
    """One seed (Table 4's MDL - MaxLen): `question` draws what `flat` draws over the same values, and takes
    its path (counts for whole values); the means are the item gathers' own, bit for bit, whole or not."""
    d = np.random.default_rng(5).integers(-1, 2, size=200).astype(float) / scale
    n = 1234
    idx = np.random.default_rng(9).integers(0, 200, size=(n, 200))  # the documented order, one (R, N) draw
    assert np.array_equal(resample_means(d, "question", n, seed=9), d[idx].mean(axis=1))
    assert np.array_equal(resample_means(d[None], "question", n, seed=9), resample_means(d, "flat", n, seed=9))


def test_same_seed_same_numbers_other_seed_other_numbers():
    d = np.random.default_rng(3).integers(0, 2, size=(3, 50)).astype(float)
    for method in METHODS:
        assert bootstrap_ci(d, method, 500, seed=11) == bootstrap_ci(d, method, 500, seed=11)
        assert bootstrap_ci(d, method, 500, seed=11) != bootstrap_ci(d, method, 500, seed=12)


def test_bootstrap_hand_cases():
    # one seed, items (0, 1): a resample mean is 0, 0.5 or 1 with probability 1/4, 1/2, 1/4, so the
    # 2.5th and 97.5th percentiles of 4,000 draws are 0 and 1
    assert bootstrap_ci([0.0, 1.0], "question") == (0.5, 0.0, 1.0)
    # a constant difference has a degenerate interval under every method
    for method in METHODS:
        assert bootstrap_ci(np.full((3, 9), 0.25), method) == (0.25, 0.25, 0.25)
    # seed-level spread: two seeds that always disagree by a whole point widen only the two-level interval
    d = np.array([[1.0] * 40, [0.0] * 40])
    assert bootstrap_ci(d, "question")[1:] == (0.5, 0.5)
    two = bootstrap_ci(d, "two_level")
    assert two[1] == 0.0 and two[2] == 1.0  # resampled seeds can be (0, 0) or (1, 1), each w.p. 1/4


def test_bootstrap_rejects_bad_input():
    with pytest.raises(ValueError, match="two_level"):
        bootstrap_ci([[1.0]], "seed")
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_ci([[1.0, np.nan]])
    with pytest.raises(ValueError, match="non-empty"):
        bootstrap_ci(np.zeros((3, 0)))
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci([[1.0, 0.0]], level=95)


@pytest.mark.parametrize("method", METHODS)
def test_kept_draws_give_the_numbers_of_fresh_ones(method, monkeypatch):
    """Every arm on one benchmark draws the same indices (same shape, same seed): `resample_means` keeps
    them. Kept or drawn anew, the means are the same to the bit, for any block split of the resamples."""
    from rlvr_sweep.analysis import stats

    d = np.random.default_rng(7).normal(size=(3, 41))
    kept = [resample_means(d, method, 1234, 5) for _ in range(2)]  # the second call reads the kept draws
    monkeypatch.setattr(stats, "_KEEP_BYTES", 0)  # nothing kept: every call draws
    drawn = resample_means(d, method, 1234, 5)
    assert kept[0].tobytes() == kept[1].tobytes() == drawn.tobytes()
    assert resample_means(d, method, 1234, 6).tobytes() != drawn.tobytes()  # another seed, other draws


@pytest.mark.parametrize("shape", [(3, 500), (1, 210), (2, 41)])
@pytest.mark.parametrize("low, high", [(0, 2), (-1, 2), (-2, 3)])
def test_whole_valued_grids_give_the_general_path_s_numbers_to_the_bit(shape, low, high, monkeypatch):
    """0/1 outcomes, paired differences and interactions resample as matrix products of the draws' counts
    (`_whole_means`): every sum is of whole numbers, so the means are those of the gathers, bit for bit."""
    from rlvr_sweep.analysis import stats

    d = np.random.default_rng(sum(shape) + high).integers(low, high, size=shape).astype(float)
    assert stats._whole(d) and not stats._whole(d + 0.5)
    counted = {m: resample_means(d, m, 1234, 5) for m in METHODS}
    monkeypatch.setattr(stats, "_whole", lambda grid: False)  # the general path: index gathers
    for method in METHODS:
        assert counted[method].tobytes() == resample_means(d, method, 1234, 5).tobytes()
        if shape[1] < 100:  # the loop is slow on wide grids
            np.testing.assert_allclose(counted[method], loop_reference(d, method, 1234, 5), rtol=0, atol=1e-12)

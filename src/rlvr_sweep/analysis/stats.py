"""Seed statistics and percentile bootstrap intervals (seed paper §5.2, §5.3, §5.5).

`mean_sd` is the 3-seed mean and sample SD of Table 1. `bootstrap_ci` resamples a (seeds, items)
array of per-seed per-item values (0/1 outcomes, paired differences or interactions of differences)
three ways: `two_level` (the paper's primary: seeds and items resampled independently), `question`
(items only, the same for every seed: conditional on the checkpoints) and `flat` (every seed x item
cell on its own: the auxiliary 3N interval). Every method is vectorised over resamples with numpy
and seeded, so the same input and seed give the same interval.
"""

from __future__ import annotations

import functools

import numpy as np

METHODS = ("two_level", "question", "flat")
_CHUNK = 500  # resamples per vectorised block: bounds memory at (500, N) index arrays


def mean_sd(values) -> tuple[float, float]:
    """(mean, sample SD with ddof 1); the SD of a single value is NaN.

    >>> [round(x, 2) for x in mean_sd([44.4, 45.0, 48.8])]   # Arm 1 on MATH-500 (Table 1)
    [46.07, 2.39]
    """
    v = np.asarray(values, dtype=float).ravel()
    if v.size == 0:
        raise ValueError("mean_sd needs at least one value")
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else float("nan")


def _as_grid(d) -> np.ndarray:
    grid = np.asarray(d, dtype=float)
    if grid.ndim == 1:
        grid = grid[None, :]  # one seed
    if grid.ndim != 2 or grid.size == 0:
        raise ValueError(f"bootstrap_ci needs a non-empty (seeds, items) array, got shape {grid.shape}")
    if not np.isfinite(grid).all():
        raise ValueError("bootstrap_ci got NaN or infinite values; align seeds and items first")
    return grid


def _counts(idx: np.ndarray, n: int) -> np.ndarray:
    """(R, m) draws in [0, n) -> (R, n) how often each index was drawn in each resample."""
    rows = idx.shape[0]
    flat = (idx + n * np.arange(rows)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * n).reshape(rows, n)


def resample_means(d, method: str, n_resamples: int = 4000, seed: int = 0) -> np.ndarray:
    """The (n_resamples,) bootstrap means behind `bootstrap_ci`.

    Draw order, which a loop reference must follow to get the same numbers from the same seed
    (`np.random.default_rng(seed)`, all resamples' indices at once):
      two_level: seed indices `integers(0, S, (R, S))`, then item indices `integers(0, N, (R, N))`;
                 resample r averages d over the grid seed_idx[r] x item_idx[r];
      question:  item indices `integers(0, N, (R, N))`; every seed keeps its row;
      flat:      cell indices `integers(0, S*N, (R, S*N))` into d.ravel() (row-major).
    """
    if method not in METHODS:
        raise ValueError(f"unknown bootstrap method {method!r}; valid: {list(METHODS)}")
    grid = _as_grid(d)
    S, N = grid.shape
    if method == "question" and S == 1:
        method = "flat"  # one seed: the same draws (integers(0, N, (R, N))) over the same N values
    if method != "question" and _whole(grid) and isinstance(seed, (int, np.integer)):
        return _whole_means(grid, method, n_resamples, int(seed))
    blocks = [(lo, min(lo + _CHUNK, n_resamples)) for lo in range(0, n_resamples, _CHUNK)]
    draws = _draws(method, S, N, n_resamples, seed)
    out = np.empty(n_resamples)
    if method == "two_level":
        for (lo, hi), (cs, ci) in zip(blocks, draws):  # grid mean = (seed counts) @ d @ (item counts) / (S N)
            out[lo:hi] = ((cs @ grid) * ci).sum(axis=1) / (S * N)
    elif method == "question":
        per_item = grid.mean(axis=0)  # the same items for every seed: resample the seed-averaged items
        for (lo, hi), idx in zip(blocks, draws):
            out[lo:hi] = per_item[idx].mean(axis=1)
    else:
        cells = grid.ravel()
        for (lo, hi), idx in zip(blocks, draws):
            out[lo:hi] = cells[idx].mean(axis=1)
    return out


def _whole(grid: np.ndarray) -> bool:
    """Whether every value is a whole number small enough that any sum a resample makes of them is exact,
    in float32 too (0/1 outcomes and their paired differences and interactions are)."""
    return bool(np.array_equal(grid, np.rint(grid))) and float(np.abs(grid).max()) * grid.size < 2 ** 24


def _whole_means(grid: np.ndarray, method: str, n_resamples: int, seed: int) -> np.ndarray:
    """`resample_means` of a whole-valued grid as products with the draws' counts: every sum is of
    whole numbers, so exact whatever its order, and each mean is that exact sum over S*N, as the gathers
    of the general path give it: the same numbers, bit for bit, from the same draws."""
    S, N = grid.shape
    counts = _counted(method, S, N, n_resamples, seed)
    # einsum's own loops, not BLAS: BLAS would start threads of its own beside the tables' forked processes
    if method == "two_level":  # sum_s seed_count[s] * sum_n item_count[n] d[s, n]
        seed_counts, item_counts = counts
        return (np.einsum("rn,sn->rs", item_counts, grid) * seed_counts).sum(axis=1) / (S * N)
    return np.einsum("rc,c->r", counts, grid.ravel().astype(np.float32)).astype(np.float64) / (S * N)


@functools.lru_cache(maxsize=6)
def _counted(method: str, S: int, N: int, n_resamples: int, seed: int):
    """The draws of `_drawn` as counts, all resamples in one array: (seed counts, item counts) as float64
    (two_level), or cell counts as float32 (flat: exact, each count at most S*N < 2**24)."""
    blocks = list(_drawn(method, S, N, n_resamples, seed))
    if method == "two_level":
        counted = (np.vstack([b[0] for b in blocks]).astype(np.float64),
                   np.vstack([b[1] for b in blocks]).astype(np.float64))
    else:
        counted = (np.vstack([_counts(b, S * N) for b in blocks]).astype(np.float32),)
    for a in counted:
        a.flags.writeable = False  # shared by every later call
    return counted if method == "two_level" else counted[0]


def _draws(method: str, S: int, N: int, n_resamples: int, seed):
    """The random part of `resample_means`, block by block: item (question), cell (flat) or (seed counts,
    item counts) (two_level) indices. They depend on the shape and the seed only, so every arm resampled
    on one benchmark with one seed draws the same ones: they are kept (`_kept`) rather than drawn again,
    where they are small enough."""
    if not isinstance(seed, (int, np.integer)) or n_resamples * S * N * 8 > _KEEP_BYTES:
        return _drawn(method, S, N, n_resamples, seed)
    return _kept(method, S, N, n_resamples, seed)


_KEEP_BYTES = 32 << 20  # the largest set of draws kept (8 bytes an index), 4 sets at most


def _drawn(method: str, S: int, N: int, n_resamples: int, seed):
    rng = np.random.default_rng(seed)
    # Index blocks are drawn one after another from the same stream, which gives exactly the numbers
    # of one (R, m) draw (numpy's bounded integers are drawn value by value) with bounded memory.
    for lo in range(0, n_resamples, _CHUNK):
        hi = min(lo + _CHUNK, n_resamples)
        if method == "two_level":
            if lo == 0:
                seed_idx = rng.integers(0, S, size=(n_resamples, S))
            yield _counts(seed_idx[lo:hi], S), _counts(rng.integers(0, N, size=(hi - lo, N)), N)
        elif method == "question":
            yield rng.integers(0, N, size=(hi - lo, N))
        else:
            yield rng.integers(0, S * N, size=(hi - lo, S * N))


@functools.lru_cache(maxsize=4)
def _kept(method: str, S: int, N: int, n_resamples: int, seed) -> tuple:
    blocks = tuple(_drawn(method, S, N, n_resamples, seed))
    for block in blocks:
        for a in block if isinstance(block, tuple) else (block,):
            a.flags.writeable = False  # shared by every later call
    return blocks


def bootstrap_ci(d, method: str = "two_level", n_resamples: int = 4000, seed: int = 0,
                 level: float = 0.95) -> tuple[float, float, float]:
    """(mean of d, lower, upper): a percentile interval from `n_resamples` bootstrap means.

    `d`: (seeds, items) per-seed per-item values (a 1-D array is one seed). The point estimate is the
    plain mean of d (for a balanced grid, the mean of the per-seed means). See `resample_means` for
    what each method resamples and in which order the random indices are drawn.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    means = resample_means(d, method, n_resamples, seed)
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(_as_grid(d).mean()), float(lo), float(hi)

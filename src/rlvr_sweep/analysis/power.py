"""How wide a contrast's two-level interval will be at S seeds, and how many seeds a target needs (docs/planning.md).

A contrast's paired differences d[seed, item] (`contrasts.contrast_grid`) are read as a two-way random-effects
layout, d = mu + a_seed + b_item + e: `components` estimates the three variances by the ANOVA method of moments
(unbiased, so an estimate may come out negative when a component is near zero). At the pilot's own size the
signed estimates give back the pilot's bootstrap variance exactly; a prediction at any other size sets a negative
estimate to 0 (the usual truncation), since a signed one can make the predicted variance at many seeds vanish
(seen: a 3-seed pilot whose item component came out at -67 pp^2 predicted a half-width of 0.00 at 22 seeds, where
the bootstrap printed 0.81; docs/planning.md).

The interval the tables print is the project's own two-level percentile bootstrap (`stats.bootstrap_ci`: seeds
and items resampled independently). Its variance, for a layout with those components, is (derived from the
multinomial counts of the resampling; `bootstrap_variance`)

    (S-1)/S^2 (sa + se/N) + (N-1)(S-1)/(S^2 N^2) se + (N-1)/N^2 (sb + se/S)

which, with the moment estimates of a pilot, gives back the pilot's own bootstrap variance (tested), and at
other S the interval the bootstrap will print: half-width z * sqrt(variance), z the normal quantile
(`scipy.special.ndtri`, what `scipy.stats.norm.ppf` evaluates). Note the interaction counts about three times
(se / SN each from the seed draws, the item draws and their product): the two-level bootstrap is conservative,
as McCullagh (2000, "Resampling and exchangeable arrays", Bernoulli 6(2)) shows for crossed designs; the
planner predicts the interval the tables will print, conservatism included. As S grows the half-width falls to
its floor, z * sqrt((N-1)/N^2 sb): the items' own spread, which no number of seeds removes on a fixed benchmark
(only more items do).

Seeds to detect an effect delta with power P: the decision is the printed interval excluding 0, at the
family's Bonferroni level alpha/m when m contrasts are planned together (the first, strictest step of Holm's
procedure, `multiplicity`); the estimate's spread across reruns of the same benchmark is its seeds' and the
interaction's, sqrt(sa/S + se/(S N)) (the items are the benchmark's own). Power is then
Phi((delta - z_{1-alpha/2m} sd_boot) / sd_rerun).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

MAX_SEEDS = 200  # the most seeds a plan proposes; more says "not within 200 seeds"


@dataclass(frozen=True)
class Components:
    """Variance components of a (seeds, items) grid of paired differences (ANOVA moments, signed)."""

    seed: float  # between seeds (a)
    item: float  # between items (b)
    interaction: float  # seed x item, the residual (e)
    seeds: int
    items: int
    mean: float

    def as_dict(self) -> dict:
        return {"seed": self.seed, "item": self.item, "interaction": self.interaction, "seeds": self.seeds,
                "items": self.items, "mean": self.mean}


def components(d) -> Components:
    """The moment estimates of a grid of at least 2 seeds and 2 items (ValueError otherwise)."""
    y = np.asarray(d, dtype=float)
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 2 or not np.isfinite(y).all():
        raise ValueError(f"variance components need a finite grid of at least 2 seeds and 2 items, got {y.shape}")
    S, N = y.shape
    grand, rows, cols = y.mean(), y.mean(axis=1), y.mean(axis=0)
    ms_seed = N * ((rows - grand) ** 2).sum() / (S - 1)
    ms_item = S * ((cols - grand) ** 2).sum() / (N - 1)
    ms_rest = ((y - rows[:, None] - cols[None, :] + grand) ** 2).sum() / ((S - 1) * (N - 1))
    return Components(float((ms_seed - ms_rest) / N), float((ms_item - ms_rest) / S), float(ms_rest), S, N,
                      float(grand))


def bootstrap_variance(c: Components, seeds: int, items: int | None = None) -> float:
    """The two-level bootstrap's variance of the mean at `seeds` seeds and `items` items (the pilot's by default),
    never below 0; away from the pilot's own size with negative estimates set to 0 (module docstring)."""
    S, N = seeds, items or c.items
    own = (S, N) == (c.seeds, c.items)
    seed, item = (c.seed, c.item) if own else (max(c.seed, 0.0), max(c.item, 0.0))
    value = ((S - 1) / S ** 2 * (seed + c.interaction / N) + (N - 1) * (S - 1) / (S ** 2 * N ** 2) * c.interaction
             + (N - 1) / N ** 2 * (item + c.interaction / S))
    return max(float(value), 0.0)


def _phi(x: float) -> float:
    """The standard normal cdf: `scipy.special.ndtr`, the function `scipy.stats.norm.cdf` evaluates (with loc 0
    and scale 1 it is the same float, tested). Called directly: Table 2B's verdicts ask for tens of thousands of
    values one at a time, and `norm.cdf`'s argument handling costs some 100x the value (seconds a table);
    scipy.special is imported when first used, and scipy.stats (a second to import) not at all."""
    from scipy.special import ndtr

    return float(ndtr(x))


@functools.cache
def _quantile(q: float) -> float:
    """The standard normal quantile: `scipy.special.ndtri`, as `scipy.stats.norm.ppf(q)` gives it (tested); one
    per level and family size, so remembered."""
    from scipy.special import ndtri

    return float(ndtri(q))


def _z(level: float) -> float:
    return _quantile(1 - (1 - level) / 2)


def half_width(c: Components, seeds: int, items: int | None = None, level: float = 0.95) -> float:
    """The predicted half-width of the two-level interval (in the grid's units)."""
    return _z(level) * math.sqrt(bootstrap_variance(c, seeds, items))


def floor(c: Components, items: int | None = None, level: float = 0.95) -> float:
    """The half-width no number of seeds goes below on `items` items: the items' own spread."""
    N = items or c.items
    return _z(level) * math.sqrt(max((N - 1) / N ** 2 * c.item, 0.0))


def seeds_for_halfwidth(c: Components, target: float, items: int | None = None, level: float = 0.95) -> int | None:
    """The fewest seeds (at least 2) whose predicted half-width is at most `target`; None when not within
    MAX_SEEDS (the floor above the target, or too far)."""
    return next((S for S in range(2, MAX_SEEDS + 1) if half_width(c, S, items, level) <= target), None)


def power(c: Components, effect: float, seeds: int, items: int | None = None, alpha: float = 0.05,
          family: int = 1) -> float:
    """The chance that the two-level interval at level 1 - alpha/family excludes 0 when the true difference on
    this benchmark is `effect` (module docstring)."""
    N = items or c.items
    boot = math.sqrt(bootstrap_variance(c, seeds, N))
    rerun = math.sqrt(max(max(c.seed, 0.0) / seeds + c.interaction / (seeds * N), 1e-300))
    z = _quantile(1 - alpha / (2 * family))
    return _phi((abs(effect) - z * boot) / rerun) + _phi((-abs(effect) - z * boot) / rerun)


def seeds_for_effect(c: Components, effect: float, target_power: float = 0.8, items: int | None = None,
                     alpha: float = 0.05, family: int = 1) -> int | None:
    """The fewest seeds (at least 2) whose power to detect `effect` reaches `target_power`; None when not within
    MAX_SEEDS."""
    return next((S for S in range(2, MAX_SEEDS + 1)
                 if power(c, effect, S, items, alpha, family) >= target_power), None)

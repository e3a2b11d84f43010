"""Training curves (seed paper §5.1's per-step ledgers, drawn): mean reward, active fraction, mean rollout
length and rollouts at the horizon per step; and the health signals that judge an objective (`HEALTH`: policy
entropy, KL to the initial policy, clip fractions, the importance ratio's range, groups with zero reward
variance, rollouts cut at the cap, the gap between the decode engine's and the trainer's log-probs), each
recorded on the step that made an update (docs/health.md).

- One figure per arm (`draw_curves`), four panels each on its own y-scale.
- One overlay figure per metric (`draw_overlay`): every arm on one shared axis, each in its colour and
  marker of Figures 1 and 2 (`palette`), legend by arm number and name. A health signal's overlay holds the
  arms that recorded it (an objective without a ratio has no clip fraction; KL is measured where the objective
  has a reference).

Each seed's series is first smoothed by a WINDOW-step trailing rolling mean; an arm's line is the mean of
those over its seeds and its band spans their min to max across seeds (with three seeds a min-max band
shows every seed; an SD of three values would not).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only: no display is needed (CI, notebooks under nbclient)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from rlvr_sweep.analysis.palette import arm_styles, handle  # noqa: E402
from rlvr_sweep.analysis.source import Sweep  # noqa: E402

WINDOW = 10  # steps in every curve's rolling mean: single steps (one question each) are too noisy to read
CURVES = (("mean_reward", "mean reward"), ("active", "active fraction"), ("length", "rollout length (tokens)"),
          ("capped", "rollouts at the horizon"))
HEALTH = (("entropy", "policy entropy (nats per token)"), ("kl_ref", "KL to the initial policy (k3, per token)"),
          ("clip_low", "tokens clipped at 1 - eps (A < 0)"), ("clip_high", "tokens clipped at 1 + eps (A > 0)"),
          ("ratio_max", "importance ratio, max"), ("ratio_min", "importance ratio, min"),
          ("zero_variance", "groups with zero reward variance"), ("truncated_share", "rollouts cut at the cap"),
          ("logp_gap_mean", "engine vs trainer log-prob gap, mean |gap|"),
          ("logp_gap_outside", "tokens whose engine / trainer ratio leaves [0.9, 1.1]"))
TITLES = dict((*CURVES, *HEALTH))
BAND_ALPHA = 0.25  # one arm's band; in the overlay, where bands of many arms cross, a lighter one
OVERLAY_BAND_ALPHA = 0.12


def curve_band(steps: pd.DataFrame, seeds, column: str, window: int = WINDOW) -> pd.DataFrame:
    """Per step (1-based, index `step`): `mean`, `lo`, `hi` over seeds of each seed's `window`-step
    trailing rolling mean of `column` ("length": leaf tokens per rollout). A step some seeds lack is
    summarised over the seeds that have it."""
    per_seed = {}
    for seed in seeds:
        s = steps[steps["seed"] == seed].sort_values("step")
        if not len(s):
            continue
        if column == "length":  # per rollout: leaf tokens over the step's rollouts
            y = s["leaf_tokens"] / s["rewards"].map(len).replace(0, np.nan)
        elif column not in s.columns:  # a signal recorded since: none of this seed's steps has it
            continue
        else:
            y = s[column].astype(float)
        if y.isna().all():
            continue
        per_seed[seed] = pd.Series(y.rolling(window, min_periods=1).mean().to_numpy(), index=s["step"] + 1)
    grid = pd.DataFrame(per_seed, dtype=float)  # (steps, seeds)
    grid.index.name = "step"
    return pd.DataFrame({"mean": grid.mean(axis=1), "lo": grid.min(axis=1), "hi": grid.max(axis=1),
                         "n": grid.notna().sum(axis=1)})


def curve_names(sweep: Sweep) -> dict[str, str]:
    """{unit: file stem} of every arm row with a steps ledger: `curves_<profile>_<arm>_h<horizon>`, plus
    the row's group hash when one arm has several rows (other settings or inputs)."""
    units = [u for u in sweep.units() if len(sweep.rows("steps", unit=u))]
    stems = {}
    for u in units:
        first = sweep.runs_of(u).iloc[0]
        stems.setdefault(f"curves_{first['profile']}_{first['arm']}_h{first['horizon']}", []).append(u)
    return {u: stem if len(us) == 1 else f"{stem}_{u[:8]}" for stem, us in stems.items() for u in us}


def _band(ax, unit_band: pd.DataFrame, colour: str, alpha: float, gid: str) -> None:
    several = unit_band["n"] > 1  # a band of one seed would be a line: none is drawn there
    ax.fill_between(unit_band.index, unit_band["lo"], unit_band["hi"], where=several, color=colour, alpha=alpha,
                    lw=0, gid=gid)


def draw_curves(sweep: Sweep, unit: str) -> Figure:
    """One arm's training curves (module docstring); the mean line has gid `mean:<column>`, the band
    `band:<column>`."""
    steps = sweep.rows("steps", unit=unit)
    seeds = list(sweep.runs_of(unit)["seed"])  # the paper's seed order
    colour = arm_styles(sweep)[unit].colour  # the arm's colour in Figures 1 and 2
    fig, axes = plt.subplots(2, 2, sharex=True, figsize=(8.5, 5.4), layout="constrained")
    for ax, (column, title) in zip(axes.flat, CURVES):
        band = curve_band(steps, seeds, column)
        ax.plot(band.index, band["mean"], color=colour, lw=1.5, gid=f"mean:{column}")
        _band(ax, band, colour, BAND_ALPHA, f"band:{column}")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(6, integer=True))
    for ax in axes[1]:
        ax.set_xlabel("step")
    fig.suptitle(f"{sweep.label(unit)}: {WINDOW}-step rolling means, {len(seeds)} seed{'s' * (len(seeds) > 1)}")
    fig.legend(handles=[Line2D([], [], color=colour, lw=1.5, label="mean over seeds"),
                        Patch(color=colour, alpha=BAND_ALPHA, label="min to max over seeds")],
               loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    return fig


def recorded(sweep: Sweep, column: str) -> list[str]:
    """The arm rows whose steps hold a value of `column` (all of them for CURVES)."""
    units = list(curve_names(sweep))
    if column in dict(CURVES):
        return units
    return [u for u in units if column in (steps := sweep.rows("steps", unit=u)).columns and steps[column].notna().any()]


def draw_overlay(sweep: Sweep, column: str) -> Figure:
    """Every arm's curve of `column` (one of CURVES or HEALTH) on one axis: its mean over seeds as a line in its
    colour, marked with its marker every few steps (so greyscale still tells lines apart), gid
    `overlay:mean:<unit>`, and its min-max band, gid `overlay:band:<unit>`; the legend names each arm (those that
    recorded the signal)."""
    title = TITLES[column]
    styles = arm_styles(sweep)
    units = recorded(sweep, column)
    fig, ax = plt.subplots(figsize=(9.5 if len(units) <= 16 else 11.5, 4.8), layout="constrained")
    for i, unit in enumerate(units):
        style = styles[unit]
        band = curve_band(sweep.rows("steps", unit=unit), list(sweep.runs_of(unit)["seed"]), column)
        every = max(1, len(band) // 6)
        ax.plot(band.index, band["mean"], color=style.colour, lw=1.4, marker=style.marker, ms=5, mec="black",
                mew=0.4, markevery=(i % every, every), zorder=3, gid=f"overlay:mean:{unit}")  # markers staggered
        _band(ax, band, style.colour, OVERLAY_BAND_ALPHA, f"overlay:band:{unit}")
    ax.set_xlabel("step")
    ax.set_ylabel(title)
    ax.xaxis.set_major_locator(MaxNLocator(8, integer=True))
    ax.grid(alpha=0.3)
    ax.set_title(f"{title}, every arm: mean over seeds, band min to max ({WINDOW}-step rolling means)", fontsize=10)
    handles = [handle(styles[u], line=True) for u in units]
    fig.legend(handles=handles, loc="outside right upper", ncols=1 if len(units) <= 16 else 2, fontsize=8,
               frameon=False, title="arm", title_fontsize=8)
    return fig

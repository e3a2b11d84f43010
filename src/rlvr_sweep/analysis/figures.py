"""The paper's figures (seed paper §5.1 Figure 1, §5.3 Figure 2, training curves), as PNG and PDF.

- Figure 1: per arm, in the paper's arm order, trained accuracy on the main benchmark (MATH-500, else the
  benchmark most arms read out) above, read-out cap hits on it below. Each arm shows its mean (Table 1's)
  with the two-level 95 % bootstrap interval as an error bar and its seeds as points beside it; the base
  model (Table 1's base row) is a dashed reference line. Each arm's mean carries its tag (paper arm
  number, else a letter) where it fits.
- Figure 2: accuracy on Ext240 (else the main benchmark) against the Out and Full TFLOP proxies: each
  seed a small point, each arm's mean a large marker with its two-level 95 % interval and its tag where
  it fits, the base model a dashed line (0 training FLOPs); the legend names every arm by tag and label.
- Training curves (`curves`): one figure per arm, and one per metric with every arm on a shared axis.

Every arm keeps one colour, marker and tag in all of them (`palette`: up to 24 arm rows, told apart in
greyscale too).

y-axes follow the data (seeds, intervals, base line, plus a margin), not 0, so that a 1-point
difference is visible. Every `draw_*` returns open Figures (tests read their artists); `figure1`,
`figure2` and `training_curves` save them and return (paths written, reason none were written or None);
`training_curves` writes the overlays (`curves_overlay_<metric>`, two arm rows or more; `curves_health_<signal>`
for each health signal some arm recorded) before each arm's.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display is needed (CI, notebooks under nbclient)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from rlvr_sweep.analysis.curves import CURVES, HEALTH, curve_names, draw_curves, draw_overlay, recorded  # noqa: E402
from rlvr_sweep.analysis.palette import LEFT, arm_styles, handle, place_tags  # noqa: E402
from rlvr_sweep.analysis.source import BENCHMARK_NAMES, Sweep, item_matrix  # noqa: E402
from rlvr_sweep.analysis.stats import bootstrap_ci  # noqa: E402
from rlvr_sweep.analysis.table1 import build_table1, cap_benchmark, run_proxies  # noqa: E402

N_RESAMPLES, BOOT_SEED = 4000, 0  # the tables' defaults (`build_tables`), so a figure's CI is Table 2B's kind
FORMATS = ("png", "pdf")
_BASE_STYLES = ("--", ":", "-.")  # one per base model row (usually one)


# ---- what is drawn: numbers only, no matplotlib ----------------------------------------------------------

def arm_ci(sweep: Sweep, unit: str, benchmark: str, metric: str = "correct", scale: str = "percent"):
    """(lower, upper) two-level 95 % bootstrap interval of the arm's mean `metric` (seeds and items
    resampled, `stats.bootstrap_ci` as Table 2B uses it), in percent or, `scale="count"`, in items per
    seed; None below two seeds (no seed level to resample: Table 2B leaves it blank too)."""
    seeds, items, grid = item_matrix(sweep, unit, benchmark, metric)
    if len(seeds) < 2 or not items:
        return None
    _, lo, hi = bootstrap_ci(grid, "two_level", N_RESAMPLES, BOOT_SEED)
    factor = 100.0 if scale == "percent" else float(len(items))
    return lo * factor, hi * factor


def _arms(sweep: Sweep, table1: pd.DataFrame, bench: str, key: str, metric: str, scale: str) -> list[dict]:
    """One dict per arm row that has `key` (Table 1's `<bench>.` or `allcap.`) read-outs: its mean and
    per-seed values from Table 1, its interval and label."""
    rows = table1[~table1["is_base"].astype(bool)] if len(table1) else table1
    out = []
    for _, r in rows.iterrows():
        seeds = r.get(f"{key}.per_seed")
        if not isinstance(seeds, list) or not seeds:
            continue
        out.append({"unit": r["unit"], "label": r["label"], "mean": float(r[f"{key}.mean"]), "seeds": [float(v) for v in seeds],
                    "ci": arm_ci(sweep, r["unit"], bench, metric, scale)})
    return out


def _bases(table1: pd.DataFrame, key: str) -> list[tuple[str, float]]:
    """(label, value) of Table 1's base model rows that read `key` out."""
    if not len(table1) or f"{key}.mean" not in table1.columns:
        return []
    rows = table1[table1["is_base"].astype(bool)]
    return [(r["label"], float(r[f"{key}.mean"])) for _, r in rows.iterrows() if pd.notna(r[f"{key}.mean"])]


def limits(values, pad_min: float = 0.5) -> tuple[float, float]:
    """y-limits around every value drawn (seeds, interval ends, base lines) with an 8 % margin (at least
    `pad_min`), so that the differences fill the panel instead of the distance from 0."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    lo, hi = float(v.min()), float(v.max())
    pad = max(0.08 * (hi - lo), pad_min)
    return lo - pad, hi + pad


# ---- drawing ------------------------------------------------------------------------------------------------

def _arm_axis(ax, labels: list[str]) -> None:
    """Arm labels under the x-axis: wrapped at spaces and level while they fit, upright when many."""
    x = np.arange(len(labels))
    if len(labels) <= 8:
        ax.set_xticks(x, [textwrap.fill(s, 16, break_long_words=False) for s in labels], fontsize=8)
    else:
        ax.set_xticks(x, labels, fontsize=8, rotation=90)
    ax.set_xlim(-0.6, len(labels) - 0.4)


def _mean_with_ci(ax, x: float, arm: dict, gid: str, **style) -> tuple[float, float]:
    """The arm's mean at x (gid `<gid>:mean:<unit>`) with its interval as an error bar (`<gid>:ci:<unit>`;
    none for a single seed). Returns the interval's ends (the mean twice without one)."""
    mean, ci = arm["mean"], arm["ci"]
    yerr = None if ci is None else [[mean - ci[0]], [ci[1] - mean]]
    bars = ax.errorbar(x, mean, yerr=yerr, zorder=3, **style)
    bars.lines[0].set_gid(f"{gid}:mean:{arm['unit']}")
    if ci is not None:
        bars.lines[2][0].set_gid(f"{gid}:ci:{arm['unit']}")
    return ci if ci is not None else (mean, mean)


def _draw_arms(ax, arms: list[dict], styles: dict, gid: str) -> list[float]:
    """Each arm at x = its position: mean with its interval (gid `<gid>:ci:<unit>`) in its colour and marker,
    its seeds as hollow markers just right of it. Returns every y drawn, for the limits."""
    ys = []
    for i, a in enumerate(arms):
        if not a["seeds"]:  # this arm has no values in this panel: its place stays empty
            continue
        style = styles[a["unit"]]
        lo, hi = _mean_with_ci(ax, i - 0.08, a, gid, fmt=style.marker, ms=6, color=style.colour, mec="black",
                               mew=0.5, elinewidth=1.6, capsize=4)
        offsets = np.linspace(-0.05, 0.05, len(a["seeds"])) if len(a["seeds"]) > 1 else np.zeros(1)
        ax.scatter(i + 0.16 + offsets, a["seeds"], s=16, marker=style.marker, facecolors="none",
                   edgecolors=style.colour, linewidths=1, zorder=3, gid=f"{gid}:seeds:{a['unit']}")
        ys += [*a["seeds"], lo, hi]
    return ys


def _draw_bases(axes, bases: list[tuple[str, float]], gid: str) -> list[float]:
    """The base model's value as a dashed line across each of `axes` (gid `<gid>:base:<label>`)."""
    for ax in axes:
        for (label, y), style in zip(bases, _BASE_STYLES * 4):
            ax.axhline(y, color="0.25", ls=style, lw=1.1, zorder=1, gid=f"{gid}:base:{label}")
    return [y for _, y in bases]


def _base_handles(bases: list) -> list[Line2D]:
    return [Line2D([], [], color="0.25", ls=s, label=label) for (label, _), s in zip(bases, _BASE_STYLES * 4)]


def _figure1_legend(fig, bases: list) -> None:
    """The two marks and the base line(s), right of the panels: constrained layout keeps it clear of them,
    and the title sits on the top panel, so it cannot run into the legend. The arms need no entry: the
    x-axis names them and each mean carries its tag."""
    handles = [Line2D([], [], color="0.3", marker="o", lw=1.6, label="mean, 95 % CI\n(two-level bootstrap)"),
               Line2D([], [], color="0.3", marker="o", ls="none", mfc="none", label="seeds"),
               Line2D([], [], color="none", marker="$5$", mec="0.1", ms=6, label="paper arm number\n(else a letter)")]
    fig.legend(handles=handles + _base_handles(bases), loc="outside right upper", fontsize=8, frameon=False)


def draw_figure1(sweep: Sweep) -> tuple[Figure | None, str | None]:
    """Figure 1 (module docstring), or None and why. Panels: accuracy above, cap hits below; each arm's
    artists carry gids `accuracy:` / `caps:` + `mean:`, `ci:`, `seeds:` + unit, its tag on the top panel
    `accuracy:tag:<unit>`, the base lines `<panel>:base:<label>`."""
    bench = cap_benchmark(sweep)
    table1 = build_table1(sweep).frame if bench else pd.DataFrame()
    acc = _arms(sweep, table1, bench, bench, "correct", "percent") if bench else []
    if not acc:
        return None, "no trained read-outs to plot"
    caps = {a["unit"]: a for a in _arms(sweep, table1, bench, "allcap", "capped", "count")}
    styles = arm_styles(sweep)
    width = max(5, 1.0 * len(acc) + 1.5) if len(acc) <= 8 else 0.35 * len(acc) + 2
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, height_ratios=(3, 2), figsize=(width + 1.8, 5.4),
                                      layout="constrained")
    name = BENCHMARK_NAMES.get(bench, bench)
    bases = _bases(table1, bench)
    top.set_ylim(*limits(_draw_arms(top, acc, styles, "accuracy") + _draw_bases([top], bases, "accuracy")))
    top.set_ylabel(f"{name} accuracy (%)")
    cap_arms = [caps.get(a["unit"]) or {**a, "seeds": []} for a in acc]  # same x positions as above
    cap_bases = _bases(table1, "allcap")
    ys = _draw_arms(bottom, cap_arms, styles, "caps") + _draw_bases([bottom], cap_bases, "caps")
    bottom.set_ylim(*limits(ys or [0.0]))
    bottom.yaxis.set_major_locator(MaxNLocator(4, integer=True))  # counts of responses
    bottom.set_ylabel("read-out cap hits")
    _arm_axis(bottom, [a["label"] for a in acc])
    for ax in (top, bottom):
        ax.grid(axis="y", alpha=0.3)
    top.set_title(f"Figure 1: {name} after training, per arm")
    _figure1_legend(fig, bases)
    place_tags(top, [(a["unit"], i - 0.08, a["mean"], styles[a["unit"]].tag) for i, a in enumerate(acc)],
               "accuracy", offsets=LEFT)  # left of the mean: its seeds are on its right
    return fig, None


def _figure2_arms(sweep: Sweep, bench: str, table1: pd.DataFrame) -> list[dict]:
    """Figure 1's arms of `bench` with each seed's (out, full) proxies; arms without a parameter count
    (no FLOPs) are left out."""
    arms = []
    for a in _arms(sweep, table1, bench, bench, "correct", "percent"):
        runs = sweep.runs_of(a["unit"])
        if not runs["params"].notna().all():
            continue
        table_row = table1[table1["unit"] == a["unit"]].iloc[0]
        cost = {r["seed"]: run_proxies(r) for _, r in runs.iterrows()}
        order = [s for s in table_row[f"{bench}.seeds"] if s in cost]  # Table 1's seeds, in its order
        acc = dict(zip(table_row[f"{bench}.seeds"], a["seeds"]))
        arms.append({**a, "points": [(cost[s]["out"], cost[s]["full"], acc[s]) for s in order]})
    return arms


def draw_figure2(sweep: Sweep) -> tuple[Figure | None, str | None]:
    """Figure 2 (module docstring), or None and why; gids `cost0:` (Out) / `cost1:` (Full) + `mean:`, `ci:`
    or `tag:` + unit, the base lines `figure2:base:<label>`."""
    names = sweep.benchmarks()
    bench = "ext240" if "ext240" in names else cap_benchmark(sweep)
    table1 = build_table1(sweep).frame if bench else pd.DataFrame()
    arms = _figure2_arms(sweep, bench, table1) if bench else []
    if not arms:
        return None, "no trained read-outs with a parameter count to plot"
    styles = arm_styles(sweep)
    bases = _bases(table1, bench)
    handles = [handle(styles[a["unit"]]) for a in arms] + _base_handles(bases)
    rows = -(-len(handles) // 3)  # the legend's, under the panels
    fig, axes = plt.subplots(1, 2, sharey=True, figsize=(10, 3.4 + 0.2 * rows), layout="constrained")
    ys, means = [], {0: [], 1: []}
    for a in arms:
        style = styles[a["unit"]]
        for ax, column in zip(axes, (0, 1)):
            xs = [p[column] for p in a["points"]]
            ax.scatter(xs, [p[2] for p in a["points"]], s=14, color=style.colour, marker=style.marker, alpha=0.45,
                       lw=0)
            lo, hi = _mean_with_ci(ax, float(np.mean(xs)), a, f"cost{column}", fmt=style.marker, ms=7,
                                   color=style.colour, mec="black", mew=0.6, capsize=3)
            means[column].append((a["unit"], float(np.mean(xs)), a["mean"], style.tag))
        ys += [p[2] for p in a["points"]] + [lo, hi]
    ys += _draw_bases(axes, bases, "figure2")
    axes[0].set_ylim(*limits(ys))
    for ax, label in zip(axes, ("Out TFLOPs: (2 gen + 6 bwd_out) P", "Full TFLOPs: [2 (pref + gen) + 6 bwd_full] P")):
        ax.set_xlabel(label)
        ax.xaxis.set_major_locator(MaxNLocator(4))  # long tick labels (0.0125, ...) must not run together
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"{BENCHMARK_NAMES.get(bench, bench)} accuracy (%)")
    # under the panels, not beside them: a side legend starts at the top and can run into the title
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 3), fontsize=8, frameon=False,
               title="arm: mean with 95 % CI (two-level bootstrap), tagged by its number; small points: seeds",
               title_fontsize=8)
    fig.suptitle("Figure 2: accuracy against training compute")
    for ax, column in zip(axes, (0, 1)):
        place_tags(ax, means[column], f"cost{column}")
    return fig, None


# ---- saving -----------------------------------------------------------------------------------------------

def _save(fig: Figure, out, name: str, formats) -> list[Path]:
    """`out/<name>.<format>` for each of `formats` (any file type matplotlib writes); closes the figure."""
    supported = fig.canvas.get_supported_filetypes()
    bad = [f for f in formats if f not in supported]
    if bad or not formats:
        plt.close(fig)
        raise ValueError(f"formats {list(formats)}: each must be one of {sorted(supported)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.{f}" for f in formats]
    for path in paths:
        fig.savefig(path, dpi=150)  # PDF is vector for the paper; PNG at 150 dpi keeps the HTML report small
    plt.close(fig)
    return paths


def figure1(sweep: Sweep, out, *, formats=FORMATS) -> tuple[list[Path], str | None]:
    fig, why = draw_figure1(sweep)
    return (_save(fig, out, "figure1", formats), None) if fig is not None else ([], why)


def figure2(sweep: Sweep, out, *, formats=FORMATS) -> tuple[list[Path], str | None]:
    fig, why = draw_figure2(sweep)
    return (_save(fig, out, "figure2", formats), None) if fig is not None else ([], why)


def training_curves(sweep: Sweep, out, *, formats=FORMATS) -> tuple[list[Path], str | None]:
    names = curve_names(sweep)
    if not names:
        return [], "no run has a steps ledger"
    overlays = [(draw_overlay(sweep, c), f"curves_overlay_{c}") for c, _ in CURVES] if len(names) > 1 else []
    overlays += [(draw_overlay(sweep, c), f"curves_health_{c}") for c, _ in HEALTH if recorded(sweep, c)]
    arms = [(draw_curves(sweep, u), name) for u, name in names.items()]
    return [p for fig, name in overlays + arms for p in _save(fig, out, name, formats)], None


FIGURES = {"figure1": figure1, "figure2": figure2, "curves": training_curves}

"""The paper's figures from the same tables (seed paper §5.1 Figure 1, §5.3 Figure 2), PNG and PDF.

- Figure 1: per arm, trained accuracy on the main benchmark (MATH-500, else the first) and its
  read-out cap hits, each seed a point and the mean a bar.
- Figure 2: external accuracy (Ext240, else the main benchmark) against the Out and Full TFLOP proxies,
  one point per run and the arm's mean marked.
- Training curves, one figure per arm: mean reward, active fraction, mean rollout length and rollouts
  at the horizon per step (each a 10-step rolling mean), one line per seed.
Each function returns the files it wrote, or the reason it wrote none.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display is needed (CI, notebooks under nbclient)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from rlvr_sweep.analysis.source import BENCHMARK_NAMES, Sweep  # noqa: E402
from rlvr_sweep.analysis.table1 import cap_benchmark, run_proxies, seed_values  # noqa: E402

WINDOW = 10  # steps in every curve's rolling mean: single steps (one question each) are too noisy to read


def _save(fig, out: Path, name: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    plt.close(fig)
    return paths


def figure1(sweep: Sweep, out) -> tuple[list[Path], str | None]:
    bench = cap_benchmark(sweep)
    units = [u for u in sweep.units() if bench and seed_values(sweep, u, bench, "correct")]
    if not units:
        return [], "no trained read-outs to plot"
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.1 * len(units) + 4), 4.5))
    x = np.arange(len(units))
    for ax, column, how, ylabel in ((axes[0], "correct", "mean", "accuracy (%)"),
                                    (axes[1], "capped", "sum", "read-out cap hits")):
        for i, u in enumerate(units):
            vals = list(seed_values(sweep, u, bench, column, how=how).values())
            ax.bar(i, np.mean(vals), color="C0", alpha=0.35, width=0.6)
            ax.scatter(np.full(len(vals), i) + np.linspace(-0.15, 0.15, len(vals)), vals, color="C0", s=18, zorder=3)
        ax.set_xticks(x, [sweep.label(u) for u in units], rotation=45, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
    name = BENCHMARK_NAMES.get(bench, bench)
    axes[0].set_title(f"{name}: trained accuracy (points: seeds, bars: mean)")
    axes[1].set_title(f"{name}: responses that hit the read-out cap")
    return _save(fig, Path(out), "figure1"), None


def figure2(sweep: Sweep, out) -> tuple[list[Path], str | None]:
    names = sweep.benchmarks()
    bench = "ext240" if "ext240" in names else cap_benchmark(sweep)
    units = [u for u in sweep.units() if bench and seed_values(sweep, u, bench, "correct")
             and sweep.runs_of(u)["params"].notna().all()]
    if not units:
        return [], "no trained read-outs with a parameter count to plot"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for i, u in enumerate(units):
        runs = sweep.runs_of(u)
        acc = seed_values(sweep, u, bench, "correct")
        cost = {r["seed"]: run_proxies(r) for _, r in runs.iterrows()}
        seeds = [s for s in acc if s in cost]
        for ax, key in ((axes[0], "out"), (axes[1], "full")):
            xs, ys = [cost[s][key] for s in seeds], [acc[s] for s in seeds]
            ax.scatter(xs, ys, color=f"C{i % 10}", s=14, alpha=0.5)
            ax.scatter(np.mean(xs), np.mean(ys), color=f"C{i % 10}", s=60, marker="D", label=sweep.label(u))
    for ax, title in ((axes[0], "Out TFLOPs (2 gen + 6 bwd_out) P"), (axes[1], "Full TFLOPs [2 (pref + gen) + 6 bwd_full] P")):
        ax.set_xlabel(title)
        ax.xaxis.set_major_locator(MaxNLocator(5))  # long tick labels (0.0125, ...) must not overlap
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"{BENCHMARK_NAMES.get(bench, bench)} accuracy (%)")
    axes[1].legend(fontsize=7, loc="best")
    fig.suptitle("External accuracy against training compute (points: seeds, diamonds: arm means)")
    return _save(fig, Path(out), "figure2"), None


def training_curves(sweep: Sweep, out) -> tuple[list[Path], str | None]:
    units = [u for u in sweep.units() if len(sweep.steps[sweep.steps["unit"] == u])]
    if not units:
        return [], "no run has a steps ledger"
    written, stems = [], {}
    for u in units:
        first = sweep.runs_of(u).iloc[0]
        stems.setdefault(f"curves_{first['profile']}_{first['arm']}_h{first['horizon']}", []).append(u)
    name = {u: stem if len(us) == 1 else f"{stem}_{u[:8]}" for stem, us in stems.items() for u in us}
    for u in units:
        steps = sweep.steps[sweep.steps["unit"] == u]
        fig, axes = plt.subplots(1, 4, figsize=(16, 3.4))
        for seed in sweep.runs_of(u)["seed"]:  # the paper's seed order
            s = steps[steps["seed"] == seed].sort_values("step")
            leaves = s["rewards"].map(len).replace(0, np.nan)
            curves = (s["mean_reward"], s["active"].astype(float), s["leaf_tokens"] / leaves, s["capped"])
            for ax, y in zip(axes, curves):
                ax.plot(s["step"] + 1, y.rolling(WINDOW, min_periods=1).mean(), label=f"seed {seed}", lw=1)
        for ax, title in zip(axes, ("mean reward", "active fraction", "mean rollout length (tokens)",
                                    "rollouts at the horizon")):
            ax.set_title(f"{title} ({WINDOW}-step mean)", fontsize=9)
            ax.set_xlabel("step")
        axes[0].legend(fontsize=7)
        fig.suptitle(f"Training curves: {sweep.label(u)}")
        written += _save(fig, Path(out), name[u])  # an arm with several rows: each row's group hash too
    return written, None


FIGURES = {"figure1": figure1, "figure2": figure2, "curves": training_curves}

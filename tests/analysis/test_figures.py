"""Figures 1, 2 and the training curves: no text runs into other text, what is drawn is the numbers, and
every arm keeps one colour, marker and tag.

Fast tests draw the hand-made sweep (`handmade.py`) with every item read out ten times over (40 items,
so the two-level intervals are narrow enough to leave the axis away from 0), and a 20-arm version of it
(paper arms 1-19 and an ablation); the slow test draws the shared smoke sweep.
"""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection
from matplotlib.text import Text

from rlvr_sweep.analysis import Sweep, load_sweep
from rlvr_sweep.analysis.curves import CURVES, WINDOW, curve_band, curve_names, draw_curves, draw_overlay, recorded
from rlvr_sweep.analysis.figures import draw_figure1, draw_figure2, figure1, figure2, training_curves
from rlvr_sweep.analysis.palette import MARKER_OF, PALETTE, arm_styles, grey
from rlvr_sweep.analysis.stats import bootstrap_ci
from rlvr_sweep.analysis.table1 import run_proxies
from tests.analysis import handmade
from tests.sweeps import TREE

COPIES = 10
ARMS = ("baseline", "stopped_tree", "ablate_skip")
PAPER_ORDER = ["1. baseline", "5. stopped_tree", "ablate_skip"]
OTHER_NUMBERS = [n for n in range(2, 20) if n != 5]  # the many-arm sweep's copies of stopped_tree: 17 arms
MIN_GREY_STEP = 0.25  # two arms with one marker differ at least this much in grey (0 black, 1 white)


def replicated(tables: dict) -> dict:
    g = tables["grades"]
    tables["grades"] = pd.concat([g.assign(item_id=g["item_id"] + f"_{c}", index=g["index"] + 4 * c)
                                  for c in range(COPIES)], ignore_index=True)
    return tables


@pytest.fixture(scope="module")
def sweep() -> Sweep:
    return Sweep.from_tables(replicated(handmade.tables()))


@pytest.fixture(scope="module")
def many() -> Sweep:
    return many_arms()


@pytest.fixture(scope="module")
def many_figures(many):
    """Figures 1 and 2 of the 20-arm sweep, drawn once for the tests that read them (closed figures keep
    their artists and canvas)."""
    return draw_figure1(many)[0], draw_figure2(many)[0]


def many_arms() -> Sweep:
    """Paper arms 1-19 and ablate_skip: 17 copies of the hand-made stopped tree, numbered 2-4 and 6-19,
    each with its own read-outs (item j of seed s right when (j + s) mod 5 <= i mod 4), parameter count
    (so its own FLOPs) and reward curve (shifted by 0.02 i), so no two means sit on one point."""
    tables = replicated(handmade.tables())
    copies = {}
    for name in ("runs", "steps", "rollouts", "pairs", "grades"):
        frame = tables[name][tables[name]["arm"] == "stopped_tree"]
        parts = []
        for i, number in enumerate(OTHER_NUMBERS):
            part = frame.assign(arm=f"arm{number:02d}", paper_arm=str(number), run_hash=frame["run_hash"] + f"_{i}")
            if name == "runs":
                part = part.assign(group_hash=f"smoke/arm{number:02d}/h512", params=1_000_000 * (1 + 0.15 * i))
            if name == "steps":
                part = part.assign(mean_reward=part["mean_reward"] + 0.02 * i)
            if name == "grades":
                right = (part["index"] + part["seed"]) % 5 <= i % 4
                part = part.assign(correct=part["correct"].where(part["phase"] == "base", right))
            parts.append(part)
        copies[name] = pd.concat([tables[name], *parts], ignore_index=True)
    return Sweep.from_tables(copies)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def drawn_texts(fig) -> list[tuple[str, object]]:
    """(text, window extent) of every non-empty Text the renderer draws: titles, axis and tick labels,
    legend entries. Tick labels of ticks outside the view are kept by matplotlib but never drawn."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    undrawn = set()
    for ax in fig.axes:
        for axis, view in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            lo, hi = sorted(view)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo - 1e-9 <= tick.get_loc() <= hi + 1e-9:
                    undrawn |= {id(tick.label1), id(tick.label2)}
    texts = {id(t): t for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip() and id(t) not in undrawn}
    return [(t.get_text(), t.get_window_extent(renderer)) for t in texts.values()]


def assert_text_clear(fig) -> None:
    """No two drawn texts overlap by more than a pixel, and none leaves the figure (clipped)."""
    texts = drawn_texts(fig)
    assert len(texts) > 5  # titles, labels and ticks were found: a check of nothing is no pass
    clash = [(a, b) for (a, ba), (b, bb) in itertools.combinations(texts, 2)
             if min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > 1 and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > 1]
    assert not clash, f"overlapping texts: {clash}"
    w, h = fig.bbox.width, fig.bbox.height
    outside = [t for t, b in texts if b.x0 < -1 or b.y0 < -1 or b.x1 > w + 1 or b.y1 > h + 1]
    assert not outside, f"texts outside the figure: {outside}"


def by_gid(fig, gid: str):
    found = fig.findobj(lambda a: a.get_gid() == gid)
    assert len(found) == 1, f"{gid}: {len(found)} artists"
    return found[0]


def trained_grid(sweep: Sweep, arm: str, column: str = "correct") -> np.ndarray:
    """(seeds, items) 0/1 of one arm from the grades table, seeds in the paper's order (42, 101, 7) and items
    in the benchmark's (the bootstrap's draws index rows and columns, so the order is part of the answer)."""
    g = sweep.grades[(sweep.grades["arm"] == arm) & (sweep.grades["phase"] == "trained")]
    table = g.pivot_table(index="index", columns="seed", values=column, aggfunc="first").sort_index()
    return table[[s for s in (42, 101, 7) if s in table.columns]].to_numpy(dtype=float).T


def unit_of(sweep: Sweep, arm: str) -> str:
    return sweep.runs.loc[sweep.runs["arm"] == arm, "unit"].iloc[0]


def assert_every_figure_clear(sweep):
    """Figures 1 and 2 and every arm's curves drawn, none with overlapping text."""
    for draw in (draw_figure1, draw_figure2):
        fig, why = draw(sweep)
        assert why is None
        assert_text_clear(fig)
    for unit in curve_names(sweep):
        assert_text_clear(draw_curves(sweep, unit))
    for column, _ in CURVES:
        assert_text_clear(draw_overlay(sweep, column))


def test_figure_texts_do_not_overlap(sweep):
    assert_every_figure_clear(sweep)


def test_many_arms_keep_their_labels_apart(many, many_figures):
    """Twenty arm rows: upright arm labels, tags and a 21-entry legend, no text running into another."""
    fig1, fig2 = many_figures
    assert len(fig1.axes[1].get_xticklabels()) == 20
    assert_text_clear(fig1)
    assert_text_clear(fig2)
    for column, _ in CURVES:
        assert_text_clear(draw_overlay(many, column))


def test_the_overlap_check_sees_overlapping_titles():
    fig, axes = plt.subplots(1, 2, figsize=(4, 2))
    axes[0].set_title("a title far too long for its half of the figure")
    axes[1].set_title("the other")
    with pytest.raises(AssertionError, match="overlapping texts"):
        assert_text_clear(fig)


def test_figure1_arms_in_paper_order_with_base_line_and_seeds(sweep):
    fig, _ = draw_figure1(sweep)
    top, bottom = fig.axes[:2]
    assert [t.get_text().replace("\n", " ") for t in bottom.get_xticklabels()] == PAPER_ORDER
    # the base model: 1 of the 4 items right (BASE_CORRECT), in every run
    base = sweep.grades[sweep.grades["phase"] == "base"]
    expected = base.groupby("run_hash")["correct"].mean().mean() * 100
    assert expected == 25.0
    assert list(by_gid(fig, "accuracy:base:base model (0 updates)").get_ydata()) == [expected, expected]
    # seeds: A 2/4, 3/4, 1/4 right; B 3/4, 4/4, 2/4; C (seed 101 only) 2/4
    seeds = {arm: sorted(by_gid(fig, f"accuracy:seeds:{unit_of(sweep, arm)}").get_offsets()[:, 1])
             for arm in ARMS}
    assert seeds == {"baseline": [25.0, 50.0, 75.0], "stopped_tree": [50.0, 75.0, 100.0], "ablate_skip": [50.0]}
    means = {arm: by_gid(fig, f"accuracy:mean:{unit_of(sweep, arm)}").get_ydata()[0] for arm in ARMS}
    assert means == pytest.approx({"baseline": 50.0, "stopped_tree": 75.0, "ablate_skip": 50.0})
    # cap hits: A's seeds 42 and 7 each cap one item (x 10 copies), the others never
    caps = sorted(by_gid(fig, f"caps:seeds:{unit_of(sweep, 'baseline')}").get_offsets()[:, 1])
    assert caps == [0.0, 10.0, 10.0]


def test_figure1_error_bars_are_the_two_level_intervals(sweep):
    fig, _ = draw_figure1(sweep)
    for arm in ("baseline", "stopped_tree"):
        _, lo, hi = bootstrap_ci(trained_grid(sweep, arm), "two_level", 4000, 0)
        segment = by_gid(fig, f"accuracy:ci:{unit_of(sweep, arm)}")
        assert isinstance(segment, LineCollection)
        (_, y0), (_, y1) = segment.get_segments()[0]
        assert (y0, y1) == pytest.approx((100 * lo, 100 * hi))
        assert 100 * lo < 100 * hi  # an interval, not a point
    _, lo, hi = bootstrap_ci(trained_grid(sweep, "baseline", "capped"), "two_level", 4000, 0)
    (_, y0), (_, y1) = by_gid(fig, f"caps:ci:{unit_of(sweep, 'baseline')}").get_segments()[0]
    assert (y0, y1) == pytest.approx((40 * lo, 40 * hi))  # items per seed: 40
    # one seed has no seed level to resample: no error bar, as Table 2B leaves its two-level CI blank
    assert not fig.findobj(lambda a: a.get_gid() == f"accuracy:ci:{unit_of(sweep, 'ablate_skip')}")


def test_figure1_y_axis_shows_the_differences(sweep):
    fig, _ = draw_figure1(sweep)
    top = fig.axes[0]
    lo, hi = top.get_ylim()
    lows = [by_gid(fig, f"accuracy:ci:{unit_of(sweep, a)}").get_segments()[0][0][1]
            for a in ("baseline", "stopped_tree")]
    assert 0 < lo < min(25.0, *lows)  # not from 0, but the base line and every interval inside
    assert hi > 100.0  # seed 101 of stopped_tree has every item right


def test_hand_made_arms_take_their_numbers_colours(sweep):
    """Paper arm N takes colour N - 1 and tag N; the ablation takes the first colour left and tag A."""
    styles = {sweep.runs_of(u).iloc[0]["arm"]: style for u, style in arm_styles(sweep).items()}
    assert {a: (s.tag, s.colour, s.legend) for a, s in styles.items()} == {
        "baseline": ("1", PALETTE[0], "1. baseline"), "stopped_tree": ("5", PALETTE[4], "5. stopped_tree"),
        "ablate_skip": ("A", PALETTE[1], "A. ablate_skip")}
    fig, _ = draw_figure1(sweep)
    for arm, style in styles.items():
        mean = by_gid(fig, f"accuracy:mean:{unit_of(sweep, arm)}")
        assert (mean.get_color(), mean.get_marker()) == (style.colour, style.marker)
        assert by_gid(fig, f"accuracy:tag:{unit_of(sweep, arm)}").get_text() == style.tag
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[0].startswith("mean, 95 % CI") and "base model (0 updates)" in legend


def test_the_palette_survives_greyscale():
    """24 colours, all different; any two that share a marker differ by >= 0.25 in grey, so a greyscale
    print tells every pair apart by grey or by shape."""
    assert len(PALETTE) == len(set(PALETTE)) == 24
    same_marker = [(a, b) for a, b in itertools.combinations(PALETTE, 2) if MARKER_OF[a] == MARKER_OF[b]]
    assert len(same_marker) == 12  # 12 markers, two colours each
    assert min(abs(grey(a) - grey(b)) for a, b in same_marker) >= MIN_GREY_STEP


def mean_markers(fig, prefix: str, units) -> dict:
    return {u: by_gid(fig, f"{prefix}:mean:{u}") for u in units}


def assert_one_style_per_arm(markers: dict) -> None:
    """One colour per arm, and in greyscale each pair of arms differs in marker or by MIN_GREY_STEP."""
    styles = {u: (m.get_color(), m.get_marker()) for u, m in markers.items()}
    assert len({c for c, _ in styles.values()}) == len(styles)
    for (c1, m1), (c2, m2) in itertools.combinations(styles.values(), 2):
        assert m1 != m2 or abs(grey(c1) - grey(c2)) >= MIN_GREY_STEP


def test_twenty_arms_one_colour_marker_and_tag_each(many, many_figures):
    units = many.units()
    styles = arm_styles(many)
    assert len(units) == 20
    assert [styles[u].tag for u in units] == [str(n) for n in range(1, 20)] + ["A"]  # paper order
    fig1, fig2 = many_figures
    assert_one_style_per_arm(mean_markers(fig1, "accuracy", units))
    tags = {u: by_gid(fig1, f"accuracy:tag:{u}").get_text() for u in units}  # every arm's tag fits
    assert tags == {u: styles[u].tag for u in units}
    for panel in ("cost0", "cost1"):
        markers = mean_markers(fig2, panel, units)
        assert_one_style_per_arm(markers)
        assert {u: m.get_color() for u, m in markers.items()} == \
            {u: m.get_color() for u, m in mean_markers(fig1, "accuracy", units).items()}  # as in Figure 1
        placed = [u for u in units if fig2.findobj(lambda a, gid=f"{panel}:tag:{u}": a.get_gid() == gid)]
        assert len(placed) >= 15  # tags where they fit (20 here); the legend names every arm
    legend = [t.get_text() for t in fig2.legends[0].get_texts()]
    assert legend == [styles[u].legend for u in units] + ["base model (0 updates)"]
    assert legend[0] == "1. baseline" and legend[19] == "A. ablate_skip"


def test_overlay_one_line_per_arm_on_one_axis(many):
    units = many.units()
    styles = arm_styles(many)
    for column, _ in CURVES:
        fig = draw_overlay(many, column)
        (ax,) = fig.axes  # one shared axis
        lines = {u: by_gid(fig, f"overlay:mean:{u}") for u in units}
        assert all(line.axes is ax for line in lines.values())
        assert {u: (line.get_color(), line.get_marker()) for u, line in lines.items()} == \
            {u: (styles[u].colour, styles[u].marker) for u in units}  # Figures 1 and 2's
        lo, hi = ax.get_ylim()
        ys = np.concatenate([line.get_ydata() for line in lines.values()])
        assert lo <= ys.min() and ys.max() <= hi  # every arm inside the one y-range
        assert all(by_gid(fig, f"overlay:band:{u}").axes is ax for u in units)
        assert [t.get_text() for t in fig.legends[0].get_texts()] == [styles[u].legend for u in units]
    fig = draw_overlay(many, "mean_reward")
    first, last = (by_gid(fig, f"overlay:mean:{u}").get_ydata() for u in (units[4], units[-2]))
    assert last - first == pytest.approx(np.full(2, 0.02 * 16))  # arm 19 is copy 16 of arm 5, 0.32 higher
    assert by_gid(draw_curves(many, units[4]), "mean:mean_reward").get_color() == styles[units[4]].colour


def test_figure2_points_are_each_runs_cost_and_accuracy(sweep):
    fig, _ = draw_figure2(sweep)
    unit = unit_of(sweep, "stopped_tree")
    runs = sweep.runs_of(unit)
    out = np.mean([run_proxies(r)["out"] for _, r in runs.iterrows()])
    mean = by_gid(fig, f"cost0:mean:{unit}")
    assert mean.get_xdata()[0] == pytest.approx(out) and mean.get_ydata()[0] == pytest.approx(75.0)
    _, lo, hi = bootstrap_ci(trained_grid(sweep, "stopped_tree"), "two_level", 4000, 0)
    (_, y0), (_, y1) = by_gid(fig, f"cost1:ci:{unit}").get_segments()[0]
    assert (y0, y1) == pytest.approx((100 * lo, 100 * hi))
    base = fig.findobj(lambda a: a.get_gid() == "figure2:base:base model (0 updates)")
    assert [line.get_ydata()[0] for line in base] == [25.0, 25.0]  # on both panels


def test_curve_band_by_hand():
    """12 steps, two seeds: seed 42's reward is step/10, seed 101's always 1. At the last step the
    10-step mean of seed 42 covers steps 2..11: 0.65."""
    steps = pd.DataFrame({"seed": [42] * 12 + [101] * 12, "step": list(range(12)) * 2,
                          "mean_reward": [i / 10 for i in range(12)] + [1.0] * 12})
    band = curve_band(steps, [42, 101], "mean_reward")
    assert WINDOW == 10 and list(band.index) == list(range(1, 13))
    last = band.loc[12]
    assert (last["lo"], last["hi"], last["mean"]) == pytest.approx((0.65, 1.0, 0.825))
    assert band.loc[1, "lo"] == 0.0  # the first step is its own mean (a window not yet full)


def test_curves_draw_seed_mean_and_min_max_band(sweep):
    unit = unit_of(sweep, "baseline")
    fig = draw_curves(sweep, unit)
    steps = sweep.steps[sweep.steps["unit"] == unit]
    # step 2 (1-based): each seed's mean over its two steps, A's rewards 1/4 and 0 / 2/4 and 1 / 2/4 and 0
    rolled = steps.sort_values("step").groupby("seed")["mean_reward"].mean()
    assert sorted(rolled) == [0.125, 0.25, 0.75]
    assert by_gid(fig, "mean:mean_reward").get_ydata()[1] == pytest.approx(rolled.mean())
    vertices = np.concatenate([p.vertices for p in by_gid(fig, "band:mean_reward").get_paths()])
    at_step_2 = vertices[np.isclose(vertices[:, 0], 2.0), 1]
    assert np.isclose(at_step_2, rolled.max()).any() and np.isclose(at_step_2, rolled.min()).any()
    assert f"{WINDOW}-step rolling means, 3 seeds" in fig.get_suptitle()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["mean over seeds", "min to max over seeds"]


def test_formats_and_file_names(sweep, tmp_path):
    paths, why = figure1(sweep, tmp_path, formats=("png",))
    assert why is None and [p.name for p in paths] == ["figure1.png"]
    paths, _ = figure2(sweep, tmp_path)
    assert [p.name for p in paths] == ["figure2.png", "figure2.pdf"]
    paths, _ = training_curves(sweep, tmp_path, formats=("png",))
    assert [p.name for p in paths] == ["curves_overlay_mean_reward.png", "curves_overlay_active.png",
                                       "curves_overlay_length.png", "curves_overlay_capped.png",
                                       "curves_smoke_baseline_h512.png", "curves_smoke_stopped_tree_h512.png",
                                       "curves_smoke_ablate_skip_h512.png"]
    assert all(p.stat().st_size > 10_000 for p in paths)
    with pytest.raises(ValueError, match="must be one of"):
        figure1(sweep, tmp_path, formats=("bmpx",))


def test_a_health_signal_is_drawn_for_the_arms_that_recorded_it(tmp_path):
    """The hand-made sweep's steps predate the health signals; give one arm an entropy on some steps and another
    a clip fraction that is NaN throughout: only the entropy overlay is drawn, holding that one arm, its line the
    mean over seeds of each seed's rolling mean over the steps that have a value."""
    tables = replicated(handmade.tables())
    steps = tables["steps"]
    base = steps["arm"] == "baseline"
    steps["entropy"] = np.where(base & (steps["step"] == 0), 0.5, np.nan)
    steps.loc[base & (steps["seed"] == 42) & (steps["step"] == 0), "entropy"] = 1.5
    steps["clip_low"] = np.nan
    sweep = Sweep.from_tables(tables)
    unit = unit_of(sweep, "baseline")
    assert recorded(sweep, "entropy") == [unit] and recorded(sweep, "clip_low") == []
    assert recorded(sweep, "mean_reward") == list(curve_names(sweep))  # a training curve: every arm
    fig = draw_overlay(sweep, "entropy")
    y = by_gid(fig, f"overlay:mean:{unit}").get_ydata()
    assert y[0] == pytest.approx((1.5 + 0.5 + 0.5) / 3)  # step 1: seeds 42, 101, 7
    paths, _ = training_curves(sweep, tmp_path, formats=("png",))
    health = [p.name for p in paths if p.name.startswith("curves_health_")]
    assert health == ["curves_health_entropy.png"]


def test_a_sweep_without_read_outs_says_why(sweep, tmp_path):
    empty = Sweep.from_tables({**handmade.tables(), "grades": pd.DataFrame(), "steps": pd.DataFrame()})
    assert figure1(empty, tmp_path) == ([], "no trained read-outs to plot")
    assert figure2(empty, tmp_path) == ([], "no trained read-outs with a parameter count to plot")
    assert training_curves(empty, tmp_path) == ([], "no run has a steps ledger")
    assert not list(tmp_path.iterdir())


def test_figures_of_the_smoke_sweep(smoke_sweep):
    """The real sweep: stopped_tree (paper arm 12 at h1024) before the unnumbered baseline, the base line at
    the base read-out's accuracy, no overlapping text."""
    s = load_sweep(smoke_sweep)
    fig, why = draw_figure1(s)
    assert why is None
    assert [t.get_text().replace("\n", " ") for t in fig.axes[1].get_xticklabels()] == \
        [TREE, "baseline h1024"]
    base = s.grades[(s.grades["phase"] == "base") & (s.grades["benchmark"] == "toy_heldout")]
    expected = base.groupby("run_hash")["correct"].mean().mean() * 100
    assert by_gid(fig, f"accuracy:base:{s.base_labels[s.runs['base_hash'].iloc[0]]}").get_ydata()[0] == \
        pytest.approx(expected)
    assert_text_clear(fig)
    assert_every_figure_clear(s)

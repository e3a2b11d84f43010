"""Table builders on the hand-made sweep of `handmade.py`: every expected number worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rlvr_sweep.analysis import Sweep, bootstrap_ci, build_tables, item_matrix, parse_contrasts, proxies, save_tables
from rlvr_sweep.analysis.contrasts import load_contrasts
from rlvr_sweep.analysis.report import read_saved
from tests.analysis import handmade


@pytest.fixture(scope="module")
def sweep() -> Sweep:
    return handmade.sweep()


CONTRASTS = parse_contrasts([
    {"row": 1, "title": "tree vs flat", "a": "5", "b": "1", "benchmark": "toy_heldout", "metric": "correct"},
    {"row": 2, "title": "cap hits", "a": "stopped_tree", "b": "baseline", "benchmark": "toy_heldout", "metric": "capped"},
    {"row": 3, "title": "null interaction", "a": "5", "b": "1", "c": "5", "d": "1", "benchmark": "toy_heldout"},
    {"row": 4, "title": "single seed", "a": "ablate_skip", "b": "1", "benchmark": "toy_heldout", "seeds": [101]},
    {"row": 5, "title": "absent arm", "a": "13", "b": "12", "benchmark": "toy_heldout"},
    {"row": 6, "title": "absent benchmark", "a": "5", "b": "1", "benchmark": "math500"},
])


@pytest.fixture(scope="module")
def tables(sweep):
    return build_tables(sweep, CONTRASTS, n_resamples=400, seed=0)


def row_of(frame: pd.DataFrame, label: str) -> pd.Series:
    return frame.set_index("label").loc[label]


def test_units_labels_and_order(sweep):
    assert sweep.units() == ["smoke/baseline/h512", "smoke/stopped_tree/h512", "smoke/ablate_skip/h512"]
    assert [sweep.label(u) for u in sweep.units()] == ["1. baseline", "5. stopped_tree", "ablate_skip"]
    assert list(sweep.runs_of("smoke/baseline/h512")["seed"]) == [42, 101, 7]  # the paper's order
    assert sweep.resolve("5") == sweep.resolve("stopped_tree") == sweep.resolve("stopped_tree@h512")
    assert sweep.resolve("12") is None and sweep.resolve("stopped_tree@h1024") is None


def test_table1(tables):
    t = tables["table1"].frame
    a, b = row_of(t, "1. baseline"), row_of(t, "5. stopped_tree")
    # A: seeds 42 / 101 / 7 answer 2 / 3 / 1 of 4 items: 50 / 75 / 25 %, mean 50, sample SD 25
    assert a["toy_heldout.per_seed"] == [50.0, 75.0, 25.0] and a["toy_heldout.seeds"] == [42, 101, 7]
    assert (a["toy_heldout.mean"], a["toy_heldout.sd"]) == (50.0, 25.0)
    assert (b["toy_heldout.mean"], b["toy_heldout.sd"]) == (75.0, 25.0)
    # A hits the read-out cap on item 2 for seeds 42 and 7, wrongly both times
    assert a["allcap.per_seed"] == [1, 0, 1] and a["allcap.mean"] == pytest.approx(2 / 3)
    assert a["inctrunc.mean"] == pytest.approx(2 / 3) and b["allcap.mean"] == 0
    # tokens: seed means of run totals; A's seed 42 generates (3+8+8+5 + 2) + (2*4 + 2) = 36 tokens
    gen = [(3 + 8 + 8 + 5 + 2) + (8 + 2), (4 + 4 + 8 + 8 + 2) + (8 + 2), (8 + 3 + 6 + 3 + 2) + (32 + 2)]
    assert a["tok.gen"] == pytest.approx(np.mean(gen))
    # Out TFLOPs from the run's own P = 1e6: every step of Arm 1 backpropagates its leaves
    bwd = np.mean([24 + 8, 24 + 8, 20 + 32])
    assert a["tflops.out"] == pytest.approx((2 * np.mean(gen) + 6 * bwd) * 1e6 / 1e12)
    base = row_of(t, "base model (0 updates)")
    assert base["toy_heldout.mean"] == 25.0 and base["toy_heldout.n_correct"] == 1 and base["tok.gen"] == 0
    shown = tables["table1"].display.set_index("Arm")
    assert shown.loc["1. baseline", "toy_heldout"] == "50.00 ± 25.00 (50.0 / 75.0 / 25.0)"
    assert shown.loc["1. baseline", "AllCap (toy_heldout) / IncTrunc"] == "0.7 (1 / 0 / 1) / 0.7"


def test_table2a_census(tables):
    t = tables["table2a"].frame
    a, b = row_of(t, "1. baseline"), row_of(t, "5. stopped_tree")
    # A: active steps are the three step 0s; only seed 101's (R=0 leaves 8, 8) is cap-associated;
    # R = 0 leaves of active steps 8,8,5 | 8,8 | 8,6: 5 of 7 at the cap of 8
    assert (a["active_steps"], a["cap_assoc_active"], a["capr0_leaves"], a["r0_leaves"]) == (3, 1, 5, 7)
    assert pd.isna(a["divergent"])  # flat: no pair census
    # B: all six steps active; only seed 7's tree step (R=0 leaves 8, 8) is cap-associated;
    # R = 0 leaves: warmups 3 x (8,4,4) -> 3 of 9 capped, trees 8,3,3 | 7 | 8,8 -> 3 of 6: 6 of 15
    assert (b["active_steps"], b["cap_assoc_active"], b["capr0_leaves"], b["r0_leaves"]) == (6, 1, 6, 15)
    # divergent tree pairs: seed 42 (8:R0, 5:R1) capped loser, seed 101 (6:R1, 7:R0) both below the cap
    assert (b["divergent"], b["shared"], b["capr0_div"], b["noncapr0_div"], b["both_lt_cap"]) == (2, 2, 1, 1, 1)
    assert b["both_lt_cap_per_run"] == pytest.approx(1 / 3)


def test_table2b_contrasts(tables, sweep):
    t = tables["table2b"].frame.set_index("row")
    # B - A per seed: items (0,1,0,0), (0,0,1,0), (0,1,0,0): +25 pp each
    assert t.loc[1, "per_seed"] == [25.0, 25.0, 25.0] and t.loc[1, "mean"] == 25.0
    assert t.loc[1, "seeds"] == [42, 101, 7] and t.loc[1, "n_items"] == 4
    seeds, items, ya = item_matrix(sweep, "smoke/baseline/h512", "toy_heldout")
    _, _, yb = item_matrix(sweep, "smoke/stopped_tree/h512", "toy_heldout")
    for method in ("two_level", "question", "flat"):
        _, lo, hi = bootstrap_ci(yb - ya, method, 400, 0)
        assert (t.loc[1, f"{method}_lo"], t.loc[1, f"{method}_hi"]) == pytest.approx((100 * lo, 100 * hi))
    # cap hits: B never, A on seeds 42 and 7: -25 / 0 / -25 pp
    assert t.loc[2, "per_seed"] == [-25.0, 0.0, -25.0] and t.loc[2, "mean"] == pytest.approx(-50 / 3)
    # (B - A) - (B - A) = 0 everywhere, with degenerate intervals
    assert t.loc[3, "per_seed"] == [0.0, 0.0, 0.0] and t.loc[3, "two_level_lo"] == t.loc[3, "two_level_hi"] == 0.0
    # one seed: no two-level interval; ablate_skip (1,1,0,0) vs A's seed 101 (1,1,0,1): one loss
    assert t.loc[4, "seeds"] == [101] and np.isnan(t.loc[4, "two_level_lo"])
    assert (t.loc[4, "mean"], t.loc[4, "gains"], t.loc[4, "losses"]) == (-25.0, 0, 1)
    assert "(0 gains / 1 losses)" in tables["table2b"].display.set_index("Row").loc[4, "Two-level 95% CI"]
    # missing arms and benchmarks are absent rows, said in the notes
    assert 5 not in t.index and 6 not in t.index
    notes = " ".join(tables["table2b"].notes)
    assert "row 5" in notes and "arm 13, 12 not in the sweep" in notes and "no math500 read-out" in notes


def test_table3_ablation_row(tables):
    r = row_of(tables["table3"].frame, "ablate_skip")
    assert (r["seed"], r["steps"], r["active"], r["all_ones"]) == (101, 2, 1, 1)
    assert (r["toy_heldout.correct"], r["toy_heldout.n"], r["toy_heldout.acc"]) == (2, 4, 50.0)
    assert (r["allcap"], r["inctrunc"]) == (0, 0)
    assert r["tflops.out"] == pytest.approx(proxies(dict(gen=(15 + 2) + (8 + 2), pref=40, pad_pref=46,
                                                         untrim_gen=68, bwd_out=15, bwd_full=35), 1e6)["out"])


def test_table4_cross_seed_votes(tables):
    t = tables["table4"].frame.set_index("label")
    a = t.loc["1. baseline"]
    # items (seed 42 / 101 / 7 candidates):
    #  i0 5,5,6: majority 5 (correct)               -> 1 under every rule
    #  i1 3 (L10), 4 (L5, correct), 2 (L1): 1-1-1   -> rand 1/3, maxlen picks L10 (0), mdl the eligible L5 (1)
    #  i2 capped-unboxed, 8 (L1), capped-unboxed    -> empties never vote; mdl has no eligible: fallback L1 (0)
    #  i3 1,1,1 (correct)                           -> 1
    assert (a["k"], a["n_items"], a["cap"], a["min_len"]) == (3, 4, 16, 2)  # 15 paper tokens x 0.125 -> 2
    assert a["mean1"] == 50.0 and a["rand"] == pytest.approx(100 * (1 + 1 / 3 + 0 + 1) / 4)
    assert (a["maxlen"], a["mdl"], a["fb"], a["mdl_minus_maxlen"], a["oracle"]) == (50.0, 75.0, 1, 25.0, 75.0)
    assert a["test_tokens"] == (4 + 6 + 3) + (10 + 5 + 1) + (16 + 1 + 16) + (3 + 3 + 2)
    assert "ablate_skip" not in t.index  # one seed: no cross-seed vote


def test_prefix_audit(tables):
    r = row_of(tables["audit"].frame, "5. stopped_tree")
    # B's rollouts longer than the cut of 4 tokens: one per warmup step (x3) and six in the tree steps
    assert (r["cut"], r["rollouts"], r["long"]) == (4, 24, 9)
    # two long rollouts end with R = 1: seed 42's prefix holds no box yet (fails at the cut), seed 101's
    # prefix "a \boxed{4}" passes the gate (2 characters) and the grader; first boxes at tokens 4 and 1
    assert (r["long_r1"], r["fail_at_cut"], r["no_box_at_cut"], r["box_wrong_at_cut"], r["pass_at_cut"]) == (2, 1, 1, 0, 1)
    assert r["median_first_box"] == 2.5
    assert "1. baseline" not in set(tables["audit"].frame["label"])  # its horizon is the cut: not audited


def test_missing_tables_say_why():
    empty = Sweep.from_tables({"runs": pd.DataFrame(columns=["arm", "horizon", "seed", "run_hash"])})
    built = build_tables(empty, CONTRASTS, n_resamples=10)
    assert all(t.why for t in built.values())
    assert "Not built: the sweep has no finished runs" in built["table1"].markdown()
    flat_only = handmade.tables()
    for name in ("steps", "rollouts", "pairs", "grades"):
        flat_only[name] = flat_only[name][flat_only[name]["arm"] == "baseline"]
    flat_only["runs"] = flat_only["runs"][flat_only["runs"]["arm"] == "baseline"]
    built = build_tables(Sweep.from_tables(flat_only), CONTRASTS, n_resamples=10)
    assert "no ablation runs" in built["table3"].why and "audit cut" in built["audit"].why
    assert built["table2b"].why and "row 1" in " ".join(built["table2b"].notes)


def test_runs_of_one_arm_with_other_settings_are_another_row_never_the_newest(tmp_path):
    """Seen: analysis kept only the newest run per (profile, arm, horizon, seed), so a 50-item ad-hoc
    run silently replaced a sweep's seed. Want: runs that differ in more than the seed are another row,
    labelled by what differs, with a note; nothing is replaced."""
    t = handmade.tables()
    folder = tmp_path / "adhoc"
    folder.mkdir()
    (folder / "config.yaml").write_text("eval:\n  limit: 50\ntrain:\n  steps: 10\n")
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "config.yaml").write_text("eval:\n  limit: null\ntrain:\n  steps: 100\n")
    t["runs"].loc[t["runs"]["arm"] == "ablate_skip", "run_dir"] = str(tmp_path / "sweep")
    extra = t["runs"][t["runs"]["arm"] == "ablate_skip"].assign(run_hash="other", finished_at=1e9,
                                                                group_hash="adhoc", run_dir=str(folder))
    t["runs"] = pd.concat([t["runs"], extra], ignore_index=True)
    for name in ("steps", "rollouts", "pairs", "grades"):
        more = t[name][t[name]["arm"] == "ablate_skip"].assign(run_hash="other")
        t[name] = pd.concat([t[name], more], ignore_index=True)
    s = Sweep.from_tables(t)
    assert list(s.runs_of("smoke/ablate_skip/h512")["run_hash"]) == ["abla0101"]  # kept, not replaced
    assert list(s.runs_of("adhoc")["run_hash"]) == ["other"]
    assert s.label("adhoc") == "ablate_skip [eval.limit=50, train.steps=10]"
    assert s.label("smoke/ablate_skip/h512") == "ablate_skip"
    assert any("'ablate_skip' is 2 rows" in n for n in s.notes)
    assert s.resolve("ablate_skip") is None and s.candidates("ablate_skip") == ["smoke/ablate_skip/h512", "adhoc"]


def test_save_tables_writes_parquet_and_markdown(tables, tmp_path):
    written = save_tables(tables, tmp_path, notes=["hand-made"])
    assert (tmp_path / "tables.md").read_text().startswith("- hand-made")
    assert {p.name for p in written} >= {"table1.parquet", "table2a.parquet", "table2b.parquet", "tables.md"}
    t1 = read_saved(tmp_path, "table1")
    assert list(t1["toy_heldout.per_seed"].iloc[1]) == [50.0, 75.0, 25.0]


def test_shipped_contrast_lists():
    paper = load_contrasts("paper")
    assert [c.row for c in paper] == list(range(1, 27))
    assert paper[0].arms == ("6", "5") and paper[0].benchmark == "math500"
    assert paper[11].arms == ("ablate_selective", "10") and paper[11].seeds == (101,)
    assert [c.metric for c in paper[12:15]] == ["capped"] * 3
    assert paper[23].arms == ("13", "12", "6", "5") and [c.benchmark for c in paper[23:]] == ["math500", "math_val210", "ext240"]
    assert {c.benchmark for c in load_contrasts("smoke")} == {"toy_heldout"}


def test_contrast_files_are_checked(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("- {row: 1, a: '5', b: '1', benchmark: toy_heldout, metric: capped}\n")
    assert load_contrasts(str(path))[0].metric == "capped"
    for bad, match in (("- {a: '5', b: '1', benchmark: x, metric: speed}", "metric"),
                       ("- {a: '5', b: '1', c: '2', benchmark: x}", "both c and d"),
                       ("- {a: '5', benchmark: x}", "missing"), ("- {a: '5', b: '1', benchmark: x, colour: 1}", "unknown")):
        path.write_text(bad)
        with pytest.raises(ValueError, match=match):
            load_contrasts(str(path))
    with pytest.raises(FileNotFoundError, match="paper"):
        load_contrasts("no_such_list")

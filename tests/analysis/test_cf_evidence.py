"""The rest of the paper's evidence on hand-made rows: Pool950 contrasts and the cf contrast set, Table 4's
cross-seed vs sampled MDL-Maj@3, Table 5B's rescues of wrong anchors and TieGated vs Hybrid."""

from __future__ import annotations

import pandas as pd
import pytest

from rlvr_sweep.analysis import Sweep, build_tables, load_contrasts
from rlvr_sweep.analysis.contrasts import Contrast, build_table2b
from rlvr_sweep.analysis.source import grade_rows
from tests.analysis import testtime_handmade as hm

# per (arm, seed): correctness of math500 items m0, m1, val210 item v0, ext240 item e0
OUTCOMES = {("15", 42): (1, 1, 1, 0), ("15", 101): (1, 0, 1, 1), ("12", 42): (1, 0, 0, 0), ("12", 101): (0, 0, 1, 1)}


def pool_sweep() -> Sweep:
    grades, runs = [], []
    for (arm, seed), ok in OUTCOMES.items():
        keys = {"arm": f"arm{arm}", "horizon": 1024, "seed": seed, "run_hash": f"{arm}{seed}", "paper_arm": arm}
        runs.append({**keys, "group_hash": f"g{arm}", "profile": "paper", "run_dir": "", "finished_at": 0.0})
        for (bench, item, index), correct in zip([("math500", "m0", 0), ("math500", "m1", 1), ("math_val210", "v0", 0),
                                                  ("ext240", "e0", 0)], ok):
            grades.append({**keys, "phase": "trained", "benchmark": bench, "source": bench, "item_id": item,
                           "index": index, "length": 9, "capped": False, "capped_unboxed": False, "extracted": "1",
                           "correct": bool(correct)})
    return Sweep.from_tables({"runs": pd.DataFrame(runs), "grades": pd.DataFrame(grades), "steps": pd.DataFrame(),
                              "rollouts": pd.DataFrame(), "pairs": pd.DataFrame()})


def test_pool950_is_the_three_benchmarks_together():
    s = pool_sweep()
    pool = grade_rows(s, s.resolve("15"), "pool950")
    assert sorted(pool["item_id"].unique()) == ["ext240/e0", "math500/m0", "math500/m1", "math_val210/v0"]
    assert len(pool) == 8  # 4 items x 2 seeds


def test_a_pool950_contrast_by_hand():
    """Arm 15 - Arm 12 on the pool: seed 42 (3 - 1) / 4 = +50 pp, seed 101 (3 - 2) / 4 = +25 pp; mean +37.5."""
    t = build_table2b(pool_sweep(), [Contrast(28, "15 vs 12", ("15", "12"), "pool950")], n_resamples=200, seed=0)
    (row,) = t.frame.to_dict("records")
    assert row["per_seed"] == pytest.approx([50.0, 25.0]) and row["mean"] == pytest.approx(37.5)
    assert row["n_items"] == 4 and row["seeds"] == [42, 101]


def test_the_cf_contrast_set_holds_the_papers_rows():
    rows = {c.row: c for c in load_contrasts("cf")}
    assert (rows[27].arms, rows[27].benchmark) == (("15", "12"), "math500")
    assert (rows[28].arms, rows[28].benchmark) == (("15", "12"), "pool950")
    assert (rows[29].arms, rows[29].benchmark) == (("16", "15"), "pool950")
    assert [rows[r].arms for r in (30, 31)] == [("17", "15"), ("19", "18")]
    assert {rows[r].benchmark for r in range(36, 40)} == {"math_val210", "ext240", "math500", "pool950"}
    assert all(len(rows[r].arms) == 4 for r in range(36, 40))
    assert {c.row for c in load_contrasts("smoke_cf")} <= set(rows)


def test_cross_seed_mdl_against_the_mean_of_the_arm_s_sampled_mdl_by_hand():
    """Arm 5's cross-seed greedy MDL-Maj@3 on the 4 toy items is 3/4 (item 2: "0" / "10" / "0" -> the wrong
    "0"); its seed-42 checkpoint's sampled MDL-Maj@3 is 3/4 too (item 1: 1-1-1, shortest completed L5 is
    right; item 2: nothing completed, the shortest (L1, "8") is wrong): +0.00 pp on the 4 items."""
    t4 = build_tables(hm.sweep(), n_resamples=100, only=["table4"])["table4"].frame
    (row,) = t4[t4["mode"] == "cross_minus_sampled"].to_dict("records")
    assert row["label"] == "5. stopped_tree" and list(row["sampled_seeds"]) == [42] and row["n_items"] == 4
    assert (row["mdl"], row["sampled_mdl"], row["cross_minus_sampled"]) == (75.0, 75.0, 0.0)


def test_table5b_rescues_of_wrong_anchors_by_hand():
    """Items 1, 2, 3 have a wrong root. FirstGap05: the first fork rescues item 1 only; either of two,
    all three. MinMargin the same; chronologically the earlier fork rescues item 1, the later all three."""
    t5b = build_tables(hm.sweep(), n_resamples=100, only=["table5b"])["table5b"].frame
    row = t5b[t5b["benchmark"] == "toy_heldout"].iloc[0]
    assert row["wrong_anchors"] == 3
    assert (row["firstgap.rescue1"], row["firstgap.rescue2"]) == (1, 3)
    assert (row["minmargin.rescue1"], row["minmargin.rescue2"]) == (1, 3)
    assert (row["minmargin.early_rescue"], row["minmargin.late_rescue"]) == (1, 3)
    assert row["tiegated_minus_hybrid.cr"] == pytest.approx(row["tiegated.cr"] - row["hybrid.cr"])

"""Table 4 (single-seed sampled rows), Table 5A and Table 5B on the hand-made sweep of
`testtime_handmade`, every number worked out by hand in the comments."""

from __future__ import annotations

import pandas as pd
import pytest

from rlvr_sweep.analysis.candidates import candidate
from rlvr_sweep.analysis.fork_votes import stratum, top_frequency
from rlvr_sweep.analysis.report import build_tables
from rlvr_sweep.analysis.table1 import run_proxies
from rlvr_sweep.analysis.voting import Candidate
from tests.analysis import testtime_handmade as hm

N = 200  # bootstrap resamples: enough for the point estimates these tests check


@pytest.fixture(scope="module")
def sweep():
    return hm.sweep()


@pytest.fixture(scope="module")
def tables(sweep):
    return build_tables(sweep, n_resamples=N)


def test_evaluate_runs_stay_out_of_the_training_tables(sweep, tables):
    assert set(sweep.runs["task"]) == {"train"} and len(sweep.eval_runs) == 3
    assert "readout" not in sweep.grades or set(sweep.grades["readout"].fillna("greedy")) == {"greedy"}
    assert not tables["table1"].why and len(tables["table1"].frame) == 4  # 3 arms + the base row, as before
    assert set(sweep.readouts["readout"]) == {"sampled_k3", "fork3", "greedy"}


def test_table4_single_seed_sampled_row(sweep, tables):
    t = tables["table4"].frame
    r = t[t["mode"] == "sampled"].iloc[0]
    # i0 5,5,6: majority (1); i1 3 (L10), 4 (L5, right), 2 (L1): 1-1-1, MaxLen L10 (0), MDL the eligible L5 (1);
    # i2 capped-unboxed, 8 (L1), capped-unboxed: empties never vote, nothing eligible: MDL falls back (0, fb);
    # i3 1,1,1 (1)
    assert r["label"] == "5. stopped_tree seed 42" and r["phase"] == "eval" and r["sample_seed"] == 1042
    assert (r["k"], r["n_items"], r["cap"], r["min_len"], r["temperature"]) == (3, 4, 16, 2, 0.6)
    assert r["mean1"] == pytest.approx(100 * (2 / 3 + 1 / 3 + 0 + 1) / 4)
    assert r["rand"] == pytest.approx(100 * (1 + 1 / 3 + 0 + 1) / 4)
    assert (r["maxlen"], r["mdl"], r["fb"], r["mdl_minus_maxlen"], r["oracle"]) == (50.0, 75.0, 1, 25.0, 75.0)
    assert r["test_tokens"] == (4 + 6 + 3) + (10 + 5 + 1) + (16 + 1 + 16) + 3 * 3
    run = sweep.runs[(sweep.runs["arm"] == "stopped_tree") & (sweep.runs["seed"] == 42)].iloc[0]
    assert r["train_tflops_out"] == pytest.approx(run_proxies(run)["out"])  # 1x the checkpoint it read
    cross = t[t["mode"] == "cross_seed"]
    assert set(cross["label"]) == {"1. baseline", "5. stopped_tree"}  # the cross-seed rows are still there
    shown = tables["table4"].display.iloc[:, 0]
    assert shown.str.startswith("Single-seed 5. stopped_tree seed 42 (T=0.6, 3 draws, seed 1042").sum() == 1


def test_table5b_fork_rules_by_hand(tables):
    t = tables["table5b"].frame
    r = t[t["benchmark"] == "toy_heldout"].iloc[0]
    assert r["label"] == "5. stopped_tree seed 101" and r["n_items"] == 4
    assert r["b0"] == 25.0  # the roots: right, wrong, wrong, wrong
    # MinMargin: i0 5,5,6 (Root+1: 1); i1 3,4,4 (Sibling Override: 1); i2 7,8,10 tie, root completed: CR keeps
    # it (0), MDL the shortest eligible 8 (0); i3 "",2,1 tie, root capped: both MDL, and 2 hit its eff_cap of 4
    # so it is not completed: the 1 (L9) is picked (1)
    assert (r["minmargin.b1"], r["minmargin.b2"], r["minmargin.mdl"], r["minmargin.cr"], r["minmargin.pass"]) == (
        50.0, 75.0, 75.0, 75.0, 100.0)
    # FirstGap05: i0's second gap is the branch at 1 (5, right): unanimous
    assert (r["firstgap.b1"], r["firstgap.b2"], r["firstgap.mdl"], r["firstgap.cr"]) == (50.0, 100.0, 75.0, 75.0)
    assert (r["firstgap.mdl_diff"], r["firstgap.cr_diff"], r["firstgap.pass_count"]) == (50.0, 50.0, 4)
    assert [r[f"firstgap.{s}"] for s in ("unanimous", "root_plus_1", "sibling_override", "completed_tie",
                                         "truncated_tie")] == [1, 0, 1, 1, 1]
    assert [r[f"minmargin.{s}"] for s in ("unanimous", "root_plus_1", "sibling_override", "completed_tie",
                                          "truncated_tie")] == [0, 1, 1, 1, 1]
    # MDL with the plain cap instead of eff_cap: i3's 2 (L4 = its eff_cap) would count as completed and win
    assert (r["firstgap.mdl_count"], r["firstgap.mdl_plain_cap_count"]) == (3.0, 2.0)
    assert (r["firstgap.strict_slots"], r["firstgap.fallback_slots"]) == (8, 0)
    # TieGated: i2 gains 10, 10 -> 10 wins (1); i3 gains 1 -> 1,1 beats 2 (1); both ties resolved
    assert (r["tiegated.cr"], r["tiegated.mdl"], r["tiegated.cr_diff"]) == (100.0, 100.0, 75.0)
    assert (r["tiegated.ties"], r["tiegated.resolved"], r["tiegated.branches"]) == (2, 2, 3 + 3 + 5 + 4)
    assert r["tiegated.branches_per_item"] == 3.75
    # Hybrid: i0 votes over 4 branches (5,5,6,5); the others over their 3
    assert (r["hybrid.cr"], r["hybrid.mdl"], r["hybrid.pass"], r["hybrid.branches"]) == (75.0, 75.0, 100.0, 13)
    # the paired differences are 0, +1, 0, +1: every resample's mean lies in [0, 100]
    assert 0 <= r["firstgap.cr_lo"] < 50 < r["firstgap.cr_hi"] <= 100


def test_table5b_batch_audit(tables):
    r = tables["table5b"].frame.iloc[0]
    # seed 101 read out at batch 32 by its run: 4/4; at batch 64 by a task=evaluate run: 3/4
    assert (r["audit.batch_a"], r["audit.batch_b"], r["audit.n"]) == (32, 64, 4)
    assert (r["audit.acc_a"], r["audit.acc_b"], r["audit.diff"], r["audit.agree"], r["audit.same_response"]) == (
        100.0, 75.0, -25.0, 3, 3)
    assert "100.00 vs 75.00 (-25.00" in tables["table5b"].display.iloc[0]["Batch a vs b (Diff, 95% CI; GradeAgree)"]


def test_table5a_conditions_by_hand(tables):
    t = tables["table5a"].frame.set_index("condition")
    assert t["probe"].iloc[0] == "5. stopped_tree seed 42 -> 5. stopped_tree seed 101"
    got = lambda c: (t.at[c, "rescued_all"], t.at[c, "n_all"], t.at[c, "rescued_pf"], t.at[c, "n_pf"])  # noqa: E731
    # prompt-only failures: items 1 and 2 (K0_none rescues item 0)
    assert got("K0_none") == (1, 3, 0, 2) and t.at["K0_none", "mean_k"] == "0.0"
    assert got("MismatchPrefix_1_donor") == (2, 3, 1, 2) and t.at["MismatchPrefix_1_donor", "mean_k"] == "2.0"
    assert got("Self_MinMargin_Top2_Rank1") == (1, 3, 1, 2) and t.at["Self_MinMargin_Top2_Rank1", "mean_k"] == "2.5"
    assert got("Self_Identity_Ctrl_Rank1") == (0, 3, 0, 2)
    assert got("Self_MinMargin_Top2_Rank2") == (1, 3, 0, 2) and got("Self_Identity_Ctrl_Rank2") == (1, 3, 1, 2)
    # unions: item 0 (Rank2) and item 1 (Rank1); the controls: item 1 (Ctrl2)
    assert got("Self_MinMargin_Top2_Union2") == (2, 3, 1, 2) and got("Self_Identity_Ctrl_Union2") == (1, 3, 1, 2)
    # chronological: item 0 forks at 2 (Rank1, wrong) then 4 (Rank2, right); item 1 at 1 (Rank1, right), 3
    assert got("Self_MinMargin_Top2_Early") == (1, 3, 1, 2) and t.at["Self_MinMargin_Top2_Early", "mean_k"] == "2.5"
    assert got("Self_MinMargin_Top2_Late") == (1, 3, 0, 2) and t.at["Self_MinMargin_Top2_Late", "mean_k"] == "4.5"
    # verified token changes (recorded token = TF top-1, inserted top-2 differs): item 0 only, for both ranks
    assert got("Self_MinMargin_Top2_Rank1 (verified changes)") == (0, 1, 0, 0)
    assert got("Self_MinMargin_Top2_Rank2 (verified changes)") == (1, 1, 0, 0)
    assert got("Self_Identity_Ctrl_Rank2 (verified changes)") == (0, 1, 0, 0)
    assert t.at["K0_none", "toy_heldout.pf"] == 0 and t.at["K0_none", "toy_heldout.all"] == 1


def test_table5a_teacher_forced_agreement_by_hand(tables):
    r = tables["table5a_tf"].frame.iloc[0]
    # 9 positions; mismatches at item 0 pos 1 and item 2 pos 0, 1; A's token is B's top-2 at 2 of the 3
    assert (r["positions"], r["agreed"], r["mismatches"], r["donor_is_top2"]) == (9, 6, 3, 2)
    assert r["agreement"] == pytest.approx(100 * 6 / 9) and r["geo_mean_prob"] == pytest.approx(50.0)
    assert r["margin_agreed"] == pytest.approx((8 + 6 + 7 + 4 + 4 + 4) / 6)
    assert r["margin_mismatch"] == pytest.approx((0.5 + 0.2 + 0.4) / 3)


def test_strata_and_tie_counts_by_hand():
    c = lambda a, n=5, ok=0, cap=None: Candidate(a, n, ok, cap)  # noqa: E731
    assert stratum([c("5"), c("5"), c("5")], 16, 2) == "unanimous"
    assert stratum([c("5"), c("6"), c("5")], 16, 2) == "root_plus_1"
    assert stratum([c("4"), c("5"), c("5")], 16, 2) == "sibling_override"
    assert stratum([c("4"), c("5"), c("6")], 16, 2) == "completed_tie"
    assert stratum([c("4", n=16), c("5"), c("6")], 16, 2) == "truncated_tie"  # the root hit the cap
    assert stratum([c("4", n=1), c("5"), c("6")], 16, 2) == "truncated_tie"  # shorter than MDL's window
    assert stratum([c(""), c("5"), c("5")], 16, 2) == "sibling_override"  # an empty root never holds a majority
    assert stratum([c("4", n=4, cap=4), c("5"), c("6")], 16, 2) == "truncated_tie"  # its own eff_cap
    assert top_frequency([c("1"), c("2"), c("1"), c("")]) == 2 and top_frequency([c(""), c("")]) == 0
    row = pd.Series({"extracted": "7", "capped_unboxed": True, "length": 16, "correct": False, "eff_cap": 16})
    assert candidate(row) == Candidate("", 16, 0.0, 16)  # capped without a box: an empty answer


def test_tables_absent_without_test_time_rows():
    from tests.analysis import handmade

    built = build_tables(handmade.sweep(), n_resamples=N, only=("table4", "table5a", "table5a_tf", "table5b"))
    assert not built["table4"].why and set(built["table4"].frame["mode"]) == {"cross_seed"}
    assert built["table5a"].why and built["table5a_tf"].why and built["table5b"].why

"""Oracle unions of chosen checkpoints and the R-strata, on a hand-made sweep worked out by hand.

Reference Arms 1 and 2 (seeds 42, 101: N = 4 reference checkpoints) and the out-of-sample Arm 15 (seeds
42, 101) read out six MATH-500 items. The reference checkpoints answer item i0 0 times, i1 once, i2 and i5
twice, i3 three times and i4 four times: shares 0, 1/4, 1/2, 3/4, 1 against the edges 7/27, 14/27, 21/27
put i0 in R0, i1 in R1, i2 and i5 in R2, i3 in R3 and i4 in R4.
"""

from __future__ import annotations

import pandas as pd
import pytest

from rlvr_sweep.analysis import Sweep, build_tables
from rlvr_sweep.analysis.ensembles import checkpoint_union, parse_checkpoints, stratum_of

CORRECT = {  # (paper arm, seed) -> items i0..i5
    ("1", 42): (0, 1, 1, 1, 1, 0), ("1", 101): (0, 0, 1, 1, 1, 1),
    ("2", 42): (0, 0, 0, 1, 1, 1), ("2", 101): (0, 0, 0, 0, 1, 0),
    ("15", 42): (1, 0, 1, 0, 1, 0), ("15", 101): (0, 1, 1, 0, 1, 1),
}
ARM_NAMES = {"1": "baseline", "2": "ra_flat", "15": "rg_cf_grpo"}


def sweep() -> Sweep:
    runs, grades = [], []
    for (arm, seed), ok in CORRECT.items():
        keys = {"arm": ARM_NAMES[arm], "horizon": 512, "seed": seed, "run_hash": f"{arm}-{seed}", "paper_arm": arm}
        runs.append({**keys, "group_hash": f"g{arm}", "profile": "paper", "run_dir": "", "finished_at": 0.0})
        grades += [{**keys, "phase": "trained", "benchmark": "math500", "source": "math500", "item_id": f"i{i}",
                    "index": i, "length": 40, "capped": False, "capped_unboxed": False, "extracted": "1",
                    "correct": bool(c), "has_box": True, "response": "x" * 40 + "\\boxed{1}"} for i, c in enumerate(ok)]
    return Sweep.from_tables({"runs": pd.DataFrame(runs), "grades": pd.DataFrame(grades), "steps": pd.DataFrame(),
                              "rollouts": pd.DataFrame(), "pairs": pd.DataFrame()})


def test_parse_checkpoints():
    assert parse_checkpoints("15,18") == [("15", None), ("18", None)]
    assert parse_checkpoints("15:101, 17:42,18:7") == [("15", 101), ("17", 42), ("18", 7)]
    with pytest.raises(ValueError, match="'15:x' is not ARM or ARM:SEED"):
        parse_checkpoints("15:x")
    with pytest.raises(ValueError, match="at least one"):
        parse_checkpoints(" , ")


def test_the_union_of_chosen_checkpoints_by_hand():
    # Arm 15 seed 42 and Arm 2 seed 101: i0 (15), i2 (15), i4 (both) -> 3 of 6
    result = checkpoint_union(sweep(), [("15", 42), ("2", 101)], "math500")
    assert (result["union"], result["n_items"], result["k"]) == (3, 6, 2)
    assert result["union_pct"] == pytest.approx(50.0)
    assert result["accuracy"] == {"15. rg_cf_grpo seed 42": pytest.approx(50.0), "2. ra_flat seed 101": pytest.approx(100 / 6)}
    assert list(result["matrix"].index) == [f"i{i}" for i in range(6)]
    # every seed of Arm 15: all but i3 -> 5 of 6
    both = checkpoint_union(sweep(), parse_checkpoints("15"), "math500")
    assert (both["union"], both["k"]) == (5, 2)


def test_a_pick_the_sweep_lacks_is_named():
    with pytest.raises(ValueError, match="arm '18' names 0 rows"):
        checkpoint_union(sweep(), [("18", None)], "math500")
    with pytest.raises(ValueError, match="seed 7 has no math500 read-out"):
        checkpoint_union(sweep(), [("15", 7)], "math500")


def test_stratum_edges_follow_the_27_checkpoint_r2():
    assert [stratum_of(k, 27) for k in (0, 1, 6, 7, 13, 14, 20, 21, 27)] == \
        ["R0", "R1", "R1", "R2", "R2", "R3", "R3", "R4", "R4"]


def test_strata_table_by_hand():
    frame = build_tables(sweep(), only=["strata"])["strata"].frame
    assert set(frame["label"]) == {"15. rg_cf_grpo"}  # reference arms are not scored against themselves
    got = {r["stratum"]: (r["n_items"], r["mean_correct"], r["pass_k"]) for _, r in frame.iterrows()}
    # R0 {i0}: 1 + 0; R1 {i1}: 0 + 1; R2 {i2, i5}: 1 + 2, Pass@2 both; R3 {i3}: none; R4 {i4}: both seeds
    assert got == {"R0": (1, 0.5, 1), "R1": (1, 0.5, 1), "R2": (2, 1.5, 2), "R3": (1, 0.0, 0), "R4": (1, 1.0, 1)}
    assert set(frame["n_reference"]) == {4}


def test_strata_need_reference_and_other_arms():
    only_reference = {k: v for k, v in CORRECT.items() if k[0] != "15"}
    s = sweep()
    s.grades = s.grades[s.grades["paper_arm"].isin([a for a, _ in only_reference])]
    s.runs = s.runs[s.runs["paper_arm"] != "15"]
    assert "at least one other arm" in build_tables(s, only=["strata"])["strata"].why


def test_strata_on_a_named_reference_set():
    """Arm 2 alone as the reference (N = 2): i0, i1, i2 answered by neither (R0), i3, i5 once (1/2: R2), i4 twice
    (R4); Arms 1 and 15 are scored. Arm 15 on R2 {i3, i5}: seed 42 none, seed 101 i5 -> mean 0.5, Pass@2 1."""
    frame = build_tables(sweep(), only=["strata"], strata_reference=["ra_flat"])["strata"].frame
    assert set(frame["label"]) == {"1. baseline", "15. rg_cf_grpo"} and set(frame["reference"]) == {"ra_flat"}
    mine = frame[frame["label"] == "15. rg_cf_grpo"].set_index("stratum")
    assert list(mine.index) == ["R0", "R2", "R4"] and list(mine["n_items"]) == [3, 2, 1]
    assert (mine.loc["R2", "mean_correct"], mine.loc["R2", "pass_k"]) == (0.5, 1)

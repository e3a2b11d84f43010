"""Table 5C on a hand-made sweep: one counterfactual arm (15), two seeds, two fork steps each."""

from __future__ import annotations

import pandas as pd

from rlvr_sweep.analysis import Sweep
from rlvr_sweep.analysis.table5c import build_table5c

KEYS = {"arm": "rg_cf_grpo", "horizon": 1024, "paper_arm": "15"}


def pair(seed, step, k, r0, r1, category="cf_first_gap"):
    """A fork pair of Arm 15 (RG): a (1, 0) pair's loser is a duplicate of its winner (effective (1, 1))."""
    dup = category != "flat_warmup" and (r0, r1) == (1, 0)
    return {**KEYS, "seed": seed, "run_hash": f"h{seed}", "step": step, "k": k, "category": category,
            "r0": r0, "r1": r1, "r0_raw": r0, "r1_raw": r1, "r0_eff": r0, "r1_eff": r0 if dup else r1}


def sweep() -> Sweep:
    # seed 42: step 0 is flat warmup (not counted), step 1 has one (0, 1) pair, step 2 all four b0 pass
    # seed 7: step 1 has a (1, 0) pair (b0 won), step 2 nothing diverges
    pairs = [pair(42, 0, k, 1, 0, "flat_warmup") for k in range(4)]
    pairs += [pair(42, 1, 0, 0, 1), pair(42, 1, 1, 0, 0), pair(42, 1, 2, 0, 0), pair(42, 1, 3, 0, 0)]
    pairs += [pair(42, 2, k, 1, 1) for k in range(3)] + [pair(42, 2, 3, 1, 0)]
    pairs += [pair(7, 1, 0, 1, 0), pair(7, 1, 1, 0, 0), pair(7, 1, 2, 1, 1), pair(7, 1, 3, 0, 0)]
    pairs += [pair(7, 2, k, 0, 0) for k in range(4)]
    steps = [{**KEYS, "seed": s, "run_hash": f"h{s}", "step": st, "active": act, "cf_status": status}
             for s, st, act, status in [(42, 0, True, None), (42, 1, True, "active"), (42, 2, False, "gated_rescue_dup"),
                                        (7, 1, True, "active"), (7, 2, False, "homogeneous")]]
    grades = [{**KEYS, "seed": s, "run_hash": f"h{s}", "phase": "trained", "benchmark": b, "source": b,
               "item_id": f"{b}{i}", "index": i, "length": 20, "capped": False, "capped_unboxed": False,
               "extracted": "1" if ok else "2", "correct": bool(ok)}
              for s, per_bench in [(42, {"math500": [1, 1, 0, 0], "ext240": [1, 0]}),
                                   (7, {"math500": [1, 0, 0, 0], "ext240": [1, 1]})]
              for b, outcomes in per_bench.items() for i, ok in enumerate(outcomes)]
    runs = pd.DataFrame([{**KEYS, "seed": s, "run_hash": f"h{s}", "group_hash": "g", "profile": "smoke", "finished_at": float(i),
                          "run_dir": "", "eval_max_new_tokens": 256, "length_scale": 0.125, "params": 1000}
                         for i, s in enumerate((42, 7))])
    return Sweep.from_tables({"runs": runs, "steps": pd.DataFrame(steps), "pairs": pd.DataFrame(pairs),
                              "grades": pd.DataFrame(grades), "rollouts": pd.DataFrame()})


def test_table5c_by_hand():
    table = build_table5c(sweep(), n_resamples=200)
    assert table.why is None
    (row,) = table.frame.to_dict("records")
    assert row["seeds"] == [42, 7]
    assert row["math500.counts"] == [2, 1] and row["math500.mean"] == 37.5  # 50 % and 25 %
    assert row["ext240.counts"] == [1, 2] and row["pool.counts"] == [3, 3] and row["pool.mean"] == 50.0
    assert row["active_per_seed"] == [2, 1]  # the warmup step is active too (an update like any other)
    # raw: 16 post-warmup pairs; divergent: seed 42 (0,1), seed 42 step 2 k=3 (1,0), seed 7 (1,0): 3
    assert (row["raw_divergent"], row["post_pairs"], row["raw_b0_wins"], row["raw_b1_wins"]) == (3, 16, 2, 1)
    # the paper's count: pairs of post-warmup *active* steps (42/1 and 7/1: 8 = 4 x 2), after duplication:
    # seed 7's (1, 0) became (1, 1), so only seed 42's (0, 1) diverges: 1/8 (0 / 1)
    assert (row["divergent"], row["active_post_pairs"], row["b0_wins"], row["b1_wins"]) == (1, 8, 0, 1)
    # b0 = 4/4 only at seed 42 step 2, which was gated (not active): no false activation
    assert row["false_act"] == 0 and row["gated"] == 1 and row["skipped"] == 0
    # two seeds vote on MATH-500: item 0 both right, item 1 split (1-1 tie), items 2, 3 both wrong
    assert row["pass_k"] == 50.0 and row["k"] == 2
    shown = table.display.iloc[0]
    assert shown["Div (b0 / b1)"] == "1/8 (0 / 1)" and shown["Div raw (b0 / b1)"] == "3/16 (2 / 1)"
    assert shown["b0=4/4 False Act"] == "0 (0/0) (1 gated)"


def test_table5c_says_why_without_counterfactual_arms():
    s = sweep()
    s.runs["paper_arm"] = "12"
    s.runs["label"] = "12. stopped_tree h1024"
    assert "no counterfactual fork-pair arm" in build_table5c(s).why


def test_a_saved_table5c_is_rebuilt_by_pass3_and_a_changed_cell_is_caught(tmp_path):
    from rlvr_sweep.analysis import build_tables, save_tables
    from rlvr_sweep.verify.rebuild import saved_problems

    s = sweep()
    save_tables(build_tables(s, only=["table5c"]), tmp_path)
    assert saved_problems(s, tmp_path) == (1, [])
    saved = pd.read_parquet(tmp_path / "table5c.parquet")
    saved.loc[0, "divergent"] = 4
    saved.to_parquet(tmp_path / "table5c.parquet", index=False)
    checked, problems = saved_problems(s, tmp_path)
    assert checked == 1 and len(problems) == 1 and problems[0].startswith("table5c: the saved table differs")

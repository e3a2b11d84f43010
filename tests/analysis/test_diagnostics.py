"""§3's baseline diagnostics on hand-made rows whose numbers are worked out in the docstrings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rlvr_sweep.analysis import Sweep, build_tables
from rlvr_sweep.analysis.diagnostics import common_prefix, equations

# base read-out of six items: (length, correct, response); short = < 30 tokens at length_scale 1
BASE = [(3, 1, "\\boxed{1}"), (5, 0, "\\boxed{2}"), (40, 1, "x" * 35 + " \\boxed{3}"), (2, 0, "\\boxed{4}"),
        (50, 0, "x" * 60 + " \\boxed{5}"), (10, 1, "short \\boxed{6}")]
# trained read-outs (seed -> per item (length, correct, response)): every answer boxed
TRAINED = {42: [(40, 1, "y" * 30 + "\\boxed{1}"), (45, 1, "y" * 29 + "\\boxed{2}"), (35, 0, "y" * 40 + "\\boxed{9}"),
                (8, 0, "\\boxed{9}"), (60, 1, "y" * 50 + "\\boxed{5}"), (31, 0, "y" * 31 + "\\boxed{0}")],
           101: [(12, 1, "\\boxed{1}"), (33, 1, "y" * 33 + "\\boxed{2}"), (36, 1, "y" * 36 + "\\boxed{3}"),
                 (30, 0, "y" * 30 + "\\boxed{9}"), (29, 0, "\\boxed{9}"), (70, 1, "y" * 70 + "\\boxed{6}")]}

# seed 42: step 0 all R = 0 (lengths 2), step 1 all R = 1 (lengths 4), step 2 mixed
MIXED = [  # (reward, tokens, head_text)
    (1, [1, 2, 3, 4, 5], "3+4=7 so x=7"),
    (0, [1, 2, 9], "3+4 = 7, then 9"),
    (0, [1, 2, 3, 4, 8, 8], "5*2=11"),
    (1, [1, 2, 3, 7], "x = 7."),
]


def _ledgers(seed: int):
    steps, rollouts = [], []
    if seed == 42:
        groups = [[(0, [5, 5], "a")] * 4, [(1, [6, 6, 6, 6], "b")] * 4, MIXED]
    else:  # twelve homogeneous steps: step i all of length i + 1, all-0 on even steps, all-1 on odd ones
        groups = [[(i % 2, list(range(i + 1)), "c")] * 4 for i in range(12)]
    for step, group in enumerate(groups):
        steps.append({"step": step, "question_id": f"q{step}", "rewards": [float(r) for r, _, _ in group],
                      "gen_tokens": sum(len(t) for _, t, _ in group)})
        rollouts += [{"step": step, "question_id": f"q{step}", "index": i, "reward": float(r), "length": len(t),
                      "tokens": t, "head_text": h} for i, (r, t, h) in enumerate(group)]
    return steps, rollouts


def sweep(length_scale: float = 1.0) -> Sweep:
    runs, grades, steps, rollouts = [], [], [], []
    for seed, items in TRAINED.items():
        keys = {"arm": "baseline", "horizon": 512, "seed": seed, "run_hash": f"b{seed}", "paper_arm": "1"}
        runs.append({**keys, "group_hash": "g1", "base_hash": "base", "profile": "paper", "run_dir": "",
                     "finished_at": 0.0, "length_scale": length_scale})
        for phase, rows in (("base", BASE), ("trained", items)):
            grades += [{**keys, "phase": phase, "benchmark": "math500", "source": "math500", "item_id": f"i{i}",
                        "index": i, "length": n, "capped": False, "capped_unboxed": False, "has_box": True,
                        "extracted": "1", "correct": bool(c), "response": text} for i, (n, c, text) in enumerate(rows)]
        s, r = _ledgers(seed)
        steps += [{**keys, **row} for row in s]
        rollouts += [{**keys, **row} for row in r]
    return Sweep.from_tables({"runs": pd.DataFrame(runs), "grades": pd.DataFrame(grades), "steps": pd.DataFrame(steps),
                              "rollouts": pd.DataFrame(rollouts), "pairs": pd.DataFrame()})


def test_equations_are_the_adjacent_pairs_of_every_chain():
    assert equations("We have 3+4 = 7, so x = 7 - 2 = 5. Then $a=b$ and 2x=10.") == {"3+4=7", "x=7-2", "7-2=5", "2x=10"}
    assert equations("12+7=19") == {"12+7=19"}
    assert equations("no equation, a = b; x =") == set()  # a pair needs both sides and a digit
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix([], [1]) == 0


def test_common_prefix_is_the_first_difference_at_every_position():
    base = list(range(100, 140))
    for at in range(len(base) + 1):
        other = base[:at] + [-1] + base[at:]
        assert common_prefix(base, other) == at and common_prefix(np.array(other), tuple(base)) == at
        assert common_prefix(base, base[:at]) == at  # one a prefix of the other


def test_short_and_multi_step_read_outs_by_hand():
    """Base: lengths 3, 5, 40, 2, 50, 10 -> short i0, i1, i3, i5 (4/6) with i0, i5 right (50 %); multi-step
    i2, i4 with i2 right (1/2). Correct boxed: i0, i2, i5; >= 30 characters before the last \\boxed only i2's
    35 + 1. Trained (both seeds, 12 rows): short 8 (s42), 12, 29 (s101) -> 3 with 1 right; multi 9 with 6 right;
    correct boxed 7, of which >= 30 characters before: s42 i0 (30), i4 (50); s101 i1, i2, i5 -> 5 of 7."""
    frame = build_tables(sweep(), only=["baseline_readouts"])["baseline_readouts"].frame.set_index("label")
    base = frame.loc["base model (0 updates)"]
    assert (base["n"], base["short"], base["short_correct"], base["multi"], base["multi_correct"]) == (6, 4, 2, 2, 1)
    assert (base["short_share"], base["short_accuracy"], base["multi_accuracy"]) == pytest.approx((200 / 3, 50.0, 50.0))
    assert (base["correct_boxed"], base["boxed_derived"]) == (3, 1)
    trained = frame.loc["1. baseline"]
    assert (trained["n"], trained["n_seeds"], trained["short"], trained["short_correct"]) == (12, 2, 3, 1)
    assert (trained["multi"], trained["multi_correct"], trained["correct_boxed"], trained["boxed_derived"]) == (9, 6, 7, 5)
    assert trained["boxed_derived_share"] == pytest.approx(500 / 7)


def test_lengths_follow_the_profile_scale():
    """At length_scale 0.125 both cuts are 4 (round(30 x 0.125)): base short are lengths 3 and 2 (i0, i3),
    i0 right; of the correct boxed i0, i2, i5, two have >= 4 characters before the box."""
    base = build_tables(sweep(0.125), only=["baseline_readouts"])["baseline_readouts"].frame.iloc[0]
    assert (base["short_tokens"], base["box_chars"], base["short"], base["short_correct"]) == (4, 4, 2, 1)
    assert (base["correct_boxed"], base["boxed_derived"]) == (3, 2)  # i2 (36) and i5 ("short ", 6)


def test_run_diagnostics_by_hand():
    """Seed 42: steps all-0, all-1, mixed -> 1 / 1 of 3 homogeneous (66.67 %); early-10 mean over all 12
    rollouts (8 + 16 + 18) / 12 = 3.5; 42 tokens. Mixed group: loser [1, 2, 9] "3+4 = 7" shares 3+4=7 with the
    first winner, prefix 2 with both; loser [1, 2, 3, 4, 8, 8] "5*2=11" shares none, prefix 4 with the first
    winner -> 1/2 = 50 %, mean LCP 3.0. Seed 101: 12 homogeneous steps, 6 all-0 and 6 all-1; its first 10
    steps' lengths 1..10 -> 5.5; no active group."""
    frame = build_tables(sweep(), only=["baseline_runs"])["baseline_runs"].frame.set_index("seed")
    s42, s101 = frame.loc[42], frame.loc[101]
    assert (s42["all_zero"], s42["all_one"], s42["steps"], s42["total_tokens"]) == (1, 1, 3, 42)
    assert (s42["homogeneous_share"], s42["early_10_mean_tokens"]) == pytest.approx((200 / 3, 3.5))
    assert (s42["failed_active"], s42["shared_equation"]) == (2, 1)
    assert (s42["shared_share"], s42["mean_lcp"]) == pytest.approx((50.0, 3.0))
    assert (s101["all_zero"], s101["all_one"], s101["homogeneous_share"]) == (6, 6, 100.0)
    assert s101["early_10_mean_tokens"] == pytest.approx(5.5) and s101["failed_active"] == 0
    assert pd.isna(s101["mean_lcp"])


def test_runs_recorded_without_token_ids_say_so():
    s = sweep()
    s.rollouts = s.rollouts.drop(columns=["tokens", "head_text"])
    table = build_tables(s, only=["baseline_runs"])["baseline_runs"]
    assert set(table.display["Mean LCP with R=1 (tokens)"]) == {"not recorded"}
    assert list(table.frame["all_zero"]) == [1, 6]


def test_a_non_binary_reward_counts_groups_as_the_ledger_and_table_2a_do():
    """A token-length penalty: rewards 1 - 0.01 L and -0.01 L. Step 0: all wrong, lengths differ (active: not
    homogeneous, though no reward is 1 and none is 0); step 1: all wrong, equal lengths (homogeneous); step 2: all
    right, lengths differ (active). The homogeneous share is 1 of 3, as the ledger's `active` says; the all-0 /
    all-1 counts are by correctness (2 all wrong, 1 all right) and the display says so."""
    from rlvr_sweep.analysis.diagnostics import BY_CORRECTNESS, group_counts

    rewards = [[-0.02, -0.03], [-0.02, -0.02], [0.98, 0.97]]
    correct = [[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]
    assert group_counts(rewards, correct) == {"all_zero": 2, "all_one": 1, "homogeneous": 1,
                                              "groups_by": BY_CORRECTNESS}
    s = sweep()
    mine = s.steps["seed"] == 42
    s.steps.loc[mine, "rewards"] = pd.Series([np.array(r) for r in rewards], index=s.steps.index[mine])
    s.steps.loc[mine, "correct"] = pd.Series([np.array(c) for c in correct], index=s.steps.index[mine])
    table = build_tables(s, only=["baseline_runs"])["baseline_runs"]
    row = table.frame.set_index("seed").loc[42]
    assert (row["all_zero"], row["all_one"], row["homogeneous_share"]) == (2, 1, pytest.approx(100 / 3))
    shown = table.display.set_index("Run")
    assert shown.filter(like="seed 42", axis=0)["All-0 / all-1 groups"].iloc[0] == "2 / 1 of 3 (all wrong / all right)"
    assert any("all-wrong / all-right groups by correctness" in note for note in table.notes)
    binary = build_tables(sweep(), only=["baseline_runs"])["baseline_runs"]  # the paper's rewards: as before
    assert not any("by correctness" in note for note in binary.notes)

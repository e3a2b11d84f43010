"""The sampled and fork read-outs on the shipped tiny model (CPU, float32, a few toy items): their rows,
their seeding, their fork positions against the rules, tie gating, eff_cap, and the run's scaled settings."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch

from rlvr_sweep.analysis.candidates import fork_tie
from rlvr_sweep.config import DataConfig, ModelConfig
from rlvr_sweep.data import benchmark_rows, encode_prompts
from rlvr_sweep.evaluation import ReadoutSettings, accuracy_rows, evaluate_forks, evaluate_greedy, evaluate_sampled
from rlvr_sweep.evaluation.schedule import decode_readout
from rlvr_sweep.policy import load_policy
from rlvr_sweep.verify.testtime_rules import fork_problems, sampled_problems
from tests.helpers import compose_cfg

TINY = "pkg:rlvr_sweep.policy/assets/tiny_qwen3"
GREEDY = ("item_id", "index", "length", "finished", "capped", "extracted", "correct", "response")


@pytest.fixture(scope="module")
def policy():
    torch.set_num_threads(1)
    return load_policy(ModelConfig(name="tiny", hub_id=None, path=TINY, dtype="float32", device="cpu"))


@pytest.fixture(scope="module")
def rows():
    return benchmark_rows("toy_heldout", DataConfig(name="toy_arith"), 10)


# smoke-profile lengths: cap 256 -> 64 here to stay fast; the 72-token pass and [4, 64) window at 1/8
SETTINGS = ReadoutSettings(max_new_tokens=64, batch_size=4, seed=42, margin_tokens=9, fork_start=1, fork_end=8,
                           min_continuation=8, continuation_batch_size=8)


@pytest.mark.slow
def test_sampled_rows_and_seeding(policy, rows):
    out = evaluate_sampled(policy, rows, benchmark="toy_heldout", phase="trained", settings=SETTINGS)
    frame = pd.DataFrame(out)
    assert len(frame) == 3 * len(rows) and sorted(frame["draw"].unique()) == [0, 1, 2]
    assert set(frame["sample_seed"]) == {1042} and set(frame["readout"]) == {"sampled_k3"}
    assert (frame.groupby("index")["draw"].apply(sorted) == pd.Series([[0, 1, 2]] * len(rows))).all()
    assert sampled_problems(frame, "sampled") == (len(rows), [])
    again = evaluate_sampled(policy, rows, benchmark="toy_heldout", phase="trained", settings=SETTINGS)
    assert [r["response"] for r in again] == list(frame["response"])  # the same seed draws the same responses
    other = evaluate_sampled(policy, rows, benchmark="toy_heldout", phase="trained",
                             settings=dataclasses.replace(SETTINGS, seed=7))
    assert [r["response"] for r in other] != list(frame["response"])
    assert frame.groupby("index")["response"].nunique().max() > 1  # the draws differ (T = 0.6)
    # the paper's torch.manual_seed(1000 + seed): the default generator seeded so draws exactly draw 0
    prompts = encode_prompts(policy.tokenizer, [r["problem"] for r in rows])
    torch.manual_seed(1042)
    gen = decode_readout(policy.model, prompts, schedule="fixed", engine="reference", batch_size=4,
                         max_new_tokens=64, eos_id=policy.eos_id, pad_id=policy.pad_id, temperature=0.6, top_p=0.9)
    assert list(frame[frame["draw"] == 0]["length"]) == [n - int(f) for n, f in zip(gen.lengths, gen.finished)]
    assert accuracy_rows(out) == out  # Mean@1 averages every draw


@pytest.fixture(scope="module")
def forks(policy, rows):
    return evaluate_forks(policy, rows, benchmark="toy_heldout", phase="eval", settings=SETTINGS)


def test_fork_roots_are_the_greedy_readout(policy, rows, forks):
    greedy = evaluate_greedy(policy, rows, benchmark="toy_heldout", phase="eval", settings=SETTINGS)
    roots = [r for r in forks if r["branch"] == 0]
    assert [{k: r[k] for k in GREEDY} for r in roots] == [{k: g[k] for k in GREEDY} for g in greedy]
    assert accuracy_rows(forks) == roots


def test_fork_rows_obey_the_rules(forks):
    frame = pd.DataFrame(forks)
    assert fork_problems(frame, SETTINGS.max_new_tokens, "forks") == (10, [])
    branches = frame[frame["branch"] > 0]
    assert len(branches) and (branches["prefix_len"] == branches["fork_pos"] + 1).all()
    assert (branches["fork_pos"] >= 1).all() and (branches["fork_pos"] < 8).all()  # the window [1, 8)
    # every item: MinMargin and FirstGap05 take three branches each (roots here are long enough)
    per_item = frame.groupby("index")
    assert (per_item["mm_slot"].apply(lambda s: sorted(s[s >= 0])) == pd.Series([[0, 1, 2]] * 10)).all()
    assert (per_item["branches"].first() == per_item.size()).all()
    # tie gating: extra first-gap slots (3, 4) only on FirstGap05's 3-way ties (where the window has room)
    extras = 0
    for index, item in per_item:
        fg = item[item["fg_slot"].between(0, 2)].sort_values("fg_slot")
        tie = fork_tie([r for _, r in fg.iterrows()])
        assert bool(item["fg_tie"].iloc[0]) == tie
        if not tie:
            assert not (item["cont_round"] == 2).any() and not (item["fg_slot"] > 2).any()
        extras += int((item["fg_slot"] > 2).any())
    assert extras and frame["fg_tie"].any() and not frame["fg_tie"].all()  # every case occurs on these items


def test_a_branch_continues_the_root_prefix_with_the_top2_token(policy, forks):
    frame = pd.DataFrame(forks)
    for _, root in frame[frame["branch"] == 0].iterrows():
        for _, b in frame[(frame["index"] == root["index"]) & (frame["branch"] > 0)].iterrows():
            t = int(b["fork_pos"])
            prefix = policy.tokenizer.decode(list(root["tf_tokens"][:t]) + [int(b["inserted_token"])])
            assert b["response"].startswith(prefix)
            assert b["inserted_token"] == root["tf_top2"][t] and b["orig_token"] == root["tf_tokens"][t]


def test_tampered_fork_rows_are_caught(forks):
    frame = pd.DataFrame(forks)
    branch = frame.index[frame["branch"] == 1][0]
    moved = frame.copy()
    moved.loc[branch, "fork_pos"] = int(moved.loc[branch, "fork_pos"]) + 1
    assert fork_problems(moved, 64, "x")[1]
    capped = frame.copy()
    capped.loc[branch, "eff_cap"] = int(capped.loc[branch, "eff_cap"]) - 1
    assert any("eff_cap" in p for p in fork_problems(capped, 64, "x")[1])
    flipped = frame.copy()
    flipped["fg_tie"] = ~flipped["fg_tie"].astype(bool)
    assert any("fg_tie" in p for p in fork_problems(flipped, 64, "x")[1])


def test_forks_without_tie_gating(policy, rows):
    settings = dataclasses.replace(SETTINGS, tie_forks=0)
    frame = pd.DataFrame(evaluate_forks(policy, rows[:4], benchmark="toy_heldout", phase="eval", settings=settings))
    assert (frame["cont_round"] <= 1).all() and (frame["fg_slot"] <= 2).all() and not frame["fg_tie"].any()


def test_bad_fork_windows_are_refused():
    with pytest.raises(ValueError, match="start < end"):
        ReadoutSettings(max_new_tokens=8, fork_start=5, fork_end=5)
    with pytest.raises(ValueError, match="past the margin pass"):
        ReadoutSettings(max_new_tokens=8, margin_tokens=9, fork_end=10)


def test_the_run_scales_the_paper_constants():
    from rlvr_sweep.run.readouts import readout_settings

    s = readout_settings(compose_cfg(["profile=smoke", "eval=fork3"]))
    assert (s.max_new_tokens, s.margin_tokens, s.fork_start, s.fork_end, s.min_continuation) == (256, 9, 1, 8, 8)
    assert (s.fork_threshold, s.fork_separation, s.tie_forks, s.continuation_batch_size) == (0.5, 2, 2, 64)
    p = readout_settings(compose_cfg(["eval=sampled_k3", "seed=7"]))
    assert (p.max_new_tokens, p.draws, p.temperature, p.top_p, p.sample_seed_offset, p.seed) == (2048, 3, 0.6, 0.9,
                                                                                                   1000, 7)
    assert (p.margin_tokens, p.fork_start, p.fork_end) == (72, 4, 64)


def test_sampled_progress_counts_whole_items():
    """k = 3 draws of 200 items in batches of 64: the bar moves in whole items and ends at 200 exactly."""
    from rlvr_sweep.evaluation.sampled import _whole_items

    seen = []
    report = _whole_items(lambda items, tokens: seen.append((items, tokens)), 3)
    for batch in [64, 64, 72] * 3:
        report(batch, 10)
    assert [i for i, _ in seen] == [21, 21, 24, 22, 21, 24, 21, 22, 24]
    assert sum(i for i, _ in seen) == 200 and all(isinstance(i, int) for i, _ in seen)
    assert sum(t for _, t in seen) == 90  # every decoded token is still counted

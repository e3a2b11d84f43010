"""Batched continuations of spliced prefixes: the eff_cap arithmetic by hand, and the decoded rows equal
decoding each row on its own with its own budget (float32, a random tiny Qwen3)."""

from __future__ import annotations

import pytest
import torch

from rlvr_sweep.evaluation.continuation import continue_prefixes, plan_batches
from rlvr_sweep.rollout import engine
from tests.conftest import make_random_qwen3

EOS = PAD = 63


def test_plan_batches_by_hand():
    # rows by prompt + prefix length (longest first): 1 (30), 2 (20) | 0 (10)
    plan = plan_batches([10, 30, 20], [0, 20, 5], batch_size=2, cap=100, min_new=8)
    assert [(b.items, b.max_new, b.eff_caps) for b in plan] == [([1, 2], 80, [100, 85]), ([0], 100, [100])]
    # eff_cap_i = cap - max_j K_j + K_i: the longest prefix of a batch gets the full cap, the others less
    plan = plan_batches([40, 41, 42], [30, 12, 0], batch_size=3, cap=64, min_new=8)
    assert plan[0].max_new == 34 and dict(zip(plan[0].items, plan[0].eff_caps)) == {0: 64, 1: 46, 2: 34}


def test_plan_batches_floor_binds_past_the_cap():
    # cap - max K = 2 < min_new = 8: every row runs 8 steps, so the longest reaches K + 8 > cap
    plan = plan_batches([70], [62], batch_size=4, cap=64, min_new=8)
    assert plan[0].max_new == 8 and plan[0].eff_caps == [70]


@pytest.fixture(scope="module")
def model():
    return make_random_qwen3(seed=3, vocab=64)


def rows():
    g = torch.Generator().manual_seed(5)
    prompts = [torch.randint(1, 60, (int(n),), generator=g).tolist() for n in (3, 7, 5, 4, 6)]
    prefixes = [[], [1, 2, 3], [4], [5, 6, 7, 8, 9, 10], [11, 12]]
    return prompts, prefixes


def test_continuations_equal_decoding_each_row_alone(model):
    prompts, prefixes = rows()
    out = continue_prefixes(model, prompts, prefixes, cap=12, batch_size=2, min_new=3, engine="reference",
                            eos_id=EOS, pad_id=PAD)
    plan = plan_batches([len(p) + len(q) for p, q in zip(prompts, prefixes)], [len(q) for q in prefixes],
                        batch_size=2, cap=12, min_new=3)
    for b, batch in enumerate(plan):
        for i, eff_cap in zip(batch.items, batch.eff_caps):
            alone = engine.generate(model, [prompts[i] + prefixes[i]], max_new_tokens=eff_cap - len(prefixes[i]),
                                    eos_id=EOS, pad_id=PAD, temperature=0, top_p=1.0)
            assert out.tokens[i] == prefixes[i] + alone.tokens[0]
            assert out.finished[i] == alone.finished[0]
            assert (out.eff_cap[i], out.batch[i]) == (eff_cap, b)
            assert out.lengths[i] == len(out.tokens[i]) - int(out.finished[i]) <= eff_cap
            if not out.finished[i]:
                assert out.lengths[i] == eff_cap  # an unfinished row ran its whole budget
    assert out.generated_tokens == sum(len(t) - len(q) for t, q in zip(out.tokens, prefixes))


def test_a_prefix_ending_with_eos_is_complete_and_still_sets_its_batch_cap(model):
    prompts, _ = rows()
    prefixes = [[1, 2, 3, 4, 5, 6, EOS], [7]]
    out = continue_prefixes(model, prompts[:2], prefixes, cap=12, batch_size=2, min_new=3, engine="reference",
                            eos_id=EOS, pad_id=PAD)
    assert out.tokens[0] == prefixes[0] and out.finished[0] and out.lengths[0] == 6
    assert out.eff_cap == [12, 6]  # max K = 7 (the finished row) sets the batch's 5 steps: 1 + 5 = 6 for row 1
    assert len(out.tokens[1]) <= 6

"""Read-out schedules: batch plans by hand, and `decode_readout` returning rows in item order."""

from __future__ import annotations

import pytest
import torch

from rlvr_sweep.evaluation.schedule import (
    SCHEDULES, decode_readout, fixed_batches, length_sorted_batches, length_sorted_order, merge_generations,
)
from rlvr_sweep.rollout import Generation, engine, engines
from tests.conftest import make_random_qwen3

PAD = 0


def test_fixed_batches_by_hand():
    assert fixed_batches(5, 2) == [[0, 1], [2, 3], [4]]
    assert fixed_batches(4, 32) == [[0, 1, 2, 3]]
    assert fixed_batches(0, 32) == []
    with pytest.raises(ValueError, match="batch_size"):
        fixed_batches(3, 0)


def test_length_sorted_batches_by_hand():
    assert length_sorted_order([3, 9, 5, 9, 1]) == [1, 3, 2, 0, 4]  # longest first, ties in dataset order
    assert length_sorted_batches([3, 9, 5, 9], 2) == [[1, 3], [2, 0]]
    assert length_sorted_batches([3, 9, 5, 9, 1], 2) == [[1, 3], [2, 0], [4]]


def gen_of(rows: list[list[int]], margins=False) -> Generation:
    lengths = [len(r) for r in rows]
    m = [[0.5] * n for n in lengths] if margins else None
    return Generation(rows, lengths, [False] * len(rows), m, sum(lengths), 2 * sum(lengths), sum(lengths),
                      len(rows) * max(lengths), m and [[1] * n for n in lengths], m and [[2] * n for n in lengths])


def test_merge_puts_rows_back_in_item_order():
    merged = merge_generations([([2, 0], gen_of([[20], [0, 0]])), ([1], gen_of([[10, 10, 10]]))], 3)
    assert merged.tokens == [[0, 0], [10, 10, 10], [20]]
    assert merged.lengths == [2, 3, 1]
    assert merged.generated_tokens == 6 and merged.prefill_tokens == 6 and merged.untrimmed_steps == 4 + 3
    assert merged.margins is None and merged.top1 is None
    with_m = merge_generations([([1, 0], gen_of([[1], [2, 2]], margins=True))], 2)
    assert with_m.margins == [[0.5, 0.5], [0.5]] and with_m.top2 == [[2, 2], [2]]
    with pytest.raises(ValueError, match="cover"):
        merge_generations([([0], gen_of([[1]]))], 2)


@pytest.fixture(scope="module")
def model():
    return make_random_qwen3(seed=9, vocab=64)


@pytest.fixture(scope="module")
def items():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(1, 63, (int(n),), generator=g).tolist() for n in torch.randint(1, 10, (11,), generator=g)]


@pytest.mark.parametrize("schedule,engine_name", [("fixed", "reference"), ("fixed", "static"),
                                                  ("length_sorted", "static"), ("refill", "static")])
def test_every_schedule_gives_the_per_item_reference_answer(model, items, schedule, engine_name):
    """In float32 batch composition changes nothing but rounding: each item's greedy tokens are the same."""
    per_item = [engine.generate(model, [p], max_new_tokens=9, eos_id=5, pad_id=PAD, temperature=0, top_p=1.0)
                for p in items]
    out = decode_readout(model, items, schedule=schedule, engine=engine_name, batch_size=4, max_new_tokens=9,
                         eos_id=5, pad_id=PAD, slots=3)
    assert out.tokens == [g.tokens[0] for g in per_item]
    assert out.finished == [g.finished[0] for g in per_item]
    assert out.prefill_tokens == sum(map(len, items))


def test_fixed_schedule_is_the_papers_batching(model, items, monkeypatch):
    seen = []
    real = engine.generate

    def spy(model, prompts, **kw):
        seen.append([next(i for i, item in enumerate(items) if item is p) for p in prompts])
        return real(model, prompts, **kw)

    monkeypatch.setitem(engines.ENGINES._options, "reference", engines.Option("reference", spy))
    decode_readout(model, items, schedule="fixed", engine="reference", batch_size=4, max_new_tokens=2, eos_id=5,
                   pad_id=PAD)
    assert seen == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]


def test_unknown_names_and_refill_without_a_refilling_engine(model, items):
    assert SCHEDULES.names() == ["fixed", "length_sorted", "refill"] and SCHEDULES["refill"].reads == ("slots",)
    kw = dict(batch_size=4, max_new_tokens=2, eos_id=5, pad_id=PAD)
    valid = r"valid: \['fixed', 'length_sorted', 'refill'\]"
    with pytest.raises(ValueError, match=r"unknown read-out schedule 'sorted'; " + valid):
        decode_readout(model, items, schedule="sorted", engine="static", **kw)
    with pytest.raises(ValueError, match="needs engine 'static' or 'vllm'"):
        decode_readout(model, items, schedule="refill", engine="reference", **kw)
    with pytest.raises(ValueError, match="unknown rollout engine"):
        decode_readout(model, items, schedule="fixed", engine="fast", **kw)

"""Continuous refill (`rollout.refill.generate_refill`) against the reference engine on CPU.

Batch composition changes only rounding, so in float32 the tokens, lengths and finished flags of
every prompt equal the reference engine's; margins agree to float32 noise.
"""

from __future__ import annotations

import pytest
import torch

from rlvr_sweep.rollout import engine, generate_refill
from tests.conftest import make_random_qwen3

PAD = 0


@pytest.fixture(scope="module")
def model():
    return make_random_qwen3(seed=7, vocab=64)


@pytest.fixture(scope="module")
def prompts():
    g = torch.Generator().manual_seed(0)
    lens = torch.randint(1, 12, (23,), generator=g).tolist()
    return [torch.randint(1, 63, (n,), generator=g).tolist() for n in lens]


@pytest.fixture(scope="module")
def eos(model, prompts) -> int:
    """The token most rows emit greedily within 16 steps, so rows stop at many different lengths."""
    free = engine.generate(model, prompts, max_new_tokens=16, eos_id=None, pad_id=PAD, temperature=0, top_p=1.0)
    counts = torch.bincount(torch.tensor([row[0] for row in free.tokens] + sum(free.tokens, [])), minlength=64)
    return int(counts[1:].argmax()) + 1


@pytest.mark.parametrize("slots,harvest_every", [(4, 16), (5, 1), (3, 7), (23, 4), (40, 2)])
def test_greedy_equals_reference_per_prompt(model, prompts, eos, slots, harvest_every):
    ref = engine.generate(model, prompts, max_new_tokens=16, eos_id=eos, pad_id=PAD, temperature=0, top_p=1.0,
                          record_margins=True)
    out = generate_refill(model, prompts, slots=slots, max_new_tokens=16, eos_id=eos, pad_id=PAD, temperature=0,
                          top_p=1.0, record_margins=True, harvest_every=harvest_every)
    assert any(ref.finished) and not all(ref.finished)
    assert out.tokens == ref.tokens and out.lengths == ref.lengths and out.finished == ref.finished
    assert out.top1 == ref.top1
    for a, b in zip(out.margins, ref.margins):
        assert a == pytest.approx(b, abs=1e-4)
    assert out.prefill_tokens == ref.prefill_tokens and out.generated_tokens == ref.generated_tokens
    assert out.generated_tokens <= out.untrimmed_steps  # slot-steps, idle slots included
    assert out.untrimmed_steps % min(slots, len(prompts)) == 0


def test_per_prompt_caps_and_no_eos(model, prompts):
    caps = [1 + (i * 5) % 13 for i in range(len(prompts))]
    out = generate_refill(model, prompts, slots=6, max_new_tokens=caps, eos_id=-1, pad_id=PAD, temperature=0,
                          top_p=1.0)
    ref = engine.generate(model, prompts, max_new_tokens=max(caps), eos_id=None, pad_id=PAD, temperature=0,
                          top_p=1.0)
    assert out.lengths == caps and not any(out.finished)
    assert out.tokens == [row[:n] for row, n in zip(ref.tokens, caps)]
    assert sum(caps) <= out.untrimmed_steps <= sum(caps) + 6 * (max(caps) + 16)  # waits for a boundary only


def test_sampled_reproducible_and_within_caps(model, prompts, eos):
    kw = dict(slots=5, max_new_tokens=10, eos_id=eos, pad_id=PAD, temperature=0.8, top_p=0.9)
    a = generate_refill(model, prompts, generator=torch.Generator().manual_seed(3), **kw)
    b = generate_refill(model, prompts, generator=torch.Generator().manual_seed(3), **kw)
    assert a == b
    for toks, n, fin in zip(a.tokens, a.lengths, a.finished):
        assert len(toks) == n <= 10 and (toks[-1] == eos) == fin and eos not in toks[:-1]


def test_padded_prefill_accounting(model):
    prompts = [[1, 2, 3], [4], [5, 6]]
    out = generate_refill(model, prompts, slots=3, max_new_tokens=2, eos_id=None, pad_id=PAD, temperature=0,
                          top_p=1.0)
    assert out.prefill_tokens == 6 and out.padded_prefill_tokens == 9  # one admission of width 3


def test_edge_cases(model):
    kw = dict(eos_id=0, pad_id=PAD, temperature=0, top_p=1.0)
    assert generate_refill(model, [], slots=4, max_new_tokens=3, **kw).tokens == []
    out = generate_refill(model, [[1], [2, 3]], slots=4, max_new_tokens=0, record_margins=True, **kw)
    assert out.tokens == [[], []] and out.margins == [[], []]
    with pytest.raises(ValueError, match="at least one token"):
        generate_refill(model, [[1], []], slots=2, max_new_tokens=3, **kw)
    with pytest.raises(ValueError, match="slots"):
        generate_refill(model, [[1]], slots=0, max_new_tokens=3, **kw)
    with pytest.raises(ValueError, match="caps"):
        generate_refill(model, [[1], [2]], slots=2, max_new_tokens=[3], **kw)


def test_gpu_shapes_on_cpu(prompts, eos):
    """Row bucket (inert rows), bucketed windows: the refill loop as it runs on a GPU, eagerly."""
    from rlvr_sweep.rollout import static_engine

    model = make_random_qwen3(seed=7, vocab=64)
    static_engine.session_for(model, gpu_like=True)
    ref = engine.generate(model, prompts, max_new_tokens=16, eos_id=eos, pad_id=PAD, temperature=0, top_p=1.0)
    out = generate_refill(model, prompts, slots=5, max_new_tokens=16, eos_id=eos, pad_id=PAD, temperature=0,
                          top_p=1.0)
    assert static_engine.session_for(model).slots.keys() == {8}  # 5 slots -> an 8-row bucket
    assert out.tokens == ref.tokens and out.finished == ref.finished

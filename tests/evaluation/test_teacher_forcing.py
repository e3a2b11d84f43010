"""The unpadded teacher-forced pass reproduces what greedy decoding recorded (float32, random tiny Qwen3)."""

from __future__ import annotations

import pytest
import torch

from rlvr_sweep.evaluation.teacher_forcing import agreement, teacher_forced
from rlvr_sweep.rollout import engine
from tests.conftest import make_random_qwen3

EOS = PAD = 63


@pytest.fixture(scope="module")
def model():
    return make_random_qwen3(seed=11, vocab=64)


@pytest.mark.parametrize("prompt", [[5, 9, 2], [1], [7, 7, 7, 7, 30, 12]])
def test_margins_and_ids_equal_the_decoders_record(model, prompt):
    gen = engine.generate(model, [prompt], max_new_tokens=12, eos_id=None, pad_id=PAD, temperature=0, top_p=1.0,
                          record_margins=True)
    tokens = gen.tokens[0]
    tf = teacher_forced(model, prompt, tokens)
    torch.testing.assert_close(torch.tensor(tf.margins), torch.tensor(gen.margins[0]), atol=1e-5, rtol=0)
    assert tf.top1 == gen.top1[0] == tokens  # greedy: the recorded token is the top-1
    assert tf.top2 == gen.top2[0]
    assert agreement(tf, tokens) == [True] * len(tokens)


def test_log_probabilities_of_forced_tokens(model):
    prompt, forced = [3, 4, 5], [10, 20, 30, 40]
    tf = teacher_forced(model, prompt, forced)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + forced])).logits[0].float()
    logp = torch.log_softmax(logits[len(prompt) - 1: -1], dim=-1)
    want = logp[torch.arange(4), torch.tensor(forced)]
    torch.testing.assert_close(torch.tensor(tf.logprob), want, atol=1e-5, rtol=0)
    top = logits[len(prompt) - 1: -1].topk(2)
    assert tf.top1 == top.indices[:, 0].tolist()
    assert agreement(tf, forced) == [a == b for a, b in zip(tf.top1, forced)]


def test_edge_cases(model):
    assert teacher_forced(model, [1, 2], []).margins == []
    with pytest.raises(ValueError, match="prompt"):
        teacher_forced(model, [], [1])
    model.train()
    teacher_forced(model, [1], [2])
    assert model.training  # the caller's mode is restored
    model.eval()

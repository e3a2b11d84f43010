"""The sampler a captured step holds (`rollout.graph_sampler`) against `engine.sample_next_token`: the same tokens
from the same generator, which it leaves in the same state; candidate sets decide the rows they claim to, as the
full sort would, and hand back the rows they cannot (equal values across the cut, mass short of top-p, a zero in
the noise)."""

from __future__ import annotations

import pytest
import torch

from rlvr_sweep.rollout.engine import sample_next_token
from rlvr_sweep.rollout.graph_sampler import candidate_tokens, noise, probabilities, sorted_tokens

KINDS = ("peaked", "ties", "flat", "plain")


def _logits(kind: str, batch: int, vocab: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, vocab, generator=g)
    if kind == "peaked":  # a few tokens hold most of the mass
        logits[:, :12] += torch.linspace(9, 3, 12)
    elif kind == "ties":  # many exactly equal values near the top
        logits[:, : vocab // 4] = (logits[:, : vocab // 4] * 2).round() + 5
    elif kind == "flat":
        logits *= 0.01
    return logits.to(dtype)


@pytest.mark.parametrize("vocab", [400, 151_936])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("temperature,top_p", [(0.8, 0.9), (1.0, 0.5), (0.6, 1.0), (1.0, None), (0.7, 0.0)])
def test_the_sorted_draw_is_multinomial_s_draw_and_leaves_the_generator_where_it_does(vocab, dtype, temperature, top_p):
    for i, kind in enumerate(KINDS):
        logits = _logits(kind, 8, vocab, dtype, seed=i + vocab)
        want_gen, got_gen = torch.Generator().manual_seed(i), torch.Generator().manual_seed(i)
        want = sample_next_token(logits, temperature, top_p, want_gen)
        probs = probabilities(logits, temperature)
        got = sorted_tokens(probs, top_p, noise(probs, got_gen))
        assert torch.equal(got, want), kind
        assert torch.equal(got_gen.get_state(), want_gen.get_state())
        # and the next draw too: the generators moved by the same amount
        assert torch.equal(torch.rand(4, generator=got_gen), torch.rand(4, generator=want_gen))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("top_p", [0.9, 0.5, 0.0])
def test_candidates_decide_rows_as_the_full_sort_does_and_hand_back_the_rest(dtype, top_p):
    vocab, k = 4096, 64
    decided_rows = undecided_rows = 0
    for seed in range(6):
        logits = torch.cat([_logits(kind, 4, vocab, dtype, seed=seed * 10 + j) for j, kind in enumerate(KINDS)])
        probs = probabilities(logits, 0.8)
        q = noise(probs, torch.Generator().manual_seed(seed))
        tokens, decided = candidate_tokens(probs, top_p, q, k)
        want = sorted_tokens(probs, top_p, q)
        assert torch.equal(tokens[decided], want[decided])
        decided_rows += int(decided.sum())
        undecided_rows += int((~decided).sum())
        flat = slice(8, 12)  # the flat rows: 64 candidates never hold 0.5 of 4,096 near-equal tokens
        if top_p >= 0.5:
            assert not decided[flat].any()
        assert decided[:4].sum() >= 3  # peaked rows: a few tokens hold the mass (bf16 may round two together at the cut)
    assert decided_rows >= 24 and (undecided_rows >= 24 if top_p >= 0.5 else True)  # both paths taken


def test_equal_values_across_the_cut_are_left_to_the_sort():
    probs = torch.tensor([[0.5, 0.2, 0.2, 0.1, 0.0, 0.0]])  # top_p 0.6: one 0.2 is kept and the other is not
    q = torch.ones_like(probs)
    _, decided = candidate_tokens(probs, 0.6, q, 4)
    assert not decided.any()
    tokens, decided = candidate_tokens(probs, 0.75, q, 4)  # both 0.2 kept: decided, the top token drawn
    assert decided.all() and tokens.tolist() == [0]


def test_an_exact_tie_in_the_draw_goes_to_the_smallest_token_id_as_argmax_does():
    probs = torch.zeros(1, 10)
    probs[0, 7], probs[0, 3], probs[0, 9] = 0.4, 0.4, 0.2  # topk lists 3 and 7 in its own order
    q = torch.ones_like(probs)
    tokens, decided = candidate_tokens(probs, 0.7, q, 5)
    assert decided.all()
    assert tokens.tolist() == sorted_tokens(probs, 0.7, q).tolist() == [3]


def test_a_zero_in_the_noise_is_left_to_the_sort():
    probs = torch.softmax(_logits("peaked", 2, 400, torch.float32, seed=1), dim=-1)
    q = torch.ones_like(probs)
    q[1, 300] = 0.0  # 0 / 0 is NaN there, which argmax would pick
    tokens, decided = candidate_tokens(probs, 0.9, q, 32)
    assert decided.tolist() == [True, False]
    assert tokens[0] == sorted_tokens(probs, 0.9, q)[0]
    assert sorted_tokens(probs, 0.9, q)[1] == 300

"""Loss recipes agree; zero-grad AdamW stepping is bitwise identical to zero-weighted backward."""

import copy

import pytest
import torch

from rlvr_sweep.update.losses import pack_sequences, policy_loss, token_logprobs
from rlvr_sweep.update.optim import apply_update, make_adamw
from tests.conftest import make_random_qwen3

PROMPT = [3, 4, 5, 6]
COMPLETIONS = [[7, 8, 9, 63], [10, 11], [12, 13, 14, 15, 16], [17, 63], [7, 7, 7], [20], [21, 22, 63], [30, 31, 32, 33]]


def group_loss(model, advantages, recipe, completions=COMPLETIONS):
    ids, attn, cmask = pack_sequences([PROMPT] * len(completions), completions, pad_id=63)
    start = len(PROMPT) - 1
    logps = token_logprobs(model, ids, attn, start)
    return policy_loss(logps, cmask[:, start:], advantages, recipe, group_size=len(completions))


def grads(model):
    return [p.grad.detach().clone() for p in model.parameters()]


def test_pack_sequences_masks_only_completion_tokens():
    ids, attn, cmask = pack_sequences([[1, 2, 3], [1, 2]], [[4, 5], [6]], pad_id=0)
    assert ids.tolist() == [[1, 2, 3, 4, 5], [1, 2, 6, 0, 0]]
    assert attn.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    # position j predicts token j+1: completion tokens 4, 5 are predicted at j = 2, 3; token 6 at j = 1
    assert cmask.tolist() == [[False, False, True, True], [False, True, False, False]]


def test_summed_logprob_matches_a_loop_over_tokens(random_qwen3):
    ids, attn, cmask = pack_sequences([PROMPT], [COMPLETIONS[0]], pad_id=63)
    logps = token_logprobs(random_qwen3, ids, attn)
    total = (logps * cmask).sum()
    expected = 0.0
    seq = PROMPT + COMPLETIONS[0]
    for t in range(len(PROMPT), len(seq)):
        logits = random_qwen3(input_ids=torch.tensor([seq[:t]])).logits[0, -1].float()
        expected += torch.log_softmax(logits, -1)[seq[t]].item()
    assert total.item() == pytest.approx(expected, abs=1e-4)


def test_two_loss_recipes_give_the_same_gradient(random_qwen3):
    advantages = torch.tensor([2.474, -0.354, -0.354, -0.354, -0.354, -0.354, -0.354, -0.354])
    model_b = copy.deepcopy(random_qwen3)
    group_loss(random_qwen3, advantages, "sum_then_scale").backward()
    group_loss(model_b, advantages, "scale_then_sum").backward()
    for ga, gb in zip(grads(random_qwen3), grads(model_b)):
        torch.testing.assert_close(ga, gb, rtol=1e-5, atol=1e-6)
    assert any(g.abs().max() > 0 for g in grads(random_qwen3))


def test_unknown_recipe_is_named():
    with pytest.raises(ValueError, match="scale_then_sum"):
        policy_loss(torch.zeros(1, 1), torch.ones(1, 1, dtype=torch.bool), torch.zeros(1), "mean", 1)


# A fixed trajectory: active steps carry these advantages, homogeneous steps all zeros.
TRAJECTORY = [True, False, True, False, False, True, False]
ACTIVE_ADV = torch.tensor([1.62, 1.62, -0.54, -0.54, -0.54, -0.54, -0.54, -0.54])


def run_trajectory(homogeneous_step: str):
    model = make_random_qwen3(seed=1)
    params = list(model.parameters())
    opt = make_adamw(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    actions = []
    for active in TRAJECTORY:
        adv = ACTIVE_ADV if active else torch.zeros(8)
        outcome = apply_update(
            params, opt, active=active, homogeneous_step=homogeneous_step,
            backward=lambda: group_loss(model, adv, "scale_then_sum").backward(), grad_clip=1.0,
        )
        actions.append(outcome.action)
    return model, opt, actions


def max_abs_diff(a, b) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a, b))


def adam_state(model, opt, key):
    return [opt.state[p][key] for p in model.parameters()]


def test_zero_grad_is_bitwise_identical_to_zero_weighted_full_backward():
    full_model, full_opt, full_actions = run_trajectory("full_backward")
    zero_model, zero_opt, zero_actions = run_trajectory("zero_grad")
    assert full_actions == ["backward_step"] * len(TRAJECTORY)
    assert zero_actions == ["backward_step", "zero_grad_step", "backward_step", "zero_grad_step",
                            "zero_grad_step", "backward_step", "zero_grad_step"]
    assert max_abs_diff(full_model.parameters(), zero_model.parameters()) == 0.0
    for key in ("exp_avg", "exp_avg_sq", "step"):
        assert max_abs_diff(adam_state(full_model, full_opt, key), adam_state(zero_model, zero_opt, key)) == 0.0
    assert adam_state(zero_model, zero_opt, "step")[0].item() == len(TRAJECTORY)


def test_skip_differs_from_zero_grad():
    zero_model, zero_opt, _ = run_trajectory("zero_grad")
    skip_model, skip_opt, skip_actions = run_trajectory("skip")
    assert skip_actions.count("skipped") == TRAJECTORY.count(False)
    assert adam_state(skip_model, skip_opt, "step")[0].item() == TRAJECTORY.count(True)
    assert max_abs_diff(zero_model.parameters(), skip_model.parameters()) > 0.0
    assert max_abs_diff(adam_state(zero_model, zero_opt, "exp_avg"), adam_state(skip_model, skip_opt, "exp_avg")) > 0.0

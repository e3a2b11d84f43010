"""The objectives, aggregation modes and KL estimators by hand, against the peers' formulas written out
(TRL `GRPOTrainer._compute_loss` at f2cd577, verl `core_algos.py` at b178a3c), and the paper's gradient
from `ppo_clip` with one pass over one mini-batch."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from rlvr_sweep.credit import KINDS, BoundEstimator, Credit, grpo_advantages
from rlvr_sweep.rollout import Leaf, Pair, RolloutGroup
from rlvr_sweep.update import (
    OBJECTIVES, Normaliser, Objective, ScoredGroup, UpdateSettings, aggregate, backward, kl_estimate, make_adamw,
    token_entropy, update_step,
)
from rlvr_sweep.update.objectives import cispo, gspo, ppo_clip, reinforce
from tests.conftest import make_random_qwen3

ONE = torch.ones(1, 1, dtype=torch.bool)


def log(x: float) -> torch.Tensor:
    return torch.tensor([[math.log(x)]])


# ------------------------------------------------------------------ hand values
def test_ppo_clip_by_hand():
    """eps 0.2: r = 1.5, A = +1 -> -min(1.5, 1.2) = -1.2, held at the high bound; r = 0.5, A = -1 ->
    -min(-0.5, -0.8) = 0.8, held at the low bound; r = 1.1, A = +1 -> -1.1, inside."""
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1]]))
    old = torch.zeros(1, 3)
    adv = torch.tensor([[1.0, -1.0, 1.0]])
    s = ppo_clip(logp, old, adv, torch.ones(1, 3, dtype=torch.bool), clip_low=0.2, clip_high=0.2)
    assert s.loss.tolist()[0] == pytest.approx([-1.2, 0.8, -1.1], abs=1e-6)
    assert s.clipped_high.tolist() == [[True, False, False]]
    assert s.clipped_low.tolist() == [[False, True, False]]
    assert s.ratio.tolist()[0] == pytest.approx([1.5, 0.5, 1.1], abs=1e-6)


def test_clip_higher_and_the_dual_clip_by_hand():
    """clip-higher 0.2 / 0.28: r = 1.25, A = +1 is inside [0.8, 1.28] -> -1.25 (clipped at 1.2 with 0.2 / 0.2).
    Dual clip c = 3: r = 4, A = -1 -> min(max(4, 1.2), 3) = 3 (4 without it); a positive advantage is untouched."""
    logp, old, adv = log(1.25), torch.zeros(1, 1), torch.ones(1, 1)
    assert ppo_clip(logp, old, adv, ONE, clip_low=0.2, clip_high=0.28).loss.item() == pytest.approx(-1.25)
    assert ppo_clip(logp, old, adv, ONE, clip_low=0.2, clip_high=0.2).loss.item() == pytest.approx(-1.2)
    neg = -torch.ones(1, 1)
    assert ppo_clip(log(4.0), old, neg, ONE, clip_dual=3.0).loss.item() == pytest.approx(3.0)
    assert ppo_clip(log(4.0), old, neg, ONE).loss.item() == pytest.approx(4.0)
    assert ppo_clip(log(4.0), old, adv, ONE, clip_dual=3.0).loss.item() == pytest.approx(-1.2)


def test_gspo_takes_one_length_normalised_ratio_per_sequence():
    """Token log-ratios (0.2, 0.4) and a padded third token: s = exp(0.3) = 1.3499 on both tokens; eps 3e-4 / 4e-4
    hold A = +1 at 1.0004 (clipped high) and leave A = -1 unclipped at 1.3499."""
    old = torch.zeros(2, 3)
    logp = torch.tensor([[0.2, 0.4, 5.0], [0.2, 0.4, 5.0]], requires_grad=True)
    mask = torch.tensor([[True, True, False], [True, True, False]])
    adv = torch.tensor([[1.0], [-1.0]])
    s = gspo(logp, old, adv, mask, clip_low=3e-4, clip_high=4e-4)
    assert s.ratio[:, :2].flatten().tolist() == pytest.approx([math.exp(0.3)] * 4, abs=1e-6)
    assert s.loss[0, :2].tolist() == pytest.approx([-1.0004] * 2, abs=1e-6)
    assert s.loss[1, :2].tolist() == pytest.approx([math.exp(0.3)] * 2, abs=1e-6)
    assert s.clipped_high[0, :2].all() and not s.clipped_high[1].any() and not s.clipped_low.any()
    # gradient of token t: s_i * d log pi_t (GSPO-token), 0 where the clip holds
    (s.loss * mask).sum().backward()
    assert logp.grad[1, :2].tolist() == pytest.approx([math.exp(0.3)] * 2, abs=1e-6)
    assert logp.grad[0].abs().max() == 0


def test_cispo_clips_the_weight_and_keeps_the_gradient():
    """r = 2, A = +1, eps_high 0.28: weight 1.28, loss -1.28 log pi, d loss / d log pi = -1.28 (PPO's clip would
    give no gradient here); with clip_low = 1, r = 0.01 keeps its weight 0.01."""
    logp = torch.tensor([[math.log(2.0), math.log(0.01)]], requires_grad=True)
    s = cispo(logp, torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2, dtype=torch.bool), clip_low=1.0,
              clip_high=0.28)
    s.loss.sum().backward()
    assert logp.grad.tolist()[0] == pytest.approx([-1.28, -0.01], abs=1e-6)
    assert s.clipped_high.tolist() == [[True, False]] and not s.clipped_low.any()


def test_aggregation_modes_by_hand():
    """Losses (1, 2) and (3, -) (a 1-token rollout), G = 2, L = 4."""
    loss = torch.tensor([[1.0, 2.0], [3.0, 99.0]])
    mask = torch.tensor([[True, True], [True, False]])
    expected = {"token_sum_over_g": 3.0, "token_mean": 2.0, "seq_mean_token_mean": 2.25, "seq_mean_token_sum": 3.0,
                "seq_mean_token_sum_norm": 0.75}
    for mode, value in expected.items():
        norm = Normaliser.of(mode, [2, 1], [True, True], max_len=4)
        assert aggregate(loss, mask, 2, norm).item() == pytest.approx(value), mode
    # chunks of one mini-batch add up to its loss
    for mode, value in expected.items():
        norm = Normaliser.of(mode, [2, 1], [True, True], max_len=4)
        parts = aggregate(loss[:1], mask[:1], 2, norm) + aggregate(loss[1:], mask[1:], 2, norm)
        assert parts.item() == pytest.approx(value), mode
    with pytest.raises(ValueError, match="token_mean"):
        Normaliser("mean", 1, 1, 1)


def test_kl_estimators_and_entropy_by_hand():
    lp, ref = torch.log(torch.tensor([0.5])), torch.log(torch.tensor([0.25]))
    ln2 = math.log(2)
    assert kl_estimate(lp, ref, "k1").item() == pytest.approx(ln2)
    assert kl_estimate(lp, ref, "k2").item() == pytest.approx(ln2 ** 2 / 2)
    assert kl_estimate(lp, ref, "k3").item() == pytest.approx(0.5 - 1 + ln2)
    assert kl_estimate(lp, lp, "k3").item() == 0.0
    with pytest.raises(ValueError, match="k1"):
        kl_estimate(lp, ref, "k4")
    uniform = torch.log_softmax(torch.zeros(1, 2, 4), -1)
    peaked = torch.log_softmax(torch.tensor([[[0.0, -1e4, -1e4, -1e4]]]), -1)
    assert token_entropy(uniform).flatten().tolist() == pytest.approx([math.log(4)] * 2)
    assert token_entropy(peaked).item() == pytest.approx(0.0, abs=1e-6)


# ------------------------------------------------------------------ the peers' formulas, written out
def trl_token_loss(logp, old, adv, eps_low, eps_high):
    """TRL grpo_trainer.py L3054-3110, importance_sampling_level="token", loss_type in {grpo, dapo, ...}."""
    coef_1 = torch.exp(logp - old)
    coef_2 = torch.clamp(coef_1, 1 - eps_low, 1 + eps_high)
    return -torch.min(coef_1 * adv, coef_2 * adv)


def verl_vanilla(logp, old, adv, low, high, c):
    """verl compute_policy_loss_vanilla (L1159-1250), dual clip c."""
    ratio = torch.exp(torch.clamp(logp - old, min=-20.0, max=20.0))
    pg_losses1 = -adv * ratio
    pg_losses2 = -adv * torch.clamp(ratio, 1 - low, 1 + high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_losses3 = -adv * c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    return torch.where(adv < 0, clip_pg_losses2, clip_pg_losses1)


def verl_gspo(logp, old, adv, mask, low, high):
    """verl compute_policy_loss_gspo (L1253-1326) before its aggregation."""
    negative_approx_kl = logp - old
    seq_lengths = torch.sum(mask, dim=-1).clamp(min=1)
    negative_approx_kl_seq = torch.sum(negative_approx_kl * mask, dim=-1) / seq_lengths
    log_seq = logp - logp.detach() + negative_approx_kl_seq.detach().unsqueeze(-1)
    seq_ratio = torch.exp(torch.clamp(log_seq, max=10.0))
    return torch.maximum(-adv * seq_ratio, -adv * torch.clamp(seq_ratio, 1 - low, 1 + high))


def trl_sequence_level_grpo(logp, old, adv, mask, eps_low, eps_high):
    """TRL importance_sampling_level="sequence", loss_type="grpo" (its GSPO recipe): the whole loss."""
    log_ratio = logp - old
    w = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    coef_1 = torch.exp(w)
    coef_2 = torch.clamp(coef_1, 1 - eps_low, 1 + eps_high)
    per_token_loss = -torch.min(coef_1 * adv, coef_2 * adv)
    return ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()


def verl_cispo(logp, old, adv, low, high):
    """verl compute_policy_loss_cispo (L1721-1779)."""
    ratio = torch.exp(torch.clamp(logp - old, min=-20.0, max=20.0))
    return -torch.clamp(ratio, 1 - low, 1 + high).detach() * adv * logp


def trl_cispo(logp, old, adv, eps_high):
    """TRL loss_type="cispo": an absolute cap on r from above."""
    return -torch.clamp(torch.exp(logp - old), max=eps_high).detach() * adv * logp


@pytest.fixture
def batch():
    """Four sequences of up to 5 tokens, ratios spread over [0.5, 2], advantages of both signs."""
    g = torch.Generator().manual_seed(7)
    old = -torch.rand(4, 5, generator=g) * 3
    logp = (old + (torch.rand(4, 5, generator=g) - 0.5) * 1.4).requires_grad_(True)
    adv = (torch.rand(4, 1, generator=g) - 0.5) * 4
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 0]], dtype=torch.bool)
    return logp, old, adv.expand(4, 5), mask


def grad_of(loss, x):
    (g,) = torch.autograd.grad(loss, x)
    return g


def test_ppo_clip_meets_trl_and_verl(batch):
    logp, old, adv, mask = batch
    ours = ppo_clip(logp, old, adv, mask, clip_low=0.2, clip_high=0.28)
    torch.testing.assert_close(ours.loss, trl_token_loss(logp, old, adv, 0.2, 0.28), atol=1e-6, rtol=0)
    assert ours.clipped_low.any() and ours.clipped_high.any()  # both bounds bite on these tensors
    dual = ppo_clip(logp, old, adv, mask, clip_low=0.2, clip_high=0.28, clip_dual=1.5)
    theirs = verl_vanilla(logp, old, adv, 0.2, 0.28, 1.5)
    torch.testing.assert_close(dual.loss, theirs, atol=1e-6, rtol=0)
    torch.testing.assert_close(grad_of((dual.loss * mask).sum(), logp), grad_of((theirs * mask).sum(), logp),
                               atol=1e-6, rtol=0)
    # TRL's token-level clip metrics: low needs A < 0, high A > 0
    r = torch.exp(logp - old).detach()
    assert torch.equal(ours.clipped_low, (r < 0.8) & (adv < 0))
    assert torch.equal(ours.clipped_high, (r > 1.28) & (adv > 0))


def test_gspo_meets_verl_and_trl(batch):
    logp, old, adv, mask = batch
    ours = gspo(logp, old, adv, mask, clip_low=0.05, clip_high=0.1)
    theirs = verl_gspo(logp, old, adv, mask, 0.05, 0.1)
    torch.testing.assert_close(ours.loss, theirs, atol=1e-6, rtol=0)
    norm = Normaliser.of("seq_mean_token_mean", mask.sum(-1).tolist(), [True] * 4, 5)
    loss = aggregate(ours.loss, mask, 4, norm)
    trl = trl_sequence_level_grpo(logp, old, adv[:, :1], mask, 0.05, 0.1)
    assert loss.item() == pytest.approx(trl.item(), abs=1e-6)
    torch.testing.assert_close(grad_of(loss, logp), grad_of(trl, logp), atol=1e-6, rtol=0)


def test_cispo_meets_verl_and_trl(batch):
    logp, old, adv, mask = batch
    ours = cispo(logp, old, adv, mask, clip_low=0.2, clip_high=0.28)
    theirs = verl_cispo(logp, old, adv, 0.2, 0.28)
    torch.testing.assert_close(ours.loss, theirs, atol=1e-6, rtol=0)
    torch.testing.assert_close(grad_of(ours.loss.sum(), logp), grad_of(theirs.sum(), logp), atol=1e-6, rtol=0)
    capped = cispo(logp, old, adv, mask, clip_low=1.0, clip_high=0.5)  # TRL's epsilon_high = 1.5
    torch.testing.assert_close(capped.loss, trl_cispo(logp, old, adv, 1.5), atol=1e-6, rtol=0)


def test_kl_estimators_meet_trl_and_verl(batch):
    logp, ref, _, _ = batch
    trl_k3 = torch.exp(ref - logp) - (ref - logp) - 1
    kl = torch.clamp(ref - logp, min=-20, max=20)
    verl = {"k1": logp - ref, "k2": 0.5 * (logp - ref).square(), "k3": torch.clamp(torch.exp(kl) - kl - 1, -10, 10)}
    torch.testing.assert_close(kl_estimate(logp, ref, "k3"), trl_k3, atol=1e-6, rtol=0)
    for name, theirs in verl.items():
        torch.testing.assert_close(kl_estimate(logp, ref, name), theirs, atol=1e-6, rtol=0)


def test_aggregations_meet_verl_and_trl(batch):
    loss, _, _, mask = batch
    loss, m = loss.detach(), mask.float()
    lengths = mask.sum(-1).tolist()
    theirs = {
        "token_mean": (loss * m).sum() / m.sum(),  # verl token-mean; TRL dapo / bnpo
        "seq_mean_token_mean": ((loss * m).sum(-1) / m.sum(-1)).mean(),  # verl seq-mean-token-mean; TRL grpo
        "seq_mean_token_sum": (loss * m).sum(-1).mean(),  # verl seq-mean-token-sum
        "seq_mean_token_sum_norm": (loss * m).sum() / (loss.size(0) * 7),  # TRL dr_grpo, max_completion_length 7
    }
    for mode, value in theirs.items():
        norm = Normaliser.of(mode, lengths, [True] * 4, max_len=7)
        assert aggregate(loss, mask, 4, norm).item() == pytest.approx(value.item(), abs=1e-6), mode


# ------------------------------------------------------------------ the paper's gradient from ppo_clip
PAD, PROMPT = 63, [3, 4, 5]
COMPLETIONS = [[7, 8, 9, 63], [10, 11], [12, 13, 14, 15, 16], [17, 63], [7, 7, 7], [20], [21, 22, 63], [30, 31]]


def flat_group(rewards) -> ScoredGroup:
    leaves = [Leaf(c, 0, c[-1] == PAD) for c in COMPLETIONS]
    pairs = [Pair(k, "flat", leaves[2 * k: 2 * k + 2], 0, 0, 0) for k in range(4)]
    r = torch.tensor(rewards, dtype=torch.float32).view(4, 2)
    adv = grpo_advantages(r.flatten()).view(4, 2)
    return ScoredGroup(RolloutGroup(pairs, 0, 0, 0, 0), [""] * 8, r, r.clone(), Credit(adv.clone(), adv, True))


def grads_after(objective: Objective, group: ScoredGroup, seed: int = 5):
    model = make_random_qwen3(seed=seed)
    backward(model, PROMPT, group, pad_id=PAD, recipe="scale_then_sum", micro_batch=3, device="cpu",
             objective=objective)
    return [p.grad.clone() for p in model.parameters()]


def test_ppo_clip_with_one_pass_gives_exactly_the_papers_gradient():
    group = flat_group([1, 0, 0, 1, 0, 0, 0, 1])
    paper = grads_after(Objective(), group)
    clipped = grads_after(Objective("ppo_clip", OBJECTIVES["ppo_clip"].fn, "ratio", max_len=64), group)
    generic = grads_after(Objective("reinforce (generic path)", reinforce, max_len=64), group)  # not `paper_loss`
    assert all(torch.equal(a, b) for a, b in zip(paper, clipped))
    assert all(torch.equal(a, b) for a, b in zip(paper, generic))
    assert max(g.abs().max() for g in paper) > 1e-4


def settings(objective: Objective, reference=None) -> UpdateSettings:
    return UpdateSettings("full_backward", "scale_then_sum", None, False, 1.0, 0.0, PAD, "cpu", objective, reference)


def test_one_ppo_clip_update_with_one_pass_steps_to_the_papers_weights():
    group = flat_group([1, 0, 0, 1, 0, 0, 0, 1])
    weights = []
    for objective in (Objective(), Objective("ppo_clip", OBJECTIVES["ppo_clip"].fn, "ratio", max_len=64)):
        model = make_random_qwen3(seed=5)
        params = list(model.parameters())
        update_step(model, params, make_adamw(params, 1e-3, (0.9, 0.999), 1e-8, 0.01), [(PROMPT, group)],
                    settings(objective))
        weights.append([p.detach().clone() for p in params])
    assert all(torch.equal(a, b) for a, b in zip(*weights))


ADAM_EPS = 1e-4  # AdamW's eps: large enough that a near-zero gradient's rounding is not magnified into its step


def oracle_passes(model, group, *, passes, mini_batches, lr, beta=0.0, reference=None, eps=(0.2, 0.28)):
    """The schedule written out: behaviour log-probs once, then per pass and mini-batch one PPO-clip loss over
    that share's tokens (token mean), plus beta * k3 to the reference, clipped to norm 1, an AdamW step."""
    params = list(model.parameters())
    opt = make_adamw(params, lr, (0.9, 0.999), ADAM_EPS, 0.01)
    leaves = group.leaves
    adv = group.credit.cont.flatten()

    def logps(m, i):
        ids = torch.tensor([PROMPT + leaves[i].tokens])
        lp = torch.log_softmax(m(input_ids=ids).logits[0, :-1].float(), -1)
        return lp[len(PROMPT) - 1:].gather(-1, torch.tensor(leaves[i].tokens)[:, None]).squeeze(-1)

    with torch.no_grad():
        old = [logps(model, i) for i in range(8)]
        ref = [logps(reference, i) for i in range(8)] if reference is not None else None
    size = 8 // mini_batches
    for _ in range(passes):
        for lo in range(0, 8, size):
            opt.zero_grad()
            rows = range(lo, lo + size)
            tokens = sum(len(leaves[i].tokens) for i in rows)
            total = 0.0
            for i in rows:
                lp = logps(model, i)
                r = torch.exp(lp - old[i])
                loss = -torch.min(r * adv[i], torch.clamp(r, 1 - eps[0], 1 + eps[1]) * adv[i])
                if beta:
                    loss = loss + beta * (torch.exp(ref[i] - lp) - (ref[i] - lp) - 1)
                total = total + loss.sum() / tokens
            total.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
    return [p.detach().clone() for p in params]


@pytest.mark.parametrize("passes,mini_batches,beta", [(2, 1, 0.0), (2, 2, 0.0), (1, 4, 0.0), (2, 2, 0.5)])
def test_passes_and_mini_batches_match_the_schedule_written_out(passes, mini_batches, beta):
    group = flat_group([1, 0, 0, 1, 0, 0, 0, 1])
    objective = Objective("ppo_clip", OBJECTIVES["ppo_clip"].bind(
        type("C", (), {"clip_low": 0.2, "clip_high": 0.28, "clip_dual": None, "params": {}})()), "ratio",
        passes, mini_batches, "token_mean", kl_beta=beta, max_len=64)
    reference = make_random_qwen3(seed=9) if beta else None
    want = oracle_passes(make_random_qwen3(seed=5), group, passes=passes, mini_batches=mini_batches, lr=3e-2,
                         beta=beta, reference=reference)
    model = make_random_qwen3(seed=5)
    params = list(model.parameters())
    update = update_step(model, params, make_adamw(params, 3e-2, (0.9, 0.999), ADAM_EPS, 0.01), [(PROMPT, group)],
                         settings(objective, copy.deepcopy(reference)))
    start = [p.detach() for p in make_random_qwen3(seed=5).parameters()]
    moved = max(float((w - w0).abs().max()) for w, w0 in zip(want, start))
    assert moved > 1e-2  # lr 3e-2: every step moves the weights far more than the tolerance below
    for got, expected in zip(params, want):
        torch.testing.assert_close(got.detach(), expected, atol=1e-5, rtol=1e-4)
    assert update.optimizer_steps == passes * mini_batches
    tokens = sum(len(c) for c in COMPLETIONS)
    assert update.bwd_out == passes * tokens
    if passes * mini_batches > 1:  # the later steps see a moved policy
        assert update.signals["ratio_max"] > update.signals["ratio_min"]
    assert (update.signals["kl_ref"] > 0) == bool(beta)


def test_masked_truncated_rollouts_leave_the_loss_and_its_token_count():
    """DAPO's overlong filtering: the three rollouts that did not end on EOS give no gradient, and token_mean
    divides by the other five's tokens only."""
    group = flat_group([1, 0, 0, 1, 0, 0, 0, 1])
    kept = [i for i, c in enumerate(COMPLETIONS) if c[-1] == PAD]
    masked = Objective("ppo_clip", OBJECTIVES["ppo_clip"].fn, "ratio", aggregation="token_mean", mask_truncated=True,
                       max_len=64)
    got = grads_after(masked, group)
    # the same gradient from the kept rollouts alone, with their own token count
    only = ScoredGroup(RolloutGroup([Pair(0, "flat", [group.leaves[i] for i in kept], 0, 0, 0)], 0, 0, 0, 0), [""] * 5,
                       group.rewards, group.correct, Credit(group.credit.prefix.flatten()[kept][None],
                                                            group.credit.cont.flatten()[kept][None], True))
    plain = Objective("ppo_clip", OBJECTIVES["ppo_clip"].fn, "ratio", aggregation="token_mean", max_len=64)
    want = grads_after(plain, only)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-7, rtol=1e-5)


def test_the_engine_trainer_gap_by_hand():
    """Trainer minus engine log-probs (0.05, 0.2, -0.2) and a masked 9: |gap| mean 0.15, max 0.2; ratios
    exp(0.05) = 1.051 inside [0.9, 1.1], exp(0.2) = 1.221 and exp(-0.2) = 0.819 outside: 2 of 3. Measured in the
    first pass only."""
    from rlvr_sweep.update import Signals

    signals = Signals()
    engine = torch.zeros(1, 4)
    trainer = torch.tensor([[0.05, 0.2, -0.2, 9.0]])
    mask = torch.tensor([[True, True, True, False]])
    signals.observe_gap(mask, trainer, engine)
    signals.first_pass = False
    signals.observe_gap(mask, trainer + 5, engine)
    row = signals.row()
    assert row["logp_gap_mean"] == pytest.approx(0.15) and row["logp_gap_max"] == pytest.approx(0.2)
    assert row["logp_gap_outside"] == pytest.approx(2 / 3)


def test_a_flat_groups_engine_log_probs_meet_the_trainers_recompute():
    """A real flat group drawn with the reference engine on a random model: the first pass's recompute agrees with
    what the engine recorded to float32 rounding (CPU, the same weights); a tree leaf (no engine log-probs) adds none."""
    from rlvr_sweep.rollout import ModelPolicy, flat
    from rlvr_sweep.update import Signals, score_group

    model = make_random_qwen3(seed=2)
    policy = type("P", (), {"model": model, "eos_id": PAD, "pad_id": PAD, "tokenizer": None})()
    sampling = ModelPolicy(policy, temperature=0.8, top_p=0.9, generator=torch.Generator().manual_seed(1),
                           record_logprobs=True)
    group = flat(sampling, PROMPT, horizon=12, K=4, B=2)
    assert all(leaf.logprobs is not None and len(leaf.logprobs) == len(leaf.tokens) for leaf in group.leaves())
    scored = score_group(group, lambda ids: "", "1", reward=lambda texts, gold, tokens: ([1.0, 0.0] * 4, [1.0, 0.0] * 4),
                         estimator=BoundEstimator("centred", KINDS["leaf"], lambda r, shape: r - r.mean()))
    signals = Signals()
    backward(model, PROMPT, scored, pad_id=PAD, recipe="scale_then_sum", micro_batch=3, device="cpu", signals=signals)
    row = signals.row()
    assert signals.gap_tokens == sum(len(leaf.tokens) for leaf in group.leaves())
    assert row["logp_gap_max"] < 1e-4 and row["logp_gap_outside"] == 0.0
    with pytest.raises(ValueError, match=r"the run's reward gave this group rewards that are not all finite "
                                         r"\(\[1.0, nan, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0\]\)"):
        score_group(group, lambda ids: "", "1", reward=lambda texts, gold, tokens: ([1.0, math.nan] + [1.0, 0.0] * 3,
                                                                                     [1.0, 0.0] * 4),
                    estimator=BoundEstimator("centred", KINDS["leaf"], lambda r, shape: r - r.mean()))

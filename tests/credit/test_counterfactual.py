"""Counterfactual fork-pair credit (seed paper §5.6 item 4, Table 5C): the paper's hand checks, every
gate and skip, rescue duplication, length damping, balance-div-len, the fork hinge, a loop oracle."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from rlvr_sweep.credit import ESTIMATORS, GroupShape
from rlvr_sweep.credit.counterfactual import (
    STATUSES, VARIANTS, HingePair, cf_credit, cf_pair_rows, cf_step_fields, fork_hinge_loss, loss_credit,
    signed_token_mass,
)
from rlvr_sweep.credit.tree import token_advantages
from rlvr_sweep.update.losses import pack_sequences, policy_loss, token_logprobs
from tests.conftest import make_random_qwen3

EPS = 1e-4
# Every group of the paper's hand checks has 7 equal rewards and 1 odd one: Bessel s_R = sqrt(0.875 / 7)
# = sqrt(1/8) = 0.353553 (sum of squares: 7 * 0.125^2 + 0.875^2 = 0.875), d = s_R + 1e-4 = 0.353653.
S_R = math.sqrt(1 / 8)
D = S_R + EPS


def credit(variant, rewards, tau, lengths, hinge_weight=0.15, **kw):
    return cf_credit(torch.tensor(rewards, dtype=torch.float32), tau, lengths, variant=variant,
                     hinge_weight=hinge_weight, **kw)


# ---------------------------------------------------------------- the paper's hand checks

# b0_pass = 3 with the three passing roots' alternatives lost, (1, 0) each, and the 4th pair (0, 1).
RG_37 = [[1, 0], [1, 0], [1, 0], [0, 1]]
TAU_37 = [12, 30, 7, 19]
LEN_37 = [[200, 150], [400, 1024], [90, 60], [1024, 266]]


def test_hand_check_rescue_duplication_b0_pass_3():
    """§5.6: duplicating 3 solved roots sets Rbar = 0.875, s_R = 0.3536, A_pref(k*) = -1.0604."""
    for variant in ("cf_rg", "cf_pb"):
        cf = credit(variant, RG_37, TAU_37, LEN_37)
        assert cf.dup.tolist() == [True, True, True, False]
        assert cf.rewards.tolist() == [[1, 1], [1, 1], [1, 1], [0, 1]]  # 7 passes: a (3, 7) group
        assert cf.lengths.tolist() == [[200, 200], [400, 400], [90, 90], [1024, 266]]  # copies of b0
        m = cf.metrics
        assert m["r_bar"] == 0.875 and m["s_r"] == pytest.approx(0.3536, abs=5e-5)
        assert m["b0_pass"] == 3 and m["status"] == "active" and m["n_rescue_dup"] == 3
    rg = credit("cf_rg", RG_37, TAU_37, LEN_37)
    assert rg.prefix[3].tolist() == pytest.approx([-1.0604] * 2, abs=5e-5)  # (0.5 - 0.875) / d
    assert rg.prefix[3, 0].item() == pytest.approx((0.5 - 0.875) / D, abs=1e-6)
    assert rg.prefix[:3].flatten().tolist() == pytest.approx([(1 - 0.875) / D] * 6, abs=1e-6)
    # cf_pb on the same (3, 7) group: b0_pass >= 3 and rescued -> A_pref(k*) = 0 and the 3 (1, 1) pairs zeroed
    pb = credit("cf_pb", RG_37, TAU_37, LEN_37)
    assert pb.prefix.abs().sum() == 0 and pb.cont[:3].abs().sum() == 0


def test_hand_check_pair_balanced_01_group():
    """§5.6 (Arm 19 seed 101 step 41): a (0, 1) group under PB, tau = 19, L_win = 266, L_lose = 1024."""
    rewards = [[0, 0], [0, 0], [0, 0], [0, 1]]
    tau = [15, 40, 9, 19]
    lengths = [[300, 512], [100, 1024], [64, 80], [1024, 266]]
    cf = credit("cf_pb", rewards, tau, lengths)
    m = cf.metrics
    assert m["r_bar"] == 0.125 and m["s_r"] == pytest.approx(0.3536, abs=5e-5) and m["b0_pass"] == 0
    assert cf.prefix[3].tolist() == pytest.approx([+1.0604] * 2, abs=5e-5)  # (0.5 - 0.125) / d
    # A_cont(k*) = (win, lose) = (+1.9440, -0.4778): win (0.5 * 0.875 + 0.5 * 0.5) / d; lose = -win * 247/1005
    assert cf.cont[3, 1].item() == pytest.approx(+1.9440, abs=5e-5)
    assert cf.cont[3, 0].item() == pytest.approx(-0.4778, abs=5e-5)
    assert cf.cont[3, 0].item() == pytest.approx(-(0.6875 / D) * (266 - 19) / (1024 - 19), abs=1e-6)
    assert cf.cont.sum().item() == pytest.approx(+0.4059, abs=5e-5)  # the other 6: 0.5 * -0.125 / d each
    # the (0, 0) pairs' A_pref = (0 - 0.125) / d < 0 is clamped to 0
    assert cf.prefix[:3].abs().sum() == 0
    # M_tot = (1/8) sum_i [A_pref(i) pl_i + A_cont(i) (L_i - pl_i)], by hand:
    other = -0.0625 / D
    by_hand = (2 * 19 * (0.375 / D)                                     # pair 3 prefix, both leaves
               + (0.6875 / D) * (266 - 19) - (0.6875 / D) * (247 / 1005) * (1024 - 19)
               + other * ((300 - 15) + (512 - 15) + (100 - 40) + (1024 - 40) + (64 - 9) + (80 - 9))) / 8
    assert m["m_tot"] == pytest.approx(by_hand, rel=1e-6)
    assert cf_step_fields(cf)["m_tot"] == m["m_tot"]


def test_hand_check_unconditional_false_activation_at_b0_4_of_4():
    """Arm 14: b0 = 4/4 with one (1, 0) pair activates the step with A_pref = -1.0604; RG and PB gate it."""
    rewards = [[1, 1], [1, 1], [1, 1], [1, 0]]
    tau, lengths = [10, 10, 10, 10], [[50, 60], [70, 80], [90, 95], [300, 1024]]
    un = credit("cf_uncond", rewards, tau, lengths, hinge_weight=0.5)
    assert un.metrics["status"] == "active" and un.metrics["b0_pass"] == 4 and not un.dup.any()
    assert un.prefix[3].tolist() == pytest.approx([-1.0604] * 2, abs=5e-5)
    assert un.hinge == (HingePair(3, 0, 1, 10),)  # the on-policy token wins this fork
    for variant in ("cf_rg", "cf_pb"):
        cf = credit(variant, rewards, tau, lengths)
        assert cf.metrics["status"] == "gated_rescue_dup" and cf.metrics["gated"] and not cf.metrics["active"]
        assert cf.prefix.abs().sum() == 0 and cf.cont.abs().sum() == 0 and cf.hinge == ()
        assert cf.metrics["m_tot"] == 0.0


# ---------------------------------------------------------------- gates and skips


@pytest.mark.parametrize("value", [0.0, 1.0])
@pytest.mark.parametrize("variant", VARIANTS)
def test_homogeneous_groups_are_exact_zeros(variant, value):
    cf = credit(variant, [[value] * 2] * 4, [5] * 4, [[20, 30]] * 4, hinge_weight=0.5)
    assert cf.metrics["status"] == "homogeneous" and not cf.metrics["gated"] and not cf.metrics["skipped"]
    assert cf.prefix.abs().sum() == 0 and cf.cont.abs().sum() == 0 and cf.hinge == ()
    assert cf.metrics["m_tot"] == 0.0 and not cf.dup.any()


def test_pb_skips_unrescued_groups_with_b0_pass_at_least_3():
    unrescued = [[1, 1], [1, 0], [1, 1], [0, 0]]  # b0_pass = 3, no (0, 1) pair
    tau, lengths = [8] * 4, [[40, 50]] * 4
    pb = credit("cf_pb", unrescued, tau, lengths)
    assert pb.metrics["status"] == "skipped_pb_unrescued" and pb.metrics["skipped"] and not pb.metrics["gated"]
    assert pb.prefix.abs().sum() == 0 and pb.cont.abs().sum() == 0 and pb.hinge == ()
    assert credit("cf_rg", unrescued, tau, lengths).metrics["status"] == "active"  # 6 ones, 2 zeros after dup
    assert credit("cf_uncond", unrescued, tau, lengths).metrics["status"] == "active"
    # b0_pass = 2 without a rescue is not skipped
    assert credit("cf_pb", [[1, 1], [1, 0], [0, 0], [0, 0]], tau, lengths).metrics["status"] == "active"
    # b0 = 4/4 with a (1, 1) group except one (1, 0): gated by the duplication first (Table 5C's "gated")
    assert credit("cf_pb", [[1, 1]] * 3 + [[1, 0]], tau, lengths).metrics["status"] == "gated_rescue_dup"


def test_pb_b0_pass_at_least_3_rescued_keeps_only_the_divergent_continuations():
    """The divergent pair's loser balanced against its winner (default), or its damped tree value."""
    rewards = [[1, 1], [1, 0], [1, 1], [0, 1]]  # dup of pair 1 -> a (3, 7) group
    tau, lengths = [10, 10, 10, 20], [[50, 60], [70, 80], [90, 95], [420, 120]]
    cf = credit("cf_pb", rewards, tau, lengths)
    win, lose = 0.3125 / D, -0.6875 / D  # (0.5 * 0.125 + 0.5 * 0.5), (0.5 * -0.875 + 0.5 * -0.5)
    assert cf.prefix.abs().sum() == 0
    assert cf.cont[:3].abs().sum() == 0
    assert cf.cont[3].tolist() == pytest.approx([-win * 100 / 400, win], abs=1e-6)  # c_win 100, c_lose 400
    assert cf.hinge == (HingePair(3, 1, 0, 20),)
    tree = credit("cf_pb", rewards, tau, lengths, pb_loser="tree")
    assert tree.cont[3].tolist() == pytest.approx([lose * 100 / 400, win], abs=1e-6)  # loser damped by rg
    assert tree.metrics["pb_loser"] == "tree" and cf.metrics["pb_loser"] == "balanced"


def test_the_paper_s_mean_signed_mass_picks_the_balanced_loser():
    """A (3, 7) group with equal continuation lengths c = 500 on its divergent pair: the tree reading gives
    M_tot = (0.8836 - 1.9440) * 500 / 8 = -66.27, the balanced one 0.00; the paper's Arms 17 / 19 report
    small positive means (+5.58 / +0.94), which the tree reading could not reach on such groups."""
    rewards = [[1, 0], [1, 0], [1, 0], [0, 1]]
    tau, lengths = [12, 12, 12, 12], [[200, 150], [400, 300], [90, 60], [512, 512]]
    tree = credit("cf_pb", rewards, tau, lengths, pb_loser="tree")
    balanced = credit("cf_pb", rewards, tau, lengths)
    assert tree.cont[3].tolist() == pytest.approx([-1.9440, 0.8836], abs=5e-5)
    assert tree.metrics["m_tot"] == pytest.approx(-66.27, abs=0.01)
    assert balanced.metrics["m_tot"] == pytest.approx(0.0, abs=1e-6)


def test_pb_below_3_clamps_prefixes_and_balances_each_divergent_pair():
    rewards = [[0, 1], [1, 1], [0, 0], [1, 0]]  # b0_pass = 2; pair 3 (1, 0) is duplicated
    tau, lengths = [6, 6, 6, 6], [[106, 56], [30, 40], [50, 60], [70, 80]]
    cf = credit("cf_pb", rewards, tau, lengths)
    r = [0, 1, 1, 1, 0, 0, 1, 1]  # effective: Rbar = 5/8
    rbar = 5 / 8
    d = math.sqrt(sum((x - rbar) ** 2 for x in r) / 7) + EPS
    assert cf.prefix[:, 0].tolist() == pytest.approx([max(0.0, (v - rbar) / d) for v in (0.5, 1, 0, 1)], abs=1e-6)
    assert cf.prefix[2, 0] == 0  # clamped from (0 - 5/8) / d
    a_win = (0.5 * (1 - rbar) + 0.5 * 0.5) / d
    assert cf.cont[0].tolist() == pytest.approx([-a_win * 50 / 100, a_win], abs=1e-6)  # c_win 50, c_lose 100
    # non-divergent pairs keep their tree continuation values
    assert cf.cont[2].tolist() == pytest.approx([0.5 * (0 - rbar) / d] * 2, abs=1e-6)
    assert cf.cont[3].tolist() == pytest.approx([0.5 * (1 - rbar) / d] * 2, abs=1e-6)


# ---------------------------------------------------------------- length damping and balance-div-len


@pytest.mark.parametrize("variant", ["cf_rg", "cf_pb"])
def test_loser_damping_both_directions(variant):
    rewards = [[0, 0], [0, 0], [0, 0], [0, 1]]
    tree_lose = -(0.5 * 0.125 + 0.5 * 0.5) / D  # tree A_cont of the (0, 1) pair's loser, b0
    win = (0.5 * 0.875 + 0.5 * 0.5) / D
    lose = tree_lose if variant == "cf_rg" else -win  # PB (b0_pass < 3) balances against the winner
    short_win = credit(variant, rewards, [19] * 4, [[40, 50]] * 3 + [[1024, 266]])
    assert short_win.cont[3].tolist() == pytest.approx([lose * 247 / 1005, win], abs=1e-6)
    long_win = credit(variant, rewards, [19] * 4, [[40, 50]] * 3 + [[266, 1024]])  # min(1, 1005/247) = 1
    assert long_win.cont[3].tolist() == pytest.approx([lose, win], abs=1e-6)
    equal = credit(variant, rewards, [19] * 4, [[40, 50]] * 3 + [[500, 500]])
    assert equal.cont[3].tolist() == pytest.approx([lose, win], abs=1e-6)


def test_rg_hand_check_01_group_damped():
    """RG on the PB example's (0, 1) group: loser = tree value -0.8837 * 247/1005 = -0.2172."""
    cf = credit("cf_rg", [[0, 0], [0, 0], [0, 0], [0, 1]], [19] * 4, [[40, 50]] * 3 + [[1024, 266]])
    assert cf.cont[3].tolist() == pytest.approx([-0.2172, +1.9440], abs=5e-5)
    assert cf.prefix[3, 0].item() == pytest.approx(+1.0604, abs=5e-5)
    assert cf.prefix[0, 0].item() == pytest.approx(-0.125 / D, abs=1e-6)  # RG does not clamp
    undamped = credit("cf_rg", [[0, 0], [0, 0], [0, 0], [0, 1]], [19] * 4, [[40, 50]] * 4)
    assert undamped.cont.sum().item() == pytest.approx(0.0, abs=1e-5)  # tree continuations sum to 0


def test_balance_div_len_by_hand():
    rewards = [[1, 0], [0, 1], [1, 1], [0, 0]]  # Rbar = 0.5, s_R = sqrt(2/7)
    tau = [10, 20, 5, 5]
    lengths = [[110, 310], [220, 70], [400, 30], [50, 1024]]
    d = math.sqrt(2 / 7) + EPS
    un = credit("cf_uncond", rewards, tau, lengths, hinge_weight=0.5)
    # divergent pair: A_cont = +-(0.5 * 0.5 + 0.5 * 0.5) / d = +-0.5 / d before balancing
    # pair 0: c = (100, 300), cbar = 200 -> (x2, x2/3); pair 1: c = (200, 50), cbar = 125 -> (x5/8, x5/2)
    assert un.cont[0].tolist() == pytest.approx([0.5 / d * 2, -0.5 / d * 2 / 3], abs=1e-6)
    assert un.cont[1].tolist() == pytest.approx([-0.5 / d * 125 / 200, 0.5 / d * 125 / 50], abs=1e-6)
    # token mass per branch becomes A_cont * cbar: independent of the branch's own length
    assert (un.cont[0] * torch.tensor([100.0, 300])).tolist() == pytest.approx([0.5 / d * 200, -0.5 / d * 200])
    # non-divergent pairs (any lengths) and all prefixes keep the tree values
    assert un.cont[2].tolist() == pytest.approx([0.25 / d] * 2, abs=1e-6)
    assert un.cont[3].tolist() == pytest.approx([-0.25 / d] * 2, abs=1e-6)
    assert un.prefix[:, 0].tolist() == pytest.approx([0, 0, 0.5 / d, -0.5 / d], abs=1e-6)
    assert un.hinge == (HingePair(0, 0, 1, 10), HingePair(1, 1, 0, 20))
    equal = credit("cf_uncond", rewards, tau, [[110, 110], [220, 220], [400, 30], [50, 1024]])
    assert equal.cont[:2].flatten().tolist() == pytest.approx([0.5 / d, -0.5 / d, -0.5 / d, 0.5 / d], abs=1e-6)


# ---------------------------------------------------------------- rescue duplication on the sampled leaves


def weighted_tokens(leaves, prefix, cont, pls):
    """Sum of coefficients per (context, token): two credits with equal sums have equal loss gradients."""
    out: dict[tuple, float] = {}
    for tokens, a_pre, a_cont, pl in zip(leaves, prefix, cont, pls):
        for j in range(len(tokens)):
            key = tuple(tokens[: j + 1])
            out[key] = out.get(key, 0.0) + (a_pre if j < pl else a_cont)
    return {k: v for k, v in out.items() if abs(v) > 1e-12}


def test_loss_credit_folds_duplicates_into_the_same_gradient():
    rng = random.Random(0)
    taus = [3, 2, 4, 3]
    roots = [[rng.randint(1, 9) for _ in range(t)] for t in taus]
    leaves = []
    for root in roots:
        leaves += [root + [11] + [rng.randint(1, 9) for _ in range(rng.randint(0, 5))],
                   root + [12] + [rng.randint(1, 9) for _ in range(rng.randint(0, 5))]]
    lengths = [[len(leaves[2 * k]), len(leaves[2 * k + 1])] for k in range(4)]
    for variant in VARIANTS:
        for rewards in ([[1, 0], [0, 1], [1, 0], [0, 0]], [[1, 0], [1, 1], [0, 0], [0, 1]]):
            cf = credit(variant, rewards, taus, lengths)
            effective = [leaves[2 * k + (0 if (b == 1 and cf.dup[k]) else b)] for k in range(4) for b in range(2)]
            pls = [t for t in taus for _ in range(2)]
            want = weighted_tokens(effective, cf.prefix.flatten().tolist(), cf.cont.flatten().tolist(), pls)
            folded = loss_credit(cf)
            got = weighted_tokens(leaves, folded.prefix.flatten().tolist(), folded.cont.flatten().tolist(), pls)
            assert got.keys() == want.keys() and all(got[k] == pytest.approx(want[k], abs=1e-6) for k in want)
            m_sampled = signed_token_mass(folded.prefix, folded.cont, torch.tensor(pls).view(4, 2), lengths)
            assert m_sampled == pytest.approx(cf.metrics["m_tot"], abs=1e-9)
            if variant == "cf_uncond":
                assert torch.equal(folded.cont, cf.cont)  # nothing to fold


# ---------------------------------------------------------------- the fork hinge


def test_hinge_weight_zero_is_exactly_no_hinge():
    rewards, tau, lengths = [[1, 0], [0, 1], [0, 0], [1, 1]], [4, 5, 6, 7], [[20, 30], [25, 35], [30, 40], [9, 9]]
    for variant in VARIANTS:
        with_hinge = credit(variant, rewards, tau, lengths, hinge_weight=0.5)
        without = credit(variant, rewards, tau, lengths, hinge_weight=0.0)
        assert with_hinge.hinge and without.hinge == () and without.metrics["n_hinge"] == 0
        assert torch.equal(with_hinge.prefix, without.prefix) and torch.equal(with_hinge.cont, without.cont)
        assert with_hinge.metrics["m_tot"] == without.metrics["m_tot"]
    # the loss term: weight 0 adds a constant zero, so loss and gradients are bitwise those without it
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(8, 6, 5, generator=g, requires_grad=True)
    tokens = torch.randint(0, 5, (8, 6), generator=g)
    adv = torch.randn(8, 6, generator=g)
    mask = torch.ones(8, 6, dtype=torch.bool)

    def loss_and_grad(weight):
        logits.grad = None
        logps = torch.log_softmax(logits, -1).gather(-1, tokens[..., None]).squeeze(-1)  # (8, 6)
        win, lose = logps[[1, 2], [4, 5]], logps[[0, 3], [4, 5]]
        loss = policy_loss(logps, mask, adv, "scale_then_sum", 8)
        loss = loss + fork_hinge_loss(win, lose, weight=weight, margin=0.5, group_size=8)
        loss.backward()
        return loss.detach().clone(), logits.grad.clone()

    logits.grad = None
    logps = torch.log_softmax(logits, -1).gather(-1, tokens[..., None]).squeeze(-1)
    plain = policy_loss(logps, mask, adv, "scale_then_sum", 8)
    plain.backward()
    loss0, grad0 = loss_and_grad(0.0)
    assert torch.equal(loss0, plain.detach()) and torch.equal(grad0, logits.grad)
    loss1, grad1 = loss_and_grad(0.5)
    assert not torch.equal(grad1, grad0)
    assert fork_hinge_loss(torch.tensor([]), torch.tensor([]), weight=0.5, margin=0.5, group_size=8) == 0


def test_hinge_value_and_gradient_by_hand():
    lp_win = torch.tensor([math.log(0.3), math.log(0.6)], requires_grad=True)
    lp_lose = torch.tensor([math.log(0.4), math.log(0.1)], requires_grad=True)
    loss = fork_hinge_loss(lp_win, lp_lose, weight=0.5, margin=0.5, group_size=8)
    # pair 0: gap log(0.75) = -0.2877 < 0.5 -> 0.5 * (0.5 + 0.2877) / 8; pair 1: gap log 6 = 1.79 > 0.5 -> 0
    assert loss.item() == pytest.approx(0.5 * (0.5 - math.log(0.75)) / 8, abs=1e-7)
    loss.backward()
    # the same gradient as per-token advantages +0.5 (winner) / -0.5 (loser) in the 1/G policy loss
    assert lp_win.grad.tolist() == pytest.approx([-0.5 / 8, 0.0])
    assert lp_lose.grad.tolist() == pytest.approx([+0.5 / 8, 0.0])


def test_hinge_reads_the_fork_column_of_token_logprobs():
    """The trainer's recipe: loss_credit -> token_advantages, and the hinge on column tau_k of
    token_logprobs(start = P - 1); there the two leaves share their context, so lp_w - lp_l is the raw
    logit gap z(v_w) - z(v_l) at the fork."""
    model = make_random_qwen3(seed=5)
    prompt = [3, 9, 4]
    roots = [[5, 6, 7, 8], [10, 11], [12, 13, 14], [15]]
    tails = [([20, 1], [21, 22, 1]), ([23], [24, 25, 26, 1]), ([27, 28], [29, 1]), ([30, 1], [31])]
    leaves = [root + tail for root, pair in zip(roots, tails) for tail in pair]
    tau = [len(r) for r in roots]
    lengths = [[len(leaves[2 * k]), len(leaves[2 * k + 1])] for k in range(4)]
    cf = credit("cf_uncond", [[1, 0], [0, 1], [1, 1], [0, 0]], tau, lengths, hinge_weight=0.5)
    assert [h.k for h in cf.hinge] == [0, 1]
    ids, attn, cmask = pack_sequences([prompt] * 8, leaves, pad_id=0)
    start = len(prompt) - 1
    with torch.no_grad():
        logps = token_logprobs(model, ids, attn, start)  # (8, W): column j = completion token j
        logits = model(input_ids=ids, attention_mask=attn).logits
    for h in cf.hinge:
        i_w, i_l = h.leaves()
        gap = logps[i_w, h.position] - logps[i_l, h.position]
        at = len(prompt) + h.position - 1  # the position whose logits predict completion token tau
        assert torch.equal(ids[i_w, : at + 1], ids[i_l, : at + 1])  # one shared context
        z = logits[i_w, at]
        assert gap.item() == pytest.approx((z[leaves[i_w][h.position]] - z[leaves[i_l][h.position]]).item(), abs=1e-5)
    width = logps.shape[1]
    adv = token_advantages(loss_credit(cf), torch.tensor(tau).repeat_interleave(2), torch.tensor(lengths), width)
    assert adv.shape == logps.shape and adv[0, tau[0]] == cf.cont[0, 0] and adv[1, tau[0] - 1] == cf.prefix[0, 1]


def test_hinge_pairs_are_the_divergent_forks_of_an_active_group():
    assert HingePair(2, 1, 0, 17).leaves() == (5, 4)
    rewards = [[1, 0], [0, 1], [1, 1], [0, 0]]
    tau, lengths = [4, 5, 6, 7], [[20, 30], [25, 35], [30, 40], [12, 9]]
    assert [h.k for h in credit("cf_uncond", rewards, tau, lengths).hinge] == [0, 1]
    assert [h.k for h in credit("cf_rg", rewards, tau, lengths).hinge] == [1]  # (1, 0) was duplicated
    no_fork = credit("cf_uncond", rewards, [4, 5, 6, 30], [[20, 30], [25, 35], [30, 40], [30, 30]],
                     forked=[True, True, True, False])
    assert [h.k for h in no_fork.hinge] == [0, 1]


# ---------------------------------------------------------------- no-fork pairs, validation, registry


def test_no_fork_pairs_are_never_rescued_or_divergent():
    # pair 3 did not fork (a stopped-tree pair); its two on-policy leaves disagree
    rewards, tau = [[0, 0], [0, 1], [0, 0], [1, 0]], [4, 5, 6, 8]
    lengths = [[20, 30], [25, 35], [30, 40], [40, 50]]
    forked = [True, True, True, False]
    for variant in VARIANTS:
        cf = credit(variant, rewards, tau, lengths, forked=forked)
        assert not cf.dup[3] and cf.metrics["n_b0_win"] == 0 and cf.metrics["n_divergent"] == 1
    rg = credit("cf_rg", rewards, tau, lengths, forked=forked)
    rbar = 2 / 8
    d = math.sqrt(sum((x - rbar) ** 2 for x in [0, 0, 0, 1, 0, 0, 1, 0]) / 7) + EPS
    assert rg.cont[3].tolist() == pytest.approx([(0.5 * (1 - rbar) + 0.25) / d, (0.5 * -rbar - 0.25) / d],
                                                abs=1e-6)  # plain tree credit


def test_validation_and_registry():
    with pytest.raises(ValueError, match="binary"):
        credit("cf_rg", [[0.5, 0]] * 4, [4] * 4, [[9, 9]] * 4)
    with pytest.raises(ValueError, match="K, 2"):
        cf_credit(torch.zeros(8), [4] * 4, [[9, 9]] * 4, variant="cf_rg", hinge_weight=0)
    with pytest.raises(ValueError, match="fork token"):
        credit("cf_rg", [[1, 0]] * 4, [4] * 4, [[9, 4]] * 4)  # a forked leaf must extend past tau
    with pytest.raises(ValueError, match="hinge_weight"):
        credit("cf_rg", [[1, 0]] * 4, [4] * 4, [[9, 9]] * 4, hinge_weight=-1)
    with pytest.raises(ValueError, match="valid: .*cf_rg"):
        cf_credit(torch.zeros(4, 2), [4] * 4, [[9, 9]] * 4, variant="rg", hinge_weight=0)
    fork_estimators = {o.name for o in ESTIMATORS.options() if o.kind == "fork"}
    assert fork_estimators == set(VARIANTS) == {"cf_uncond", "cf_rg", "cf_pb"}
    with pytest.raises(ValueError, match=r"unknown estimator 'cf'; valid: \[.*'cf_pb', 'cf_rg', 'cf_uncond'"):
        ESTIMATORS["cf"]
    shape = GroupShape(torch.tensor([19] * 4), torch.tensor([[19, 19]] * 4), torch.tensor([[50, 60]] * 4),
                       torch.ones(4, dtype=torch.bool))
    credit_ = ESTIMATORS["cf_pb"].fn(torch.tensor([[0.0, 1], [0, 0], [0, 0], [0, 0]]), shape, hinge_weight=0.15)
    assert credit_.cf.metrics["variant"] == "cf_pb" and credit_.cf.hinge_weight == 0.15 and credit_.active
    # the flat warmup group of a fork arm (no fork structure) gets leaf GRPO credit
    flat = ESTIMATORS["cf_pb"].fn(torch.tensor([[0.0, 1], [0, 0], [0, 0], [0, 0]]),
                                  GroupShape(torch.zeros(4, dtype=torch.long), torch.zeros(4, 2, dtype=torch.long),
                                             torch.tensor([[5, 6]] * 4)), hinge_weight=0.15)
    assert flat.cf is None and torch.equal(flat.prefix, flat.cont) and flat.cont[0, 1] > 0 > flat.cont[0, 0]


# ---------------------------------------------------------------- loop oracle over every binary group


def oracle(rewards, tau, lengths, variant, forked, alpha=0.5, pb_loser="balanced"):
    """Scalar re-statement of the module docstring's steps 1-5, pair by pair."""
    K = len(rewards)
    dup = [variant != "cf_uncond" and forked[k] and rewards[k] == [1, 0] for k in range(K)]
    r = [[rw[0], rw[0]] if d else list(rw) for rw, d in zip(rewards, dup)]
    L = [[ln[0], ln[0]] if d else list(ln) for ln, d in zip(lengths, dup)]

    def sd(xs):
        m = sum(xs) / len(xs)
        return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))

    flat_raw, flat = [x for rw in rewards for x in rw], [x for rw in r for x in rw]
    b0 = sum(rw[0] for rw in rewards)
    rescued = any(forked[k] and rewards[k] == [0, 1] for k in range(K))
    zero = [[0.0, 0.0] for _ in range(K)]
    if sd(flat_raw) < 1e-6 or sd(flat) < 1e-6 or (variant == "cf_pb" and b0 >= 3 and not rescued):
        return zero, zero
    rbar, d = sum(flat) / len(flat), sd(flat) + EPS
    pref, cont = [], []
    for k in range(K):
        vhat = sum(r[k]) / 2
        pref.append((vhat - rbar) / d)
        cont.append([((1 - alpha) * (x - rbar) + alpha * (x - vhat)) / d for x in r[k]])
        if not (forked[k] and r[k][0] != r[k][1]):
            if variant == "cf_pb" and b0 >= 3:
                cont[k] = [0.0, 0.0]
            continue
        w = 0 if r[k][0] > r[k][1] else 1
        c = [L[k][b] - tau[k] for b in range(2)]
        damp = min(1.0, c[w] / c[1 - w])
        if variant == "cf_uncond":
            cont[k] = [cont[k][b] * (c[0] + c[1]) / 2 / c[b] for b in range(2)]
        else:
            cont[k][1 - w] *= damp
            if variant == "cf_pb" and (b0 < 3 or pb_loser == "balanced"):
                cont[k][1 - w] = -cont[k][w] * damp
    if variant == "cf_pb":
        pref = [0.0] * K if b0 >= 3 else [max(0.0, p) for p in pref]
    return [[p, p] for p in pref], cont


def test_vectorised_credit_matches_the_loop_oracle_on_every_binary_group():
    rng = random.Random(7)
    seen: Counter = Counter()
    for bits in itertools.product([0, 1], repeat=8):
        rewards = [list(bits[2 * k: 2 * k + 2]) for k in range(4)]
        tau = [rng.randint(1, 40) for _ in range(4)]
        lengths = [[t + rng.randint(1, 60), t + rng.randint(1, 60)] for t in tau]
        forked = [rng.random() < 0.85 for _ in range(4)]
        for k in range(4):
            if not forked[k] and rng.random() < 0.5:  # a finished no-fork root: duplicated, no continuation
                lengths[k] = [tau[k], tau[k]]
                rewards[k] = [rewards[k][0]] * 2
        for variant, pb_loser in [*((v, "balanced") for v in VARIANTS), ("cf_pb", "tree")]:
            cf = credit(variant, rewards, tau, lengths, forked=forked, pb_loser=pb_loser)
            pref, cont = oracle(rewards, tau, lengths, variant, forked, pb_loser=pb_loser)
            flat = lambda rows: [x for row in rows for x in row]  # noqa: E731
            assert cf.prefix.flatten().tolist() == pytest.approx(flat(pref), abs=1e-5), (variant, rewards)
            assert cf.cont.flatten().tolist() == pytest.approx(flat(cont), abs=1e-5), (variant, rewards)
            seen[variant, cf.metrics["status"]] += 1
            if not cf.metrics["active"]:
                assert cf.prefix.abs().sum() == 0 and cf.cont.abs().sum() == 0 and cf.hinge == ()
            m = signed_token_mass(torch.tensor(pref), torch.tensor(cont),
                                  torch.tensor([[t, t] for t in tau]), cf.lengths)
            assert cf.metrics["m_tot"] == pytest.approx(m, abs=1e-4)
    assert {status for _, status in seen} == set(STATUSES)  # every gate is exercised
    assert seen["cf_pb", "skipped_pb_unrescued"] and not seen["cf_rg", "skipped_pb_unrescued"]
    assert not seen["cf_uncond", "gated_rescue_dup"]


# ---------------------------------------------------------------- ledger columns


def test_ledger_rows_and_step_fields():
    def pair(k, category, tau, v0, v1, l0, l1):
        leaves = [SimpleNamespace(tokens=[0] * l0), SimpleNamespace(tokens=[0] * l1)]
        return SimpleNamespace(k=k, category=category, tau=tau, v0=v0, v1=v1, top1=v0, top2=v1, margin=0.25,
                               min_margin=0.1, leaves=leaves, window_start=4, window=(0.3, 0.1))

    pairs = [pair(0, "cf_first_gap", 19, 5, 6, 1024, 266), pair(1, "cf_min_margin", 7, 8, 9, 50, 60),
             pair(2, "cf_first_gap", 4, 1, 2, 30, 40), pair(3, "cf_no_fork", 3, -1, -1, 3, 3)]
    rewards, forked = [[0, 1], [1, 0], [0, 0], [1, 1]], [True, True, True, False]
    cf = credit("cf_rg", rewards, [p.tau for p in pairs], [[1024, 266], [50, 60], [30, 40], [3, 3]], forked=forked)
    rows = cf_pair_rows(pairs, cf)
    assert [r["k"] for r in rows] == [0, 1, 2, 3]
    first = rows[0]
    assert {k: first[k] for k in ("category", "t_star", "v0", "v1", "r0_raw", "r1_raw", "l0", "l1")} == {
        "category": "cf_first_gap", "t_star": 19, "v0": 5, "v1": 6, "r0_raw": 0.0, "r1_raw": 1.0, "l0": 1024,
        "l1": 266}
    assert first["raw_winner"] == "b1" and first["hinge"] and not first["rescue_dup"]
    assert first["window_start"] == 4 and first["window_margins"] == [0.3, 0.1]  # what verify re-derives t* from
    assert rows[1]["raw_winner"] == "b0" and rows[1]["rescue_dup"] and rows[1]["r1_eff"] == 1.0
    assert rows[3]["raw_winner"] == "" and not rows[3]["hinge"]
    assert first["a_cont1"] == pytest.approx(cf.cont[0, 1].item()) and first["a_pref"] == cf.prefix[0, 0].item()
    step = cf_step_fields(cf)
    assert step["b0_pass"] == 2 and step["cf_status"] == "active" and not step["cf_gated"]
    assert step["n_b0_win"] == step["n_b1_win"] == step["n_rescue_dup"] == 1 and step["n_hinge"] == 1
    assert step["m_tot"] == cf.metrics["m_tot"] and step["hinge_weight"] == 0.15

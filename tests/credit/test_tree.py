"""Tree credit (seed paper §4.3): hand values, Propositions 1-3, zero-mass shift, token layout."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from rlvr_sweep.credit.grpo import grpo_advantages
from rlvr_sweep.update.losses import pack_sequences, policy_loss, token_logprobs
from rlvr_sweep.credit.tree import (
    TreeCredit,
    clamped_prefix_advantages,
    per_leaf_prefix,
    token_advantages,
    tree_mean_advantages,
    tree_mean_credit,
    zero_cont_token_mass,
)
from tests.conftest import make_random_qwen3

EPS = 1e-4
ALL4 = torch.tensor([True, True, True, True])


def random_table(seed: int, k: int = 4, b: int = 2, binary: bool = True) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    r = torch.rand((k, b), generator=g)
    return (r < 0.5).float() if binary else r


# ---------------------------------------------------------------- hand values

# rewards [[1,0],[1,1],[0,0],[0,1]]: Rbar = 4/8 = 0.5; sum (R - 0.5)^2 = 8 * 0.25 = 2, unbiased
# sigma = sqrt(2/7) = 0.534522..., d = sigma + 1e-4. Vhat = [0.5, 1, 0, 0.5], M = [1, 1, 0, 1].
HAND = torch.tensor([[1.0, 0], [1, 1], [0, 0], [0, 1]])
D = math.sqrt(2 / 7) + EPS


@pytest.mark.parametrize(
    "beta, prefix_num",
    [
        (0.0, [0.0, 0.5, -0.5, 0.0]),  # Vhat - 0.5
        # V~ = 0.75 Vhat + 0.25 M = [0.375 + 0.25, 1, 0, 0.375 + 0.25] = [0.625, 1, 0, 0.625]
        (0.25, [0.125, 0.5, -0.5, 0.125]),
    ],
)
def test_tree_mean_hand_values(beta, prefix_num):
    a_pre, a_cont = tree_mean_advantages(HAND, ALL4, beta=beta)
    assert a_pre.tolist() == pytest.approx([x / D for x in prefix_num], abs=1e-6)
    # A_cont = (0.5 (R - 0.5) + 0.5 (R - Vhat)) / d, independent of beta:
    # pair 0: R=1: 0.5*0.5 + 0.5*0.5 = 0.5;   R=0: 0.5*(-0.5) + 0.5*(-0.5) = -0.5
    # pair 1: R=1: 0.5*0.5 + 0.5*0    = 0.25 (both leaves)
    # pair 2: R=0: 0.5*(-0.5) + 0      = -0.25 (both leaves)
    # pair 3: R=0: -0.5, R=1: 0.5
    cont_num = [[0.5, -0.5], [0.25, 0.25], [-0.25, -0.25], [-0.5, 0.5]]
    assert a_cont.flatten().tolist() == pytest.approx([x / D for row in cont_num for x in row], abs=1e-6)


def test_population_std_and_alpha():
    # population sigma = sqrt(2/8) = 0.5; alpha = 0 makes continuation credit plain leaf credit
    a_pre, a_cont = tree_mean_advantages(HAND, ALL4, beta=0.0, alpha=0.0, std="population")
    assert a_pre[1].item() == pytest.approx(0.5 / 0.5001, abs=1e-6)
    assert a_cont.flatten().tolist() == pytest.approx([(x - 0.5) / 0.5001 for x in HAND.flatten().tolist()], abs=1e-6)


def loop_tree_mean(r, shared, beta, alpha):
    """Loop oracle of the §4.3 formulas (float64, unbiased std)."""
    vals = [float(x) for x in r.flatten()]
    n = len(vals)
    rbar = sum(vals) / n
    d = math.sqrt(sum((v - rbar) ** 2 for v in vals) / (n - 1)) + EPS
    pre, cont = [], []
    for k, row in enumerate(r.tolist()):
        vhat, m = sum(row) / len(row), max(row)
        pre.append(((1 - beta) * vhat + beta * m - rbar) / d if shared[k] else 0.0)
        for x in row:
            cont.append(((1 - alpha) * (x - rbar) + alpha * (x - vhat)) / d if shared[k] else (x - rbar) / d)
    return pre, cont


@pytest.mark.parametrize("seed", range(5))
def test_tree_mean_matches_loop_oracle(seed):
    r = random_table(seed, k=4, b=3, binary=False)
    shared = [True, False, True, seed % 2 == 0]
    a_pre, a_cont = tree_mean_advantages(r, torch.tensor(shared), beta=0.3, alpha=0.4)
    pre, cont = loop_tree_mean(r, shared, 0.3, 0.4)
    assert a_pre.tolist() == pytest.approx(pre, abs=1e-5)
    assert a_cont.flatten().tolist() == pytest.approx(cont, abs=1e-5)


TREE_ESTIMATORS = {"tree_mean": tree_mean_credit, "clamped_prefix": clamped_prefix_advantages}


def get_tree_estimator(name: str):
    return TREE_ESTIMATORS[name]


@pytest.mark.parametrize("value", [0.0, 1.0])
@pytest.mark.parametrize("name", sorted(TREE_ESTIMATORS))
def test_homogeneous_group_is_exactly_zero(value, name):
    credit = get_tree_estimator(name)(torch.full((4, 2), value), torch.tensor([True, False, True, True]),
                                      beta=0.25, alpha=0.5, eps=EPS, std="unbiased")
    assert credit.prefix.tolist() == [[0.0, 0.0]] * 4 and credit.cont.tolist() == [[0.0, 0.0]] * 4
    one = get_tree_estimator(name)(torch.ones((1, 1)), torch.tensor([True]),
                                   beta=0.0, alpha=0.5, eps=EPS, std="unbiased")
    assert one.prefix.tolist() == [[0.0]] and one.cont.tolist() == [[0.0]]  # K*B = 1: no NaN from std


@pytest.mark.parametrize("seed", range(4))
def test_tau_zero_pairs_get_plain_leaf_credit(seed):
    r = random_table(seed)
    shared = torch.tensor([True, False, False, True])
    a_pre, a_cont = tree_mean_advantages(r, shared, beta=0.25)
    leaf = grpo_advantages(r.flatten()).reshape(4, 2)
    assert torch.equal(a_pre[~shared], torch.zeros(2))
    assert torch.allclose(a_cont[~shared], leaf[~shared], atol=1e-6)
    # no shared pair at all: the whole group is leaf-level GRPO
    a_pre, a_cont = tree_mean_advantages(r, torch.zeros(4, dtype=torch.bool), beta=0.25)
    assert torch.equal(a_pre, torch.zeros(4)) and torch.allclose(a_cont, leaf, atol=1e-6)


def test_per_leaf_view_and_registry():
    a_pre, a_cont = tree_mean_advantages(HAND, ALL4, beta=0.25)
    credit = tree_mean_credit(HAND, ALL4, beta=0.25)
    assert torch.equal(credit.prefix, per_leaf_prefix(a_pre, 2)) and credit.prefix.shape == (4, 2)
    assert torch.equal(credit.cont, a_cont)
    from rlvr_sweep.credit import ESTIMATORS

    assert {o.name for o in ESTIMATORS.options() if o.kind == "tree"} == {"tree_mean", "clamped_prefix"}
    assert all(ESTIMATORS[n].per_token for n in ("tree_mean", "clamped_prefix"))
    with pytest.raises(ValueError, match="unknown estimator 'treerl'; valid: .*'clamped_prefix'.*'tree_mean'"):
        ESTIMATORS["treerl"]
    with pytest.raises(ValueError, match="population"):
        tree_mean_advantages(HAND, ALL4, beta=0.0, std="bessel")


# ---------------------------------------------------------------- Proposition 2

def test_proposition2_seed_example_minus_1_5():
    # S = {1} with (0, 0); pairs 2-4 root-restarted with (1, 1): Rbar = 6/8 = 0.75,
    # sum (R - Rbar)^2 = 2 * 0.5625 + 6 * 0.0625 = 1.5, sigma = sqrt(1.5 / 7)
    r = torch.tensor([[0.0, 0], [1, 1], [1, 1], [1, 1]])
    shared = torch.tensor([True, False, False, False])
    a_pre, _ = tree_mean_advantages(r, shared, beta=0.0)
    d = math.sqrt(1.5 / 7) + EPS
    numerator = (per_leaf_prefix(a_pre, 2)[shared].sum() * d).item()
    assert numerator == pytest.approx(2 * (0 - 0.75), abs=1e-6)  # = -1.5, not 0


@pytest.mark.parametrize("seed", range(6))
def test_proposition2_beta_bonus_is_nonnegative_on_every_subset(seed):
    r = random_table(seed)
    if seed == 5:
        r = random_table(seed, b=3, binary=False)
    b = r.shape[1]
    flat = r.flatten().double()
    d = flat.std().item() + EPS
    vhat, m = r.double().mean(1), r.double().max(1).values
    beta = 0.25
    for bits in itertools.product([False, True], repeat=4):
        shared = torch.tensor(bits)
        a0, _ = tree_mean_advantages(r, shared, beta=0.0)
        ab, _ = tree_mean_advantages(r, shared, beta=beta)
        delta = (per_leaf_prefix(ab, b) - per_leaf_prefix(a0, b))[shared].sum().item()
        assert delta >= 0.0
        expected = b * beta * (m - vhat)[shared].sum().item() / d
        assert delta == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_proposition2_all_shared_prefix_mass_vanishes_at_beta0(seed):
    r = random_table(seed, binary=seed % 2 == 0)
    a_pre, _ = tree_mean_advantages(r, ALL4, beta=0.0)
    assert per_leaf_prefix(a_pre, 2).sum().item() == pytest.approx(0.0, abs=1e-5)


# ---------------------------------------------------------------- Proposition 1 (autograd)

def test_proposition1_prefix_gradient_equals_leaf_grpo_on_prefix_tokens():
    model = make_random_qwen3(seed=3)
    pad = 63
    prompt = [5, 17, 42]
    p = len(prompt)
    prefixes = [[3, 9, 11], [20, 21, 22, 23]]  # u^(1), u^(2): shared by the two leaves of each pair
    conts = [[[7, 8], [30, 31, 32, 33]], [[40], [50, 51, 52]]]  # different continuations per leaf
    completions = [prefixes[k] + conts[k][b] for k in range(2) for b in range(2)]
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0]])  # Rbar = 0.75, Vhat = [0.5, 1]
    pl = torch.tensor([len(prefixes[k]) for k in range(2) for b in range(2)])
    ll = torch.tensor([len(c) for c in completions])

    ids, attn, cmask = pack_sequences([prompt] * 4, completions, pad_id=pad)
    width = ids.shape[1] - p
    logps = token_logprobs(model, ids, attn, start=p - 1)  # (4, width): column j = completion token j
    prefix_mask = cmask[:, p - 1:] & (torch.arange(width)[None, :] < pl[:, None])

    a_pre, a_cont = tree_mean_advantages(rewards, torch.tensor([True, True]), beta=0.0)
    tree_adv = token_advantages(TreeCredit(per_leaf_prefix(a_pre, 2), a_cont), pl, ll, width)
    leaf_adv = grpo_advantages(rewards.flatten())  # (R_kb - Rbar) / (sigma + eps)
    assert not torch.allclose(tree_adv[:, 0], leaf_adv)  # the per-leaf weights really differ

    params = [q for q in model.parameters() if q.requires_grad]
    loss_tree = policy_loss(logps, prefix_mask, tree_adv, "scale_then_sum", group_size=4)
    loss_leaf = policy_loss(logps, prefix_mask, leaf_adv, "scale_then_sum", group_size=4)
    g_tree = torch.cat([g.flatten() for g in torch.autograd.grad(loss_tree, params, retain_graph=True)])
    g_leaf = torch.cat([g.flatten() for g in torch.autograd.grad(loss_leaf, params)])
    assert g_leaf.norm() > 0
    assert (g_tree - g_leaf).norm() <= 1e-6 * g_leaf.norm()


# ---------------------------------------------------------------- Proposition 3 (clamped prefix)

@pytest.mark.parametrize("n_ones", range(1, 8))
def test_proposition3_clamped_prefix_net_weight_positive(n_ones):
    # pair 1 is divergent (1, 0): Vhat = 0.5, M = 1; the other 6 leaves carry n_ones - 1 ones,
    # so Rbar = n_ones / 8 ranges over {0.125, ..., 0.875} (< 1 always, pair 1 has a 0).
    others = [1.0] * (n_ones - 1) + [0.0] * (7 - n_ones)
    r = torch.tensor([[1.0, 0.0]] + [others[i:i + 2] for i in range(0, 6, 2)])
    rbar = n_ones / 8
    d = math.sqrt(n_ones * (8 - n_ones) / 56) + EPS  # unbiased var of n ones among 8: n(8-n)/(8*7)
    credit = clamped_prefix_advantages(r, ALL4, beta=0.25)
    # paper: winning branch keeps (1 - Rbar)/d, losing branch max(0, (0.625 - Rbar)/d)
    assert credit.prefix[0, 0].item() == pytest.approx((1 - rbar) / d, abs=1e-6)
    assert credit.prefix[0, 1].item() == pytest.approx(max(0.0, (0.625 - rbar) / d), abs=1e-6)
    assert credit.prefix[0].sum().item() > 0
    tree = tree_mean_credit(r, ALL4, beta=0.25)
    if rbar in (0.625, 0.75, 0.875):  # below-average prefix: tree_mean gives it <= 0, the clamp > 0
        assert tree.prefix[0].sum().item() <= 1e-6
    # at beta = 0 (V~ = 0.5) the net weight is still positive
    assert clamped_prefix_advantages(r, ALL4, beta=0.0).prefix[0].sum().item() > 0
    # continuation credit and non-divergent pairs are tree_mean's
    assert torch.equal(credit.cont, tree.cont)
    for k in range(1, 4):
        if r[k, 0] == r[k, 1]:
            assert torch.allclose(credit.prefix[k], tree.prefix[k], atol=1e-6)


def test_clamped_prefix_tau_zero_pairs_have_no_prefix():
    r = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    credit = clamped_prefix_advantages(r, torch.tensor([True, False, True, False]), beta=0.25)
    assert credit.prefix[1].tolist() == [0.0, 0.0] and credit.prefix[3].tolist() == [0.0, 0.0]
    assert torch.allclose(credit.cont[1], grpo_advantages(r.flatten())[2:4], atol=1e-6)


# ---------------------------------------------------------------- zero continuation token mass

def signed_mass(credit, pl, ll):
    return (credit.prefix.double() * pl + credit.cont.double() * (ll - pl)).sum().item()


def test_zero_mass_hand_example():
    credit = TreeCredit(torch.tensor([[0.5, 0.5], [-1.0, -1.0]]), torch.tensor([[1.0, -1.0], [0.0, 0.0]]))
    pl = torch.tensor([[2, 2], [3, 3]])
    ll = torch.tensor([[4, 3], [3, 3]])  # pair 2 is a terminal duplicate: no continuation tokens
    # mass = 0.5*2 + 1*2 + 0.5*2 + (-1)*1 + (-1)*3 + (-1)*3 = -3 over 2 + 1 = 3 continuation tokens
    # c = -1, so the continuation credit of pair 1 becomes [2, 0]; pair 2 and all prefixes untouched
    out = zero_cont_token_mass(credit, pl, ll)
    assert out.cont.tolist() == [[2.0, 0.0], [0.0, 0.0]]
    assert torch.equal(out.prefix, credit.prefix)
    assert signed_mass(out, pl, ll) == 0.0


@pytest.mark.parametrize("seed", range(6))
def test_zero_mass_random_tables(seed):
    g = torch.Generator().manual_seed(100 + seed)
    r = random_table(seed)
    shared = torch.tensor([True, True, seed % 2 == 0, True])
    credit = get_tree_estimator(["tree_mean", "clamped_prefix"][seed % 2])(r, shared, beta=0.25, alpha=0.5,
                                                                        eps=EPS, std="unbiased")
    pl = torch.randint(1, 20, (4, 2), generator=g) * shared[:, None]
    ll = pl + torch.randint(0, 30, (4, 2), generator=g)
    ll[3] = pl[3]  # pair 4: zero-length continuations (terminal duplicate)
    out = zero_cont_token_mass(credit, pl, ll)
    assert abs(signed_mass(out, pl, ll)) <= 1e-5
    assert torch.equal(out.prefix, credit.prefix)
    no_cont = ll == pl
    assert torch.equal(out.cont[no_cont], credit.cont[no_cont])
    shift = (credit.cont - out.cont)[~no_cont]
    assert torch.allclose(shift, shift[0].expand_as(shift), atol=1e-6)  # one constant for all


def test_zero_mass_without_continuation_tokens_is_unchanged():
    credit = tree_mean_credit(HAND, ALL4, beta=0.0)
    pl = torch.full((4, 2), 5)
    out = zero_cont_token_mass(credit, pl, pl)
    assert out is credit
    with pytest.raises(ValueError):
        zero_cont_token_mass(credit, pl, pl - 1)


# ---------------------------------------------------------------- token layout

def test_token_advantages_hand_layout():
    credit = TreeCredit(torch.tensor([[1.0, 2.0], [5.0, 6.0]]), torch.tensor([[3.0, 4.0], [7.0, 8.0]]))
    pl = torch.tensor([2, 1, 0, 3])
    ll = torch.tensor([3, 1, 2, 3])
    adv = token_advantages(credit, pl, ll, width=4)
    assert adv.tolist() == [
        [1.0, 1.0, 3.0, 0.0],  # leaf (1,1): prefix on tokens 0-1, continuation on 2, pad after
        [2.0, 0.0, 0.0, 0.0],  # leaf (1,2): one prefix token, no continuation
        [7.0, 7.0, 0.0, 0.0],  # leaf (2,1): tau = 0, continuation credit on every token
        [6.0, 6.0, 6.0, 0.0],  # leaf (2,2): terminal duplicate, all prefix
    ]
    with pytest.raises(ValueError):
        token_advantages(credit, pl, ll, width=2)


def test_token_advantages_line_up_with_pack_sequences():
    prompt = [9, 8, 7]
    p = len(prompt)
    completions = [[1, 2, 3], [4], [5, 6], [10, 11, 12]]
    ll = torch.tensor([len(c) for c in completions])
    ids, _, cmask = pack_sequences([prompt] * 4, completions, pad_id=0)
    width = ids.shape[1] - p
    ones = TreeCredit(torch.ones(2, 2), torch.ones(2, 2))
    adv = token_advantages(ones, torch.tensor([1, 0, 2, 1]), ll, width)
    assert torch.equal(adv != 0, cmask[:, p - 1:])  # nonzero exactly on the completion mask
    # column j of token_logprobs(start=p-1) scores ids[:, p + j], i.e. completion token j
    for i, c in enumerate(completions):
        assert ids[i, p:p + len(c)].tolist() == c

"""The counterfactual fork sampler (seed paper §5.6 item 4): the fork rule by hand, v1 != v0, exact leaf
marginals on scripted finite policies, token conservation, and the tiny shipped checkpoint."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

import pytest
import torch

from rlvr_sweep.rollout.cf_fork import (
    CF_CATEGORIES, ForkGroup, ForkPair, alternative_token, cf_fork, fork_position, plan_fork,
)
from rlvr_sweep.rollout.policies import ModelPolicy, ScriptedPolicy
from rlvr_sweep.rollout.samplers import Leaf, RolloutGroup

EOS = 0
PROMPT = [7]  # ScriptedPolicy strips it (prompt_len=1)
PAPER = dict(start=4, end=64, threshold=0.5)


# ---------------------------------------------------------------------------------------------
# The fork rule by hand


def margins_with(n: int, at: dict[int, float], rest: float = 2.0) -> list[float]:
    return [at.get(t, rest) for t in range(n)]


def test_fork_position_window_boundaries_and_threshold():
    # positions before 4 never count, however small their margin
    assert fork_position(margins_with(80, {3: 0.0, 4: 0.5}), **PAPER) == (4, "cf_first_gap")
    assert fork_position(margins_with(80, {3: 0.0, 63: 0.3}), **PAPER) == (63, "cf_first_gap")
    # 64 is outside [4, 64): only the fallback, at the smallest margin inside the window
    assert fork_position(margins_with(80, {64: 0.0, 20: 1.5}), **PAPER) == (20, "cf_min_margin")
    # the threshold is inclusive: exactly 0.5 forks, the next float above does not
    assert fork_position(margins_with(80, {10: 0.5}), **PAPER) == (10, "cf_first_gap")
    above = math.nextafter(0.5, 1.0)
    assert fork_position(margins_with(80, {10: above}), **PAPER) == (10, "cf_min_margin")
    # first qualifying, not smallest
    assert fork_position(margins_with(80, {30: 0.4, 40: 0.0}), **PAPER) == (30, "cf_first_gap")


def test_fork_position_fallbacks():
    # no qualifying margin: the smallest one in the window, first on ties
    assert fork_position(margins_with(80, {9: 0.9, 50: 0.9, 60: 1.0}), **PAPER) == (9, "cf_min_margin")
    assert fork_position(margins_with(80, {}), **PAPER) == (4, "cf_min_margin")  # all equal: the first
    # a short root: the window is cut at its length
    assert fork_position(margins_with(10, {9: 0.1}), **PAPER) == (9, "cf_first_gap")
    assert fork_position(margins_with(10, {3: 0.1}), **PAPER) == (4, "cf_min_margin")
    # a root that ended at or before position 4 has no position in the window
    assert fork_position(margins_with(4, {2: 0.0}), **PAPER) == (None, "cf_no_fork")
    assert fork_position([], **PAPER) == (None, "cf_no_fork")
    # positions without a second-best token (inf) or NaN never fork
    assert fork_position([0.0] * 4 + [math.inf, math.nan, 3.0], **PAPER) == (6, "cf_min_margin")
    assert fork_position([0.0] * 4 + [math.inf] * 3, **PAPER) == (None, "cf_no_fork")
    # scaled units: the caller passes its own window and threshold
    assert fork_position([1.0, 0.9, 0.8, 0.1], start=1, end=3, threshold=0.85) == (2, "cf_first_gap")


def test_alternative_token_is_the_best_ranked_other_token():
    assert alternative_token(5, top1=5, top2=9) == 9  # the root took its top-1 token
    assert alternative_token(9, top1=5, top2=9) == 5  # the root took its top-2 token
    assert alternative_token(3, top1=5, top2=9) == 5  # rank >= 3 (sampling at T 0.8): the top-1 token
    for v0 in range(4):
        for top1, top2 in [(0, 1), (1, 0), (2, 3)]:
            assert alternative_token(v0, top1, top2) != v0


def test_plan_fork_by_hand():
    kw = dict(horizon=12, start=2, end=6, threshold=0.5)
    root = (3, 4, 5, 6, 5, 4)  # unfinished, capped at end = 6
    margins = [0.1, 0.2, 0.9, 0.4, 0.3, 0.2]
    top1, top2 = [3, 4, 9, 6, 5, 4], [8, 8, 5, 2, 8, 8]
    plan = plan_fork(root, margins, top1, top2, EOS, **kw)
    assert (plan.category, plan.tau, plan.v0, plan.v1, plan.margin, plan.min_margin) == \
        ("cf_first_gap", 3, 6, 2, 0.4, 0.2)
    b0, b1 = plan.branches
    assert (b0.head, b0.prefix_len, b0.grow, b0.finished) == (root, 3, True, False)  # the whole root continues
    assert (b1.head, b1.prefix_len, b1.grow) == ((3, 4, 5, 2), 3, True)
    # v0 was the top-2 token at t = 2 (margin 0.9, fallback case): v1 is the top-1
    plan = plan_fork(root, [0.1, 0.2, 0.9, 1.4, 1.3, 1.2], top1, top2, EOS, **kw)
    assert (plan.category, plan.tau, plan.v0, plan.v1) == ("cf_min_margin", 2, 5, 9)
    # the alternative is EOS: branch 1 is finished at once; a finished root does not grow
    done = (3, 4, 5, EOS)
    plan = plan_fork(done, [1, 1, 0.3, 1], [3, 4, 5, EOS], [9, 9, EOS, 9], EOS, **kw)
    assert plan.v0 == 5 and plan.v1 == EOS
    assert [(b.head, b.grow, b.finished) for b in plan.branches] == [(done, False, True), ((3, 4, EOS), False, True)]
    # no position in the window: a stopped-tree pair on the whole root
    short = plan_fork((3, EOS), [0.1, 0.1], [3, EOS], [4, 4], EOS, **kw)
    assert (short.category, short.tau, short.v0, short.v1) == ("cf_no_fork", 2, -1, -1)
    assert [(b.head, b.prefix_len, b.grow, b.finished) for b in short.branches] == [((3, EOS), 2, False, True)] * 2
    # a fork at the horizon's last position: branch 1 holds horizon tokens and does not grow
    edge = plan_fork(root, margins, top1, top2, EOS, horizon=4, start=3, end=4, threshold=0.5)
    assert edge.tau == 3 and edge.branches[1].head == (3, 4, 5, 2) and not edge.branches[1].grow
    with pytest.raises(ValueError, match="no token other than v0"):
        plan_fork(root, margins, top1, [-1] * 6, EOS, **kw)


# ---------------------------------------------------------------------------------------------
# ScriptedPolicy margins


def test_scripted_policy_margins_and_top2():
    dist = lambda pre: {EOS: 0.2, 1: 0.5, 2: 0.3} if len(pre) < 2 else {EOS: 1.0}  # noqa: E731
    policy = ScriptedPolicy(dist, EOS, (), seed=0)
    assert policy.top2(()) == (1, 2, math.log(0.5) - math.log(0.3))
    assert policy.top2((1, 1)) == (EOS, -1, math.inf)  # one token in the support
    tie = ScriptedPolicy(lambda pre: {4: 0.5, 3: 0.5}, EOS, (), seed=0)
    assert tie.top2(()) == (3, 4, 0.0)  # ties: the smaller id first
    out = policy.generate([PROMPT, PROMPT + [1]], 5, record_margins=True)
    for prompt, tokens, m, a, b in zip([PROMPT, PROMPT + [1]], out.tokens, out.margins, out.top1, out.top2):
        assert len(m) == len(a) == len(b) == len(tokens)
        context = tuple(prompt[1:])
        assert [(x, y, z) for x, y, z in zip(a, b, m)] == [policy.top2(context + tuple(tokens[:t]))
                                                          for t in range(len(tokens))]
    plain = policy.generate([PROMPT], 5)
    assert plain.margins is None and plain.top1 is None and plain.top2 is None


# ---------------------------------------------------------------------------------------------
# Exact leaf marginals


def hand_dist(prefix: tuple[int, ...]) -> dict[int, float]:
    """Token 0: 1 or 2 (1/2 each). Token 1 after 1: {1: .6, 2: .4} (margin log 1.5 = 0.405, a near-tie);
    after 2: {1: .9, 2: .1} (margin log 9 = 2.2, none). Then EOS."""
    if not prefix:
        return {1: 0.5, 2: 0.5}
    if len(prefix) == 1:
        return {1: 0.6, 2: 0.4} if prefix[0] == 1 else {1: 0.9, 2: 0.1}
    return {EOS: 1.0}


HAND = dict(horizon=3, fork_start=1, fork_end=2, threshold=0.5)


def enumerate_fork(policy: ScriptedPolicy, *, horizon, fork_start, fork_end, threshold, **_):
    """P(leaf b = y, tau = t) and P(category), enumerating every stage-1 root and every continuation."""
    from tests.rollout.test_samplers import complete_draws

    joint = [defaultdict(float), defaultdict(float)]  # (tau, leaf) -> probability, per branch
    cats: Counter = Counter()
    for root, p_root in complete_draws(policy, (), min(fork_end, horizon)):
        ranks = [policy.top2(root[:t]) for t in range(len(root))]
        plan = plan_fork(root, [m for _, _, m in ranks], [a for a, _, _ in ranks], [b for _, b, _ in ranks],
                         policy.eos_id, horizon=horizon, start=fork_start, end=fork_end, threshold=threshold)
        cats[plan.category] += p_root
        for b, br in enumerate(plan.branches):
            if br.grow:
                for cont, p in complete_draws(policy, br.head, horizon - len(br.head)):
                    joint[b][plan.tau, br.head + cont] += p_root * p
            else:
                joint[b][plan.tau, br.head] += p_root
    return joint, cats


def leaf_marginal(joint: dict) -> dict:
    out: defaultdict = defaultdict(float)
    for (_, y), p in joint.items():
        out[y] += p
    return dict(out)


def test_exact_marginals_by_hand():
    policy = ScriptedPolicy(hand_dist, EOS, (), seed=0)
    (j0, j1), cats = enumerate_fork(policy, **HAND)
    m0, m1 = leaf_marginal(j0), leaf_marginal(j1)
    # branch 0 is the on-policy leaf
    assert m0 == pytest.approx({(1, 1, EOS): 0.3, (1, 2, EOS): 0.2, (2, 1, EOS): 0.45, (2, 2, EOS): 0.05})
    # branch 1 swaps the token at t* = 1 for the best other one: after 1 it forks at the near-tie
    # (cf_first_gap), after 2 there is none and it forks at the window's minimum (cf_min_margin)
    assert m1 == pytest.approx({(1, 2, EOS): 0.3, (1, 1, EOS): 0.2, (2, 2, EOS): 0.45, (2, 1, EOS): 0.05})
    assert dict(cats) == pytest.approx({"cf_first_gap": 0.5, "cf_min_margin": 0.5})


def test_sampler_matches_the_hand_marginals():
    policy = ScriptedPolicy(hand_dist, EOS, (), seed=11)
    counts = [Counter(), Counter()]
    groups = 2500
    for _ in range(groups):
        group = cf_fork(policy, PROMPT, K=4, **HAND)
        group.check_conservation(HAND["horizon"])
        for pair in group.pairs:
            assert pair.category == ("cf_first_gap" if pair.leaves[0].tokens[0] == 1 else "cf_min_margin")
            for b, leaf in enumerate(pair.leaves):
                counts[b][tuple(leaf.tokens)] += 1
    n = groups * 4
    joint, _ = enumerate_fork(ScriptedPolicy(hand_dist, EOS, (), seed=0), **HAND)
    for b in range(2):
        worst = max(abs(counts[b][y] / n - p) for y, p in leaf_marginal(joint[b]).items())
        assert worst < 0.025, (b, worst)  # ~5 standard errors at n = 10,000


def small_dist(prefix: tuple[int, ...]) -> dict[int, float]:
    """Vocab {EOS, 1, 2, 3}: after a 2 the next token is a near-tie (margin log(.32/.3) = 0.065), otherwise
    a clear leader (margins 0.92 to 1.39), so roots fork at a first gap or fall back to the minimum."""
    n, last = len(prefix), (prefix[-1] if prefix else None)
    if n == 0:
        return {EOS: 0.1, 1: 0.4, 2: 0.3, 3: 0.2}
    if last == 2:
        return {EOS: 0.3, 1: 0.32, 2: 0.08, 3: 0.3}
    if n % 3 == 1:
        return {EOS: 0.15, 1: 0.6, 2: 0.15, 3: 0.1}
    if n % 3 == 2:
        return {EOS: 0.1, 1: 0.2, 2: 0.15, 3: 0.55}
    return {EOS: 0.15, 1: 0.5, 2: 0.15, 3: 0.2}


SMALL = dict(horizon=6, fork_start=1, fork_end=4, threshold=0.3)


def test_exact_marginal_branch0_is_on_policy_and_branch1_is_a_distribution():
    from tests.rollout.test_samplers import max_deviation

    policy = ScriptedPolicy(small_dist, EOS, (), seed=0)
    for cfg in (SMALL, dict(SMALL, threshold=0.05), dict(SMALL, horizon=3), dict(SMALL, fork_start=3, fork_end=9)):
        (j0, j1), cats = enumerate_fork(policy, **cfg)
        m0, m1 = leaf_marginal(j0), leaf_marginal(j1)
        assert max_deviation(policy, m0, cfg["horizon"]) < 1e-14  # exact, whichever rule chose t*
        assert sum(m1.values()) == pytest.approx(1.0, abs=1e-14)
        assert max_deviation(policy, m1, cfg["horizon"]) > 1e-2  # the alternative is off-policy by design
        assert set(cats) <= set(CF_CATEGORIES) and sum(cats.values()) == pytest.approx(1.0)
    # the roots that end on EOS at position 0 (P = 0.1) cannot fork in [1, 4)
    _, cats = enumerate_fork(policy, **SMALL)
    assert cats["cf_no_fork"] == pytest.approx(0.1) and cats["cf_first_gap"] > 0 and cats["cf_min_margin"] > 0


def test_sampler_matches_enumerated_marginals():
    """The executed sampler draws (tau, leaf) with the enumerated joint probabilities, per branch."""
    policy = ScriptedPolicy(small_dist, EOS, (), seed=101)
    joint, _ = enumerate_fork(ScriptedPolicy(small_dist, EOS, (), seed=0), **SMALL)
    groups = 2500
    counts = [Counter(), Counter()]
    for _ in range(groups):
        for pair in cf_fork(policy, PROMPT, K=4, **SMALL).pairs:
            for b, leaf in enumerate(pair.leaves):
                counts[b][pair.tau, tuple(leaf.tokens)] += 1
    n = groups * 4
    for b in range(2):
        assert set(counts[b]) <= set(joint[b])
        worst = max(abs(counts[b][key] / n - p) for key, p in joint[b].items())
        assert worst < 0.025, (b, worst)


# ---------------------------------------------------------------------------------------------
# Conservation and accounting on random scripted policies


def random_dist(seed: int, vocab: int = 5):
    def dist(prefix: tuple[int, ...]) -> dict[int, float]:
        rng = random.Random(f"{seed}:{prefix}")
        weights = [rng.random() for _ in range(vocab)]
        weights[EOS] *= 0.3
        if rng.random() < 0.1:  # now and then a single-token support (no second-best: margin inf)
            return {1 + rng.randrange(vocab - 1): 1.0}
        total = sum(weights)
        return {t: w / total for t, w in enumerate(weights)}
    return dist


class Recording:
    """Wraps a policy and keeps every generate call's prompts, cap, flag and output."""

    def __init__(self, policy):
        self.policy, self.eos_id, self.has_newline = policy, policy.eos_id, policy.has_newline
        self.calls = []

    def generate(self, prompts, max_new_tokens, record_margins=False):
        out = self.policy.generate(prompts, max_new_tokens, record_margins=record_margins)
        self.calls.append((prompts, max_new_tokens, record_margins, out))
        return out


def test_conservation_and_fork_laws_on_random_policies():
    seen: Counter = Counter()
    for seed in range(200):
        rng = random.Random(seed)
        horizon = rng.randint(1, 16)
        start = rng.randint(1, 4)
        kw = dict(horizon=horizon, K=rng.randint(1, 4), fork_start=start, fork_end=start + rng.randint(1, 6),
                  threshold=rng.choice([0.0, 0.3, 0.8, 2.0]))
        policy = Recording(ScriptedPolicy(random_dist(seed), EOS, (), seed=seed, prompt_len=2))
        prompt = [9, 9]
        group = cf_fork(policy, prompt, **kw)
        assert isinstance(group, ForkGroup) and isinstance(group, RolloutGroup)
        group.check_conservation(horizon)
        seen.update(group.category_counts())
        assert [p.k for p in group.pairs] == list(range(kw["K"])) and all(len(p.leaves) == 2 for p in group.pairs)
        (p1, cap1, flag1, roots), *stage2 = policy.calls
        assert p1 == [prompt] * kw["K"] and cap1 == min(kw["fork_end"], horizon) and flag1
        assert len(stage2) <= 1 and all(not flag for _, _, flag, _ in stage2)
        for pair, root, margins in zip(group.pairs, roots.tokens, roots.margins):
            l0, l1 = pair.leaves
            assert l0.tokens[:len(root)] == root  # branch 0 keeps the whole root
            for leaf in pair.leaves:
                assert len(leaf.tokens) <= horizon and EOS not in leaf.tokens[:-1]
                assert leaf.finished == (bool(leaf.tokens) and leaf.tokens[-1] == EOS)
            if pair.category == "cf_no_fork":
                assert pair.tau == len(root) and l1.tokens[:len(root)] == root
                continue
            t = pair.tau
            assert kw["fork_start"] <= t < min(kw["fork_end"], len(root))
            assert pair.v1 != pair.v0 == root[t] and l1.tokens[:t] == root[:t] and l1.tokens[t] == pair.v1
            assert pair.margin == margins[t]
            if pair.category == "cf_first_gap":
                assert pair.margin <= kw["threshold"]
                assert all(not m <= kw["threshold"] for m in margins[kw["fork_start"]:t])
            else:
                assert all(m > kw["threshold"] for m in margins[kw["fork_start"]:kw["fork_end"]]
                           if math.isfinite(m))
                assert pair.margin == pair.min_margin
        outs = [out for *_, out in policy.calls]
        assert group.gen_tokens == sum(o.generated_tokens for o in outs)
        assert group.prefill_tokens == sum(o.prefill_tokens for o in outs)
        assert group.untrimmed_steps == sum(o.untrimmed_steps for o in outs)
        # stage 2 prompts: prompt + the head of every growing leaf, in (k, b) order
        heads = []
        for pair, root in zip(group.pairs, roots.tokens):
            for b, leaf in enumerate(pair.leaves):
                head = root if (b == 0 or pair.category == "cf_no_fork") else root[:pair.tau] + [pair.v1]
                if head[-1:] != [EOS] and len(head) < horizon:
                    heads.append(head)
        if heads:
            assert [pr[2:] for pr in stage2[0][0]] == heads
            assert group.prefill_tokens == kw["K"] * 2 + sum(2 + len(h) for h in heads)
    assert all(seen[c] for c in CF_CATEGORIES), seen


def test_check_conservation_names_a_broken_fork():
    good = ForkPair(0, "cf_first_gap", [Leaf([1, 2, 5, 0], 2, True), Leaf([1, 2, 6, 0], 2, True)], 2, 5, 3,
                    5, 6, 5, 6, 0.25, 0.25)
    ForkGroup([good], 8, 2, 2, 8).check_conservation(horizon=4)
    same = ForkPair(1, "cf_first_gap", [Leaf([1, 2, 5, 0], 2, True), Leaf([1, 2, 5, 0], 2, True)], 2, 5, 3,
                    5, 5, 5, 6, 0.25, 0.25)
    with pytest.raises(AssertionError, match="k=1 .*v1=5 invalid"):
        ForkGroup([good, same], 8, 2, 2, 8).check_conservation(horizon=4)
    moved = ForkPair(0, "cf_min_margin", [Leaf([1, 2, 5, 0], 2, True), Leaf([1, 6, 0], 2, True)], 2, 5, 2,
                     5, 6, 5, 6, 0.25, 0.25)
    with pytest.raises(AssertionError, match="v0 / v1 at 2"):
        ForkGroup([moved], 7, 2, 2, 7).check_conservation(horizon=4)
    with pytest.raises(AssertionError, match="k=0 .*L=4"):  # the samplers' token laws still apply
        ForkGroup([good], 8, 2, 2, 8).check_conservation(horizon=3)
    with pytest.raises(AssertionError, match="not a fork pair"):
        ForkGroup([good], 8, 2, 2, 8).with_category("flat").check_conservation(horizon=4)


def test_registry_and_arguments():
    from rlvr_sweep.rollout import SAMPLERS

    assert SAMPLERS["cf_fork"].fn is cf_fork and SAMPLERS["cf_fork"].credits == ("fork",)
    with pytest.raises(ValueError, match=r"unknown sampler 'fork'; valid: \['cf_fork'"):
        SAMPLERS["fork"]
    policy = ScriptedPolicy(small_dist, EOS, (), seed=0)
    with pytest.raises(ValueError, match="B=2"):
        cf_fork(policy, PROMPT, horizon=6, B=3)
    for start, end in [(4, 4), (0, 4)]:
        with pytest.raises(ValueError, match="1 <= fork_start < fork_end"):
            cf_fork(policy, PROMPT, horizon=6, fork_start=start, fork_end=end)


# ---------------------------------------------------------------------------------------------
# ModelPolicy on the shipped tiny checkpoint


def test_model_policy_cf_fork_conserves_and_reproduces():
    from rlvr_sweep.config import ModelConfig
    from rlvr_sweep.data import encode_prompts
    from rlvr_sweep.policy import load_policy

    tiny = load_policy(ModelConfig(name="tiny", hub_id=None, path="pkg:rlvr_sweep.policy/assets/tiny_qwen3",
                                   dtype="float32", device="cpu"))
    prompt = encode_prompts(tiny.tokenizer, ["Compute 12+7."])[0]
    kw = dict(horizon=24, K=4, fork_start=2, fork_end=8, threshold=0.5)

    def run(seed: int) -> ForkGroup:
        policy = ModelPolicy(tiny, temperature=0.8, top_p=0.9, generator=torch.Generator().manual_seed(seed))
        return cf_fork(policy, prompt, **kw)

    first = run(0)
    first.check_conservation(kw["horizon"])
    assert first == run(0)
    forked = [p for p in first.pairs if p.category != "cf_no_fork"]
    assert forked
    for pair in forked:
        assert pair.v1 in (pair.top1, pair.top2) and pair.v1 != pair.v0 and pair.top1 != pair.top2
        assert pair.margin >= 0 and (pair.category != "cf_first_gap" or pair.margin <= kw["threshold"])

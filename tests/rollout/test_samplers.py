"""Tests for rlvr_sweep.samplers and rlvr_sweep.policies (seed paper §4.2, PASS 2 / PASS 3).

Scripted finite policies with exact probabilities check the samplers' distributions: the paper's
4-outcome check at p = 1/2, an exact enumeration of every leaf marginal on a small policy, and the
token conservation laws on random policies. The tiny shipped checkpoint checks ``ModelPolicy``.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import pytest
import torch

from rlvr_sweep.rollout.policies import ModelPolicy, SamplingPolicy, ScriptedPolicy
from rlvr_sweep.rollout.samplers import (
    CATEGORIES, SAMPLERS, Leaf, Pair, RolloutGroup, causal_stop, find_midpoint_boundary, flat, midpoint, plan_pair,
    root_restart, stopped_tree,
)

# the two-stage sampler functions, called with the tree arguments (the registry binds them from config)
TREES = {"flat": flat, "stopped_tree": stopped_tree, "root_restart": root_restart, "midpoint": midpoint}
from rlvr_sweep.verify.analytic import complete_draws, exact_marginals  # the enumeration PASS 2 runs

EOS, FILL, NL = 0, 1, 2
PROMPT = [7]  # ScriptedPolicy strips it (prompt_len=1): dist_fns see only generated tokens
MODES = {"stopped_tree": "terminal_dup", "root_restart": "root_resample", "midpoint": "midpoint"}


# ---------------------------------------------------------------------------------------------
# Pure rules by hand


def is_nl(token: int) -> bool:
    return token == NL


def test_causal_stop_by_hand():
    assert causal_stop([1, 2, 1, 2, 1], is_nl, EOS, t_min=3, t_max=5) == (4, False)  # NL at 2 < t_min
    assert causal_stop([1, 1, 1, 1, 1], is_nl, EOS, t_min=3, t_max=5) == (5, False)  # no NL: T_max
    assert causal_stop([1, 0], is_nl, EOS, t_min=3, t_max=5) == (2, True)  # EOS before any boundary
    assert causal_stop([1, 1, 1, 1, 0], is_nl, EOS, t_min=3, t_max=5) == (5, True)  # T_EOS = T_max
    assert causal_stop([1, 1, 2, 0], is_nl, EOS, t_min=3, t_max=5) == (3, False)  # NL before EOS
    assert causal_stop([1, 1], is_nl, EOS, t_min=3, t_max=5) == (2, False)  # capped below T_max


def test_find_midpoint_boundary_by_hand():
    assert find_midpoint_boundary([2, 1, 1, 2, 1, 0], is_nl) == 4  # |4 - 3| < |1 - 3|
    assert find_midpoint_boundary([2, 1, 2, 1, 0], is_nl) == 3  # L/2 = 2.5: 3 is nearer than 1
    assert find_midpoint_boundary([1, 2, 1, 2, 1, 0], is_nl) == 2  # tie |2-3| = |4-3|: earlier
    assert find_midpoint_boundary([1, 1, 0], is_nl) is None
    assert find_midpoint_boundary([1, 1, 2], is_nl) is None  # the last token is not interior


def test_plan_pair_midpoint_rules():
    kw = dict(B=2, t_min=5, t_max=8, midpoint_min_len=4, long_eos_len=5)
    short = plan_pair("midpoint", [2, 1, 0], is_nl, EOS, **kw)  # L=3 < 4: restarted, as root_resample
    assert short.category == "tau_zero" and short.tau == 0 and [b.prefix_len for b in short.branches] == [0, 0]
    assert [(b.head, b.grow, b.finished) for b in short.branches] == [((2, 1, 0), False, True), ((), True, False)]
    mid = plan_pair("midpoint", [1, 2, 1, 0], is_nl, EOS, **kw)  # L=4 <= 5
    assert mid.category == "midpoint_fallback" and mid.tau == 2
    assert [(b.head, b.grow) for b in mid.branches] == [((1, 2, 1, 0), False), ((1, 2), True)]
    long = plan_pair("midpoint", [1, 1, 2, 1, 1, 0], is_nl, EOS, **kw)  # L=6 > 5
    assert long.category == "early_eos_gt104" and long.tau == 3
    no_nl = plan_pair("midpoint", [1, 1, 1, 1, 1, 0], is_nl, EOS, **kw)  # long, no interior newline
    assert no_nl.category == "tau_zero" and no_nl.tau == 0
    assert [(b.head, b.grow) for b in no_nl.branches] == [((1, 1, 1, 1, 1, 0), False), ((), True)]


def test_the_registry_lists_valid_names_and_declares_what_each_reads():
    assert SAMPLERS.names() == ["cf_fork", "flat", "midpoint", "root_restart", "stopped_tree"]
    assert SAMPLERS["midpoint"].fn is midpoint and SAMPLERS["flat"].credits == ("leaf",)
    with pytest.raises(ValueError, match="unknown sampler 'tree'; valid: .*root_restart"):
        SAMPLERS["tree"]
    assert {"midpoint_min_len", "long_eos_len"} <= set(SAMPLERS["midpoint"].reads)
    assert "midpoint_min_len" not in SAMPLERS["stopped_tree"].reads and "t_min" not in SAMPLERS["cf_fork"].reads


# ---------------------------------------------------------------------------------------------
# ScriptedPolicy


def test_scripted_policy_generate_accounting_and_probs():
    dist = lambda pre: {EOS: 0.5, FILL: 0.5} if len(pre) < 3 else {EOS: 1.0}  # noqa: E731
    policy = ScriptedPolicy(dist, EOS, [NL], seed=0)
    assert isinstance(policy, SamplingPolicy)
    out = policy.generate([PROMPT, PROMPT + [FILL, FILL]], max_new_tokens=5)
    assert out.prefill_tokens == 4 and out.padded_prefill_tokens == 6
    assert out.generated_tokens == sum(out.lengths) and out.untrimmed_steps == 2 * max(out.lengths)
    assert all(f == (t[-1] == EOS) for t, f in zip(out.tokens, out.finished))
    assert len(out.tokens[1]) <= 2  # the prompt's two FILLs count as prefix: EOS by the 2nd step
    assert policy.sequence_prob([FILL, FILL, EOS]) == 0.125
    assert policy.sequence_prob([FILL, EOS], given=1) == 0.5
    assert policy.sequence_prob([EOS, FILL]) == 0.0 and policy.sequence_prob([FILL, FILL], cap=1) == 0.0
    assert policy.calls == [2]


# ---------------------------------------------------------------------------------------------
# The paper's PASS 2 check: immediate EOS with p = 1/2, otherwise run to the newline at t = 49


def four_outcome(prefix: tuple[int, ...]) -> dict[int, float]:
    """[EOS] w.p. 1/2, else FILL x48, NL at position 49, one of {3, 4, 5}, EOS: 4 outcomes."""
    n = len(prefix)
    if n == 0:
        return {EOS: 0.5, FILL: 0.5}
    if n < 48:
        return {FILL: 1.0}
    if n == 48:
        return {NL: 1.0}
    if n == 49:
        return {3: 1 / 3, 4: 1 / 3, 5: 1 / 3}
    return {EOS: 1.0}


PAPER_TREE = dict(horizon=64, K=4, B=2, t_min=40, t_max=60)


def paper_check(name: str, groups: int = 4000, seed: int = 42):
    """Per-branch EOS frequencies and prefix lengths by pair category over `groups` groups."""
    policy = ScriptedPolicy(four_outcome, EOS, [NL], seed=seed)
    eos = [0, 0]
    pls: dict[str, set] = defaultdict(set)
    group_pls: dict[int, list[int]] = {}  # number of early-EOS pairs -> sorted prefix lengths seen
    for _ in range(groups):
        group = TREES[name](policy, PROMPT, **PAPER_TREE)
        group.check_conservation(PAPER_TREE["horizon"])
        for pair in group.pairs:
            pls[pair.category].add(tuple(leaf.prefix_len for leaf in pair.leaves))
            for b, leaf in enumerate(pair.leaves):
                eos[b] += leaf.tokens == [EOS]
        early = sum(p.category != "causal_non_eos" for p in group.pairs)
        group_pls.setdefault(early, sorted(group.prefix_lens()))
    n = groups * PAPER_TREE["K"]
    return (eos[0] / n, eos[1] / n), dict(pls), group_pls


def test_paper_check_stopped_tree():
    freqs, pls, group_pls = paper_check("stopped_tree")
    assert freqs == pytest.approx((0.50, 0.50), abs=0.015)
    # Early-EOS pairs are terminal_dup with pl = T_EOS = 1 for both leaves; causal pairs split at 49.
    assert pls == {"terminal_dup": {(1, 1)}, "causal_non_eos": {(49, 49)}}
    # A group with 2 early-EOS roots and 2 causal roots gives the paper's list.
    assert group_pls[2] == [1, 1, 1, 1, 49, 49, 49, 49]


def test_paper_check_root_restart():
    freqs, pls, group_pls = paper_check("root_restart")
    assert freqs == pytest.approx((0.50, 0.25), abs=0.015)  # P(Y2 = EOS) = p^2
    assert pls == {"tau_zero": {(0, 0)}, "causal_non_eos": {(49, 49)}}
    assert group_pls[2] == [0, 0, 0, 0, 49, 49, 49, 49]


@pytest.mark.parametrize("mode, expected", [("terminal_dup", (0.5, 0.5)), ("root_resample", (0.5, 0.25))])
def test_paper_law_by_exact_enumeration(mode, expected):
    """PASS 2 without sampling: P(branch b = [EOS]) on the 4-outcome policy at p = 1/2, enumerated.
    Stopped tree keeps both siblings at p; root restart gives branch 2 p * p."""
    marg = exact_marginals(ScriptedPolicy(four_outcome, EOS, [NL], seed=0), mode,
                           midpoint_min_len=32, long_eos_len=104, **PAPER_TREE)
    assert tuple(sum(p for y, p in m.items() if y == (EOS,)) for m in marg) == expected
    assert all(sum(m.values()) == pytest.approx(1.0, abs=1e-15) for m in marg)


def test_paper_check_midpoint_short_roots_restart():
    """The 4-outcome policy's early EOS is 1 token long (< midpoint_min_len): a tau_zero pair whose
    branch 2 is redrawn from the prompt, so P(Y2 = EOS) = p^2 = 0.25 as in root restart."""
    freqs, pls, group_pls = paper_check("midpoint")
    assert freqs == pytest.approx((0.50, 0.25), abs=0.015)
    assert pls == {"tau_zero": {(0, 0)}, "causal_non_eos": {(49, 49)}}
    marg = exact_marginals(ScriptedPolicy(four_outcome, EOS, [NL], seed=0), "midpoint",
                           midpoint_min_len=32, long_eos_len=104, **PAPER_TREE)
    assert sum(p for y, p in marg[0].items() if y == (EOS,)) == 0.5
    assert sum(p for y, p in marg[1].items() if y == (EOS,)) == 0.25  # exact: p * p
    # the other 3/4 of branch 2's mass: the long outcomes, each 1/4 (from a causal prefix, 1/2 x 1/3,
    # or from a restart after an early EOS, 1/2 x 1/2 x 1/3)
    long = {y: p for y, p in marg[1].items() if len(y) > 1}
    assert sorted(long.values()) == pytest.approx([0.25] * 3, abs=1e-15)


# ---------------------------------------------------------------------------------------------
# Exact leaf marginals by enumeration, on a small policy


def small_dist(prefix: tuple[int, ...]) -> dict[int, float]:
    """Vocab {EOS, FILL, NL, 3}; probabilities depend on the position and the last token."""
    n, last = len(prefix), (prefix[-1] if prefix else None)
    if n == 0:
        return {EOS: 0.2, FILL: 0.3, NL: 0.3, 3: 0.2}
    if last == NL:
        return {EOS: 0.45, FILL: 0.25, NL: 0.1, 3: 0.2}
    return {EOS: 0.15 + 0.05 * (n % 3), FILL: 0.35, NL: 0.25, 3: 0.25 - 0.05 * (n % 3)}


SMALL = dict(horizon=6, K=4, B=2, t_min=2, t_max=3, midpoint_min_len=2, long_eos_len=2)


def max_deviation(policy: ScriptedPolicy, marginal: dict, horizon: int) -> float:
    """Largest |P(Y_b = y) - pi(y | x)| over every complete leaf y of the capped kernel."""
    target = dict(complete_draws(policy, (), horizon))
    assert all(abs(policy.sequence_prob(y, cap=horizon) - p) < 1e-15 for y, p in target.items())
    assert set(marginal) <= set(target)
    return max(abs(marginal.get(y, 0.0) - policy.sequence_prob(y, cap=horizon)) for y in target)


@pytest.fixture(scope="module")
def small_policy():
    return ScriptedPolicy(small_dist, EOS, [NL], seed=0)


@pytest.mark.parametrize("cfg", [SMALL, dict(SMALL, horizon=3, t_max=5)], ids=["h6", "horizon_below_tmax"])
def test_exact_marginal_stopped_tree(small_policy, cfg):
    marg = exact_marginals(small_policy, "terminal_dup", **cfg)
    devs = [max_deviation(small_policy, m, cfg["horizon"]) for m in marg]
    print(f"stopped_tree exact-marginal max |dev| per branch: {devs} over {len(marg[0])} leaves")
    assert max(devs) < 1e-14  # exact up to float rounding (~1e-16)
    assert len(marg[0]) >= 40  # the enumeration covers many distinct leaves


def test_exact_marginal_outcome_dependent_samplers_are_biased(small_policy):
    for mode in ("root_resample", "midpoint"):
        marg = exact_marginals(small_policy, mode, **SMALL)
        dev1, dev2 = (max_deviation(small_policy, m, SMALL["horizon"]) for m in marg)
        print(f"{mode}: branch 1 max |dev| {dev1:.3g}, branch 2 max |dev| {dev2:.3g}")
        assert dev1 < 1e-14  # branch 1 keeps the root or a causal continuation: still exact
        assert dev2 > 1e-2  # branch 2 depends on the outcome at EOS: biased


@pytest.mark.parametrize("name", ["stopped_tree", "root_restart", "midpoint"])
def test_sampler_matches_enumerated_marginals(name):
    """The executed sampler draws leaves with the enumerated marginals (leaf length per branch)."""
    policy = ScriptedPolicy(small_dist, EOS, [NL], seed=101)
    marg = exact_marginals(policy, MODES[name], **SMALL)
    groups = 2500
    counts = [Counter(), Counter()]
    for _ in range(groups):
        group = TREES[name](policy, PROMPT, **SMALL)
        for pair in group.pairs:
            for b, leaf in enumerate(pair.leaves):
                counts[b][len(leaf.tokens)] += 1
    n = groups * SMALL["K"]
    for b in range(2):
        exact = Counter()
        for y, p in marg[b].items():
            exact[len(y)] += p
        worst = max(abs(counts[b][L] / n - exact[L]) for L in range(1, SMALL["horizon"] + 1))
        assert worst < 0.02, (name, b, worst)  # ~5 standard errors at n = 10,000


# ---------------------------------------------------------------------------------------------
# Conservation, categories, horizon and batching on random scripted policies


def random_dist(seed: int, vocab: int = 5):
    def dist(prefix: tuple[int, ...]) -> dict[int, float]:
        rng = random.Random(f"{seed}:{prefix}")  # str seeds are stable across processes
        weights = [rng.random() for _ in range(vocab)]
        weights[EOS] *= 0.4
        total = sum(weights)
        return {t: w / total for t, w in enumerate(weights)}
    return dist


ALLOWED = {
    "flat": {"flat"},
    "stopped_tree": {"causal_non_eos", "terminal_dup"},
    "root_restart": {"causal_non_eos", "tau_zero"},
    "midpoint": {"causal_non_eos", "tau_zero", "midpoint_fallback", "early_eos_gt104"},
}


def expected_prefill(group: RolloutGroup, prompt_len: int, horizon: int) -> int:
    """Stage-1 prompts plus one prompt + shared head per growing branch (flat: K*B prompts)."""
    total = 0
    for pair in group.pairs:
        B = len(pair.leaves)
        if pair.category in ("flat", "flat_warmup"):
            total += B * prompt_len
            continue
        total += prompt_len  # this pair's stage-1 root
        if pair.category == "causal_non_eos" and pair.tau < horizon:
            total += B * (prompt_len + pair.tau)
        elif pair.category in ("tau_zero", "midpoint_fallback", "early_eos_gt104"):
            total += (B - 1) * (prompt_len + pair.tau)
    return total


class Recording:
    """Wraps a policy and keeps every generate call's prompts, cap and output."""

    def __init__(self, policy):
        self.policy, self.eos_id, self.has_newline = policy, policy.eos_id, policy.has_newline
        self.calls = []

    def generate(self, prompts, max_new_tokens):
        out = self.policy.generate(prompts, max_new_tokens)
        self.calls.append((prompts, max_new_tokens, out))
        return out


@pytest.mark.parametrize("name", list(TREES))
def test_conservation_on_random_policies(name):
    seen = Counter()
    for seed in range(150):
        rng = random.Random(seed)
        horizon = rng.randint(1, 14)
        t_min = rng.randint(1, 6)
        kw = dict(horizon=horizon, K=rng.randint(1, 4), B=rng.randint(2, 3), t_min=t_min,
                  t_max=t_min + rng.randint(0, 4), midpoint_min_len=rng.randint(2, 4),
                  long_eos_len=rng.randint(3, 6))
        policy = Recording(ScriptedPolicy(random_dist(seed), EOS, {2, 3}, seed=seed, prompt_len=2))
        prompt = [9, 9]
        group = TREES[name](policy, prompt, **kw)
        group.check_conservation(horizon)
        seen.update(group.category_counts())
        assert len(group.pairs) == kw["K"] and all(len(p.leaves) == kw["B"] for p in group.pairs)
        assert [p.k for p in group.pairs] == list(range(kw["K"]))
        assert set(group.category_counts()) <= ALLOWED[name]
        for leaf in group.leaves():
            assert len(leaf.tokens) <= horizon
            assert leaf.finished == (bool(leaf.tokens) and leaf.tokens[-1] == EOS)
            assert EOS not in leaf.tokens[:-1]
        outs = [out for _, _, out in policy.calls]
        assert group.gen_tokens == sum(o.generated_tokens for o in outs)
        assert group.prefill_tokens == sum(o.prefill_tokens for o in outs)
        assert group.prefill_tokens == expected_prefill(group, len(prompt), horizon)
        assert group.padded_prefill_tokens == sum(o.padded_prefill_tokens for o in outs)
        assert group.untrimmed_steps == sum(o.untrimmed_steps for o in outs)
        if name == "flat":
            assert len(policy.calls) == 1 and len(policy.calls[0][0]) == kw["K"] * kw["B"]
            continue
        # Batching: one stage-1 call of K prompts; one stage-2 call iff some branch grows.
        stage1_prompts, cap1, roots = policy.calls[0]
        assert stage1_prompts == [prompt] * kw["K"] and cap1 == min(kw["t_max"], horizon)
        expected_heads = []  # stage-2 prompt suffixes, in (k, b) order
        for pair, root in zip(group.pairs, roots.tokens):
            if pair.category == "causal_non_eos" and pair.tau < horizon:
                expected_heads += [root[:pair.tau]] * kw["B"]
            elif pair.category in ("tau_zero", "midpoint_fallback", "early_eos_gt104"):
                expected_heads += [root[:pair.tau]] * (kw["B"] - 1)
        assert len(policy.calls) == (2 if expected_heads else 1)
        if expected_heads:
            prompts2, cap2, _ = policy.calls[1]
            assert [pr[:len(prompt)] for pr in prompts2] == [prompt] * len(prompts2)
            assert [pr[len(prompt):] for pr in prompts2] == expected_heads
            assert cap2 == horizon - min(len(h) for h in expected_heads)
        for pair, root in zip(group.pairs, roots.tokens):
            tau, early = causal_stop(root, policy.has_newline, EOS, kw["t_min"], kw["t_max"])
            assert early == (pair.category != "causal_non_eos")
            if pair.category == "causal_non_eos":
                assert pair.tau == tau and all(leaf.tokens[:tau] == root[:tau] for leaf in pair.leaves)
            elif pair.category == "terminal_dup":
                assert all(leaf.tokens == root and leaf.prefix_len == len(root) for leaf in pair.leaves)
            else:  # tau_zero / midpoint splits keep the finished root as branch 1
                assert pair.leaves[0].tokens == root and pair.leaves[0].finished
    if name == "midpoint":
        assert seen["midpoint_fallback"] and seen["early_eos_gt104"] and seen["tau_zero"]
    elif name != "flat":
        assert all(seen[c] for c in ALLOWED[name])


def test_check_conservation_names_the_broken_pair():
    good = Pair(0, "causal_non_eos", [Leaf([1, 2, 5, 0], 2, True), Leaf([1, 2, 0], 2, True)], 2, 4, 3)
    bad = Pair(1, "terminal_dup", [Leaf([4, 0], 2, True), Leaf([4, 0], 2, True)], 2, 3, 0)
    RolloutGroup([good], 10, 2, 2, 10).check_conservation(horizon=4)
    with pytest.raises(AssertionError, match="k=1 .terminal_dup."):
        RolloutGroup([good, bad], 10, 2, 2, 10).check_conservation(horizon=4)
    with pytest.raises(AssertionError, match="k=0 .*L=4"):
        RolloutGroup([good], 10, 2, 2, 10).check_conservation(horizon=3)
    forked = Pair(0, "causal_non_eos", [Leaf([1, 2, 0], 2, True), Leaf([1, 3, 0], 2, True)], 2, 4, 2)
    with pytest.raises(AssertionError, match="differ"):
        RolloutGroup([forked], 6, 2, 2, 6).check_conservation(horizon=4)


def test_with_category_relabels_flat_warmup():
    group = TREES["flat"](ScriptedPolicy(small_dist, EOS, [NL], seed=3), PROMPT, horizon=5)
    warm = group.with_category("flat_warmup")
    assert warm.category_counts() == {"flat_warmup": 4} and group.category_counts() == {"flat": 4}
    assert "flat_warmup" in CATEGORIES


# ---------------------------------------------------------------------------------------------
# ModelPolicy on the shipped tiny checkpoint


@pytest.fixture(scope="module")
def tiny_policy():
    from rlvr_sweep.config import ModelConfig
    from rlvr_sweep.policy import load_policy

    return load_policy(ModelConfig(name="tiny", hub_id=None, path="pkg:rlvr_sweep.policy/assets/tiny_qwen3",
                                   dtype="float32", device="cpu"))


def test_model_policy_newlines(tiny_policy):
    policy = ModelPolicy(tiny_policy, temperature=0.8, top_p=0.9)
    tok = tiny_policy.tokenizer
    assert policy.eos_id == tiny_policy.eos_id
    assert policy.newline_ids and all("\n" in tok.decode([i]) for i in policy.newline_ids)
    assert policy.has_newline(tok.encode("\n")[0]) and not policy.has_newline(policy.eos_id)
    assert not policy.has_newline(10_000)  # past the vocabulary


@pytest.mark.parametrize("name", list(TREES))
def test_model_policy_samplers_conserve_and_reproduce(name, tiny_policy):
    from rlvr_sweep.data import encode_prompts

    prompt = encode_prompts(tiny_policy.tokenizer, ["Compute 12+7."])[0]
    kw = dict(horizon=24, K=4, B=2, t_min=4, t_max=8, midpoint_min_len=4, long_eos_len=6)

    def run(seed: int) -> RolloutGroup:
        policy = ModelPolicy(tiny_policy, temperature=0.8, top_p=0.9, generator=torch.Generator().manual_seed(seed))
        return TREES[name](policy, prompt, **kw)

    first, again = run(0), run(0)
    first.check_conservation(kw["horizon"])
    assert first == again  # same generator seed, same group (tokens, categories, accounting)
    assert set(first.category_counts()) <= ALLOWED[name]
    stage2 = sum(p.stage2_generated for p in first.pairs)
    if name == "flat":
        assert first.gen_tokens == sum(len(leaf.tokens) for leaf in first.leaves())
    else:  # stage 1 generated every root token, kept or not, on top of the stage-2 tokens
        assert first.gen_tokens >= stage2 + max(p.tau for p in first.pairs)
    assert first.prefill_tokens == expected_prefill(first, len(prompt), kw["horizon"])

"""Rollout samplers: flat GRPO groups and two-stage K x B branched trees (seed paper §1, §4.2).

Stage 1 draws K roots of up to ``T_max`` tokens in one batched call. Each root stops at
``tau_causal = min(T_max, first t >= T_min whose token contains "\\n")`` or at its EOS ``T_EOS``
(:func:`causal_stop`). What happens to a root with early EOS (``T_EOS <= tau_causal``) is the only
difference between the three tree samplers (§4.2 items 1-3):

- ``stopped_tree`` (``--strict-causal-tau --early-eos-mode terminal_dup``): ``tau_k = min(tau_causal,
  T_EOS)`` is a stopping time, the finished root is an absorbing leaf duplicated into both branches, and
  every leaf has exactly the capped on-policy marginal.
- ``root_restart`` (``--early-eos-mode root_resample``): ``tau_k = 0`` is set after seeing the EOS;
  branch 1 keeps the root, branch 2 is a fresh draw. Branch 2's marginal is biased (P(EOS) = p^2).
- ``midpoint`` (no strict causal tau): an early-EOS root of at least ``midpoint_min_len`` tokens keeps
  branch 1 and re-grows branch 2 from an interior newline chosen after seeing the whole root
  (:func:`find_midpoint_boundary`); a shorter one, or one without an interior newline, is handled as in
  ``root_restart`` (``tau = 0``, branch 2 redrawn from the prompt). Also biased.

All other roots (``T_EOS > tau_causal``, including roots capped at ``T_max`` without a newline, where
``tau = T_max``) share ``root[:tau]`` and draw B independent continuations of up to ``horizon - tau``
tokens, all in one batched stage-2 call (``midpoint`` too: we read "no strict causal tau" as concerning
only its early-EOS roots). The rules are pure functions (:func:`causal_stop`,
:func:`find_midpoint_boundary`, :func:`plan_pair`) so tests can enumerate exact leaf marginals.

Pair categories (``Pair.category``):

- ``flat``: a flat group, K pairs of B independent rollouts, ``prefix_len`` 0.
- ``flat_warmup``: the same, relabelled by the trainer while a tree arm is in warmup
  (``RolloutGroup.with_category``); no sampler emits it.
- ``causal_non_eos``: ``T_EOS > tau_causal``; both leaves share ``root[:tau]``, ``prefix_len = tau``.
- ``terminal_dup``: ``stopped_tree`` early EOS, duplicated; ``prefix_len = T_EOS`` = leaf length.
- ``tau_zero``: ``root_restart`` early EOS, and ``midpoint`` early EOS shorter than ``midpoint_min_len``
  or without an interior newline; ``prefix_len`` 0 for both leaves. The paper's Table 2A needs this
  for the midpoint sampler: Arm 10 has 56 post-warmup divergent pairs of which only 45 share a
  prefix, and a duplicated root can never diverge.
- ``midpoint_fallback``: ``midpoint`` split of an early-EOS root of length in
  ``[midpoint_min_len, long_eos_len]``; ``prefix_len`` = the boundary for both leaves.
- ``early_eos_gt104``: the same split for an early-EOS root longer than ``long_eos_len`` (104 paper
  tokens). The paper names ``early_eos_gt104_pairs`` beside ``midpoint_fallback_pairs`` for Arm 9 without
  defining it; its counts (3, 5, 6 vs 12, 4, 2) are not a subset of the fallback counts, so we read the two
  as disjoint labels of midpoint-split pairs, split by root length. This is our reading, not the paper's.

Token accounting: ``RolloutGroup.gen_tokens`` etc. sum the ``Generation`` fields of every call, so they
count compute actually spent (root tails past ``tau`` and stage-2 tokens past a row's own budget
included). ``Pair.stage1_leaf_tokens`` / ``stage2_generated`` count only tokens that sit in its leaves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from rlvr_sweep.config.options import Option, Registry
from rlvr_sweep.config.categories import CATEGORIES

__all__ = [
    "CATEGORIES", "Leaf", "Pair", "RolloutGroup", "Branch", "PairPlan", "causal_stop",
    "find_midpoint_boundary", "plan_pair", "flat", "stopped_tree", "root_restart", "midpoint",
    "SAMPLERS", "flat_group",
]



@dataclass
class Leaf:
    """One rollout: ``tokens`` after the prompt (shared prefix + continuation, EOS kept).

    ``prefix_len`` leading tokens are the stage-1 prefix credited as shared prefix (0 when none).
    """

    tokens: list[int]
    prefix_len: int
    finished: bool  # ended on EOS (False: hit the horizon)
    # the engine's raw log-probability of each token as it sampled it (flat groups of an engine that records it)
    logprobs: list[float] | None = field(default=None, compare=False, repr=False)


@dataclass
class Pair:
    k: int
    category: str
    leaves: list[Leaf]
    tau: int  # the stage-1 split point: prefix length shared by the leaves (0 = none)
    stage1_leaf_tokens: int  # leaf tokens taken from stage-1 roots, summed over the pair's leaves
    stage2_generated: int  # leaf tokens drawn in stage 2, summed over the pair's leaves


@dataclass
class RolloutGroup:
    pairs: list[Pair]
    gen_tokens: int  # tokens generated over all calls (stage 1 + stage 2), trimmed tails included
    prefill_tokens: int  # unpadded prompt tokens fed to the model, summed over calls
    padded_prefill_tokens: int
    untrimmed_steps: int

    def leaves(self) -> list[Leaf]:
        """All leaves, in (k, b) order."""
        return [leaf for pair in self.pairs for leaf in pair.leaves]

    def prefix_lens(self) -> list[int]:
        return [leaf.prefix_len for leaf in self.leaves()]

    def category_counts(self) -> dict[str, int]:
        return dict(Counter(pair.category for pair in self.pairs))

    def with_category(self, category: str) -> RolloutGroup:
        """A copy with every pair relabelled (the trainer's ``flat_warmup``)."""
        if category not in CATEGORIES:
            raise ValueError(f"unknown pair category {category!r}; valid: {list(CATEGORIES)}")
        return replace(self, pairs=[replace(p, category=category) for p in self.pairs])

    def check_conservation(self, horizon: int) -> None:
        """Raise AssertionError naming the pair when a token law fails (the paper's PASS 3 laws).

        Per pair: stage-1 leaf tokens + stage-2 generated = sum of leaf lengths; every leaf has
        ``0 <= L - pl <= horizon - pl``; the leaves agree on their shared ``tokens[:pl]``.
        In total: the same sum over all pairs.
        """
        for pair in self.pairs:
            name = f"pair k={pair.k} ({pair.category})"
            lengths = [len(leaf.tokens) for leaf in pair.leaves]
            assert pair.stage1_leaf_tokens + pair.stage2_generated == sum(lengths), (
                f"{name}: stage1_leaf_tokens {pair.stage1_leaf_tokens} + stage2_generated "
                f"{pair.stage2_generated} != leaf tokens {sum(lengths)} {lengths}")
            assert pair.category in CATEGORIES, f"{name}: unknown category"
            for b, (leaf, n) in enumerate(zip(pair.leaves, lengths)):
                pl = leaf.prefix_len
                assert 0 <= n - pl <= horizon - pl, (
                    f"{name} leaf b={b}: L={n}, prefix_len={pl} break 0 <= L - pl <= {horizon} - pl")
                assert leaf.tokens[:pl] == pair.leaves[0].tokens[:pl], (
                    f"{name} leaf b={b}: its first {pl} tokens differ from leaf b=0's")
        stage_total = sum(p.stage1_leaf_tokens + p.stage2_generated for p in self.pairs)
        leaf_total = sum(len(leaf.tokens) for leaf in self.leaves())
        assert stage_total == leaf_total, f"group: stage tokens {stage_total} != leaf tokens {leaf_total}"


# ---------------------------------------------------------------------------------------------
# Pure rules (no policy): tests enumerate exact marginals with these same functions.


def causal_stop(tokens: Sequence[int], has_newline: Callable[[int], bool], eos_id: int,
                t_min: int, t_max: int) -> tuple[int, bool]:
    """``(tau_k, early_eos)`` for a stage-1 root, with 1-based positions.

    ``tau_k = min(tau_causal, T_EOS)``; ``early_eos`` is ``T_EOS <= tau_causal`` (then ``tau_k = T_EOS``).
    Reads tokens left to right and stops at the first decisive one, so it is a stopping time. A root
    that ends without EOS before ``t_max`` (stage 1 capped by a shorter horizon) stops at its length.

    >>> causal_stop([5, 5, 9, 5], lambda t: t == 9, eos_id=0, t_min=2, t_max=4)
    (3, False)
    >>> causal_stop([5, 0], lambda t: t == 9, eos_id=0, t_min=2, t_max=4)
    (2, True)
    """
    for t, token in enumerate(tokens[:t_max], start=1):
        if token == eos_id:  # checked first: an EOS at t ends the root even if it decodes to "\n"
            return t, True
        if t >= t_min and has_newline(token):
            return t, False
    return min(t_max, len(tokens)), False


def find_midpoint_boundary(tokens: Sequence[int], has_newline: Callable[[int], bool]) -> int | None:
    """Split point for the midpoint sampler: a prefix length ``m`` with ``1 <= m <= L - 1``.

    Candidates are the 1-based positions ``t`` strictly inside the finished sequence (``t < L``, so at
    least the final token is re-drawn) whose token contains a newline; the prefix ends *on* that
    newline token. Returns the candidate closest to ``L / 2`` (the earlier one on a tie), or ``None``
    when there is no interior newline.

    >>> find_midpoint_boundary([9, 5, 5, 9, 5, 0], lambda t: t == 9)  # newlines at 1 and 4, L/2 = 3
    4
    """
    n = len(tokens)
    candidates = [t for t in range(1, n) if has_newline(tokens[t - 1])]
    if not candidates:
        return None
    return min(candidates, key=lambda t: (abs(2 * t - n), t))  # |t - L/2| in integers


@dataclass(frozen=True)
class Branch:
    """One leaf before stage 2: it starts with ``head`` (stage-1 tokens) and, if ``grow``, continues."""

    head: tuple[int, ...]
    prefix_len: int
    grow: bool
    finished: bool = False  # for leaves that do not grow: the head already ended on EOS


@dataclass(frozen=True)
class PairPlan:
    category: str
    tau: int
    branches: tuple[Branch, ...]


EARLY_EOS_MODES = ("terminal_dup", "root_resample", "midpoint")


def plan_pair(mode: str, root: Sequence[int], has_newline: Callable[[int], bool], eos_id: int, *,
              B: int, t_min: int, t_max: int, midpoint_min_len: int = 32,
              long_eos_len: int = 104) -> PairPlan:
    """How one stage-1 root becomes B branches under early-EOS ``mode`` (see the module docstring).

    ``midpoint`` rule for an early-EOS root of length L: if ``L >= midpoint_min_len`` and
    :func:`find_midpoint_boundary` gives ``m``, branch 1 is the finished root and branches 2..B grow from
    ``root[:m]`` (category ``early_eos_gt104`` if ``L > long_eos_len`` else ``midpoint_fallback``);
    otherwise it is a ``root_resample`` pair (``tau_zero``).
    """
    if mode not in EARLY_EOS_MODES:
        raise ValueError(f"unknown early-EOS mode {mode!r}; valid: {list(EARLY_EOS_MODES)}")
    tau, early_eos = causal_stop(root, has_newline, eos_id, t_min, t_max)
    if not early_eos:
        shared = Branch(tuple(root[:tau]), tau, grow=True)
        return PairPlan("causal_non_eos", tau, (shared,) * B)
    done = tuple(root[:tau])  # tau == T_EOS: the whole finished root
    if mode == "terminal_dup":
        return PairPlan("terminal_dup", tau, (Branch(done, tau, grow=False, finished=True),) * B)
    # tau_k = 0 chosen after seeing the EOS: keep the root, restart the siblings from the prompt.
    kept = Branch(done, 0, grow=False, finished=True)
    restart = PairPlan("tau_zero", 0, (kept,) + (Branch((), 0, grow=True),) * (B - 1))
    if mode == "root_resample":
        return restart
    m = find_midpoint_boundary(done, has_newline) if len(done) >= midpoint_min_len else None
    if m is None:
        return restart
    category = "early_eos_gt104" if len(done) > long_eos_len else "midpoint_fallback"
    kept = Branch(done, m, grow=False, finished=True)
    return PairPlan(category, m, (kept,) + (Branch(done[:m], m, grow=True),) * (B - 1))


# ---------------------------------------------------------------------------------------------
# Samplers: (policy, prompt, *, horizon, K, B, t_min, t_max, midpoint_min_len, long_eos_len).


class _Ledger:
    """Sums the token accounting of every generate call."""

    def __init__(self) -> None:
        self.gen = self.prefill = self.padded = self.untrimmed = 0

    def call(self, policy, prompts: list[list[int]], max_new_tokens: int):
        out = policy.generate(prompts, max_new_tokens)
        self.gen += out.generated_tokens
        self.prefill += out.prefill_tokens
        self.padded += out.padded_prefill_tokens
        self.untrimmed += out.untrimmed_steps
        return out

    def group(self, pairs: list[Pair]) -> RolloutGroup:
        return RolloutGroup(pairs, self.gen, self.prefill, self.padded, self.untrimmed)


def flat(policy, prompt: list[int], *, horizon: int, K: int = 4, B: int = 2, t_min: int = 96,
         t_max: int = 160, midpoint_min_len: int = 32, long_eos_len: int = 104) -> RolloutGroup:
    """K*B independent rollouts of up to ``horizon`` tokens in one call, grouped as K pairs of B.

    The tree arguments are ignored. A flat leaf's tokens count as stage-1 leaf tokens.
    """
    ledger = _Ledger()
    out = ledger.call(policy, [list(prompt) for _ in range(K * B)], horizon)
    pairs = []
    for k in range(K):
        rows = range(k * B, (k + 1) * B)
        leaves = [Leaf(list(out.tokens[i]), 0, bool(out.finished[i]),
                       list(out.logprobs[i]) if getattr(out, "logprobs", None) else None) for i in rows]
        pairs.append(Pair(k, "flat", leaves, 0, sum(len(leaf.tokens) for leaf in leaves), 0))
    return ledger.group(pairs)


def grow_branches(ledger: _Ledger, policy, prompt: list[int], plans, horizon: int) -> list[tuple[list, int, int]]:
    """Stage 2 of a two-stage group: every growing branch with budget left, in (k, b) order, in one
    left-padded call. Per plan (its `.branches` of `Branch`): (leaves, stage-1 leaf tokens, stage-2 tokens)."""
    wanted = [(k, b) for k, plan in enumerate(plans) for b, br in enumerate(plan.branches)
              if br.grow and len(br.head) < horizon]
    continuations: dict[tuple[int, int], list[int]] = {}
    if wanted:
        heads = [plans[k].branches[b].head for k, b in wanted]
        budgets = [horizon - len(h) for h in heads]
        out = ledger.call(policy, [list(prompt) + list(h) for h in heads], max(budgets))
        for key, budget, tokens in zip(wanted, budgets, out.tokens):
            # One call has one max_new_tokens; a row with a smaller budget keeps its first `budget`
            # tokens, which is exactly a draw capped at `budget` (the first n tokens of a draw do not
            # depend on the cap).
            continuations[key] = list(tokens[:budget])
    grown = []
    for k, plan in enumerate(plans):
        leaves, stage1, stage2 = [], 0, 0
        for b, br in enumerate(plan.branches):
            if br.grow:
                cont = continuations.get((k, b), [])
                finished = bool(cont) and cont[-1] == policy.eos_id
            else:
                cont, finished = [], br.finished
            leaves.append(Leaf(list(br.head) + cont, br.prefix_len, finished))
            stage1 += len(br.head)
            stage2 += len(cont)
        grown.append((leaves, stage1, stage2))
    return grown


def _two_stage(mode: str, policy, prompt: list[int], *, horizon: int, K: int, B: int, t_min: int,
               t_max: int, midpoint_min_len: int, long_eos_len: int) -> RolloutGroup:
    prompt = list(prompt)
    ledger = _Ledger()
    roots = ledger.call(policy, [list(prompt) for _ in range(K)], min(t_max, horizon)).tokens
    plans = [plan_pair(mode, root, policy.has_newline, policy.eos_id, B=B, t_min=t_min, t_max=t_max,
                       midpoint_min_len=midpoint_min_len, long_eos_len=long_eos_len) for root in roots]
    grown = grow_branches(ledger, policy, prompt, plans, horizon)  # stage 2
    return ledger.group([Pair(k, plan.category, leaves, plan.tau, stage1, stage2)
                         for k, (plan, (leaves, stage1, stage2)) in enumerate(zip(plans, grown))])


def stopped_tree(policy, prompt: list[int], *, horizon: int, K: int = 4, B: int = 2, t_min: int = 96,
                 t_max: int = 160, midpoint_min_len: int = 32, long_eos_len: int = 104) -> RolloutGroup:
    """§4.2 item 1: ``tau_k = min(tau_causal, T_EOS)``; early-EOS roots become ``terminal_dup`` pairs."""
    return _two_stage("terminal_dup", policy, prompt, horizon=horizon, K=K, B=B, t_min=t_min,
                      t_max=t_max, midpoint_min_len=midpoint_min_len, long_eos_len=long_eos_len)


def root_restart(policy, prompt: list[int], *, horizon: int, K: int = 4, B: int = 2, t_min: int = 96,
                 t_max: int = 160, midpoint_min_len: int = 32, long_eos_len: int = 104) -> RolloutGroup:
    """§4.2 item 2: early EOS sets ``tau_k = 0``; branch 1 keeps the root, others restart (``tau_zero``)."""
    return _two_stage("root_resample", policy, prompt, horizon=horizon, K=K, B=B, t_min=t_min,
                      t_max=t_max, midpoint_min_len=midpoint_min_len, long_eos_len=long_eos_len)


def midpoint(policy, prompt: list[int], *, horizon: int, K: int = 4, B: int = 2, t_min: int = 96,
             t_max: int = 160, midpoint_min_len: int = 32, long_eos_len: int = 104) -> RolloutGroup:
    """§4.2 item 3: early-EOS roots of length >= ``midpoint_min_len`` re-grow branch 2 from the interior
    newline nearest their middle (``midpoint_fallback`` / ``early_eos_gt104``); other early-EOS roots
    restart branch 2 from the prompt (``tau_zero``, as root_restart).
    """
    return _two_stage("midpoint", policy, prompt, horizon=horizon, K=K, B=B, t_min=t_min,
                      t_max=t_max, midpoint_min_len=midpoint_min_len, long_eos_len=long_eos_len)


# ---------------------------------------------------------------------------------------------
# The sampler registry (`sampler.name`): every entry is (policy, prompt, *, horizon, **settings) ->
# RolloutGroup, its settings the `sampler.*` it declares (lengths in paper tokens, scaled by the
# profile when bound). Every sampler reads temperature and top_p through the sampling policy it is
# given; tree and fork samplers also read `bifurcate_after_active` (their flat warmup, drawn by the
# training loop) and then `group_size`. `credits`: the estimator kinds that can credit its groups.

SAMPLERS = Registry("sampler", group="sampler")
SAMPLING = ("temperature", "top_p")  # the sampling policy's: applied by the caller
WARMUP = ("bifurcate_after_active", "group_size")  # the flat warmup's: drawn by the caller
CALLER = {key: None for key in (*SAMPLING, *WARMUP)}
WARMUP_ONLY = {"group_size": lambda s: s.bifurcate_after_active > 0}


def flat_group(policy, prompt: list[int], *, horizon: int, group_size: int = 8) -> RolloutGroup:
    """G = group_size independent rollouts, as G/2 pairs of 2 (the pair ledger's shape)."""
    return flat(policy, prompt, horizon=horizon, K=group_size // 2, B=2)


SAMPLERS.add(Option("flat", flat_group, reads=("group_size", *SAMPLING), arguments=dict.fromkeys(SAMPLING),
                    kind="flat", credits=("leaf",), doc="G independent rollouts (paper §1)"))
_TREE = dict(lengths=("t_min", "split_tokens"), arguments={"split_tokens": "t_max", **CALLER},
             read_when=WARMUP_ONLY, kind="tree", credits=("leaf", "tree"))
for _name, _fn, _extra in (("stopped_tree", stopped_tree, ()), ("root_restart", root_restart, ()),
                           ("midpoint", midpoint, ("midpoint_min_len", "long_eos_len"))):
    SAMPLERS.add(Option(_name, _fn, reads=("K", "B", "t_min", "split_tokens", *_extra, *SAMPLING, *WARMUP),
                        doc=(_fn.__doc__ or "").strip().split("\n")[0], **{**_TREE, "lengths": (*_TREE["lengths"], *_extra)}))

"""Online counterfactual fork pairs: the ``cf_fork`` sampler (seed paper §5.6 item 4, Table 5C, Arms 14-19).

Stage 1 draws K roots under the rollout kernel (T 0.8, top-p 0.9) up to ``fork_end`` tokens (capped at the
horizon), recording at every generated position ``t`` (zero-based) the raw top-1 minus top-2 logit margin
``dz_t`` and the two ids (``Generation.margins`` / ``top1`` / ``top2``). Each root k then forks at

    t*_k = the first t in [fork_start, fork_end) with dz_t <= threshold        (paper: [4, 64), 0.5)

(:func:`fork_position`; the window is also cut at the root's own length). Both leaves share ``root[:t*]``
(``tau = prefix_len = t*``); at position ``t*``:

- branch 0 keeps the root's own token ``v0 = root[t*]`` and the rest of the root, then continues on-policy
  to the horizon. Keeping the root's tail is the same draw as re-sampling it from ``root[:t*+1]``, so
  branch 0 is *exactly* an on-policy leaf, whichever rule chose ``t*``;
- branch 1 takes ``v1``, the best-ranked token other than ``v0`` (:func:`alternative_token`: ``top2`` when
  the root sampled its top-1 token, else ``top1``; so ``v1 != v0`` always), then continues on-policy.

Choices the paper leaves open (ours, stated so the ledger can be read):

- ``v1``: "the best-ranked token other than v0" above. Because the root samples at T 0.8 / top-p 0.9, v0
  is not always the top-1 token; then v1 is the top-1 token.
- A root with no ``dz_t <= threshold`` in the window forks at its minimum-margin position in the window
  (first on ties): category ``cf_min_margin``. This is the paper's own fallback for the same first-gap
  rule at test time (``FirstGap05-Fork@3`` falls back per slot to ``t_min``, §5.6 item 3), and it keeps
  every pair a fork, so the credit rules (rescue, winner / loser) apply to K pairs alike.
- A root with no position in the window at all (its EOS came before position ``fork_start``; or, on a
  scripted policy, no position has a second-best token) does not fork: category ``cf_no_fork``, a
  stopped-tree pair. Both leaves share the whole root (``tau = len(root)``): a finished root is one
  absorbing leaf duplicated (as ``terminal_dup``), an unfinished one (scripted policies only) grows two
  independent on-policy continuations (as ``causal_non_eos``). Both leaves are exact on-policy leaves;
  the pair can never be divergent, and the credit does not treat it as a fork.

Categories (``Pair.category``): ``cf_first_gap`` (fork at the first qualifying margin), ``cf_min_margin``
(fallback), ``cf_no_fork``. Fork details per pair are :class:`ForkPair` fields (``v0``, ``v1``, ``top1``,
``top2``, ``margin`` at ``t*``, ``min_margin`` over the window).

Token accounting is ``samplers``': ``RolloutGroup.gen_tokens`` etc. sum every generate call (root tails
beyond what a leaf keeps included); per pair, ``stage1_leaf_tokens`` counts the leaf tokens decided in stage
1 (branch 0's root, branch 1's ``root[:t*]`` and its forced token ``v1``, which is read off the stage-1
logits, not sampled) and ``stage2_generated`` the continuation tokens; they add up to the leaf tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from rlvr_sweep.config.options import Option
from rlvr_sweep.rollout.samplers import (
    CALLER, SAMPLERS, SAMPLING, WARMUP, WARMUP_ONLY, Branch, Pair, RolloutGroup, _Ledger, grow_branches,
)
from rlvr_sweep.config.categories import CF_CATEGORIES

__all__ = [
    "CF_CATEGORIES", "ForkPair", "ForkGroup", "ForkPlan", "fork_position", "alternative_token", "plan_fork",
    "cf_fork",
]

NO_TOKEN = -1  # v0 / v1 / top ids of a pair that did not fork


# ---------------------------------------------------------------------------------------------
# Pure rules (no policy): tests enumerate exact leaf marginals with these same functions.


def fork_position(margins: Sequence[float], *, start: int, end: int, threshold: float) -> tuple[int | None, str]:
    """``(t*, category)`` for one root's per-position margins (zero-based positions).

    The first ``t`` in ``[start, min(end, len(margins)))`` with ``margins[t] <= threshold``
    (``cf_first_gap``); else the smallest finite margin there, first on ties (``cf_min_margin``); else
    ``(None, "cf_no_fork")``. A non-finite margin (no second-best token) never qualifies.

    >>> fork_position([9, 9, 0.2, 0.6, 0.5, 0.1], start=3, end=6, threshold=0.5)
    (4, 'cf_first_gap')
    >>> fork_position([9, 9, 0.2, 0.7, 0.6], start=3, end=6, threshold=0.5)
    (4, 'cf_min_margin')
    """
    window = range(start, min(end, len(margins)))
    for t in window:
        if margins[t] <= threshold:  # NaN compares False
            return t, "cf_first_gap"
    finite = [t for t in window if math.isfinite(margins[t])]
    if finite:
        return min(finite, key=lambda t: (margins[t], t)), "cf_min_margin"
    return None, "cf_no_fork"


def alternative_token(v0: int, top1: int, top2: int) -> int:
    """``v1``: the best-ranked token other than the root's own ``v0`` (``-1`` if there is none)."""
    return top1 if v0 != top1 else top2


@dataclass(frozen=True)
class ForkPlan:
    category: str
    tau: int
    branches: tuple[Branch, Branch]  # (on-policy v0, alternative v1)
    v0: int
    v1: int
    top1: int
    top2: int
    margin: float  # dz at t* (nan without a fork)
    min_margin: float  # smallest finite dz in the window (nan if none)
    window: tuple[float, ...] = ()  # dz at every position of [start, min(end, len(root))): what t* was chosen from


def plan_fork(root: Sequence[int], margins: Sequence[float], top1: Sequence[int], top2: Sequence[int],
              eos_id: int, *, horizon: int, start: int, end: int, threshold: float) -> ForkPlan:
    """How one stage-1 root (with its per-position margins and top-2 ids) becomes the two branches."""
    root = tuple(root)
    finished = bool(root) and root[-1] == eos_id
    window = tuple(float(margins[t]) for t in range(start, min(end, len(margins))))
    finite = [m for m in window if math.isfinite(m)]
    min_margin = min(finite) if finite else math.nan
    t, category = fork_position(margins, start=start, end=end, threshold=threshold)
    grow0 = not finished and len(root) < horizon
    if t is None:  # a stopped-tree pair on the whole root
        shared = Branch(root, len(root), grow=grow0, finished=finished)
        return ForkPlan(category, len(root), (shared, shared), NO_TOKEN, NO_TOKEN, NO_TOKEN, NO_TOKEN,
                        math.nan, min_margin, window)
    v0 = root[t]
    v1 = alternative_token(v0, top1[t], top2[t])
    if v1 < 0 or v1 == v0:
        raise ValueError(f"position {t} has margin {margins[t]} but no token other than v0={v0} "
                         f"(top1={top1[t]}, top2={top2[t]})")
    head1 = root[:t] + (v1,)
    finished1 = v1 == eos_id
    branches = (Branch(root, t, grow=grow0, finished=finished),
                Branch(head1, t, grow=not finished1 and len(head1) < horizon, finished=finished1))
    return ForkPlan(category, t, branches, v0, v1, top1[t], top2[t], float(margins[t]), min_margin, window)


# ---------------------------------------------------------------------------------------------
# The group it returns: the samplers' Pair / RolloutGroup, with the fork recorded per pair.


@dataclass
class ForkPair(Pair):
    """A ``Pair`` whose leaf 0 is on-policy (``v0`` at ``tau``) and leaf 1 the alternative (``v1``)."""

    v0: int
    v1: int
    top1: int  # ids of the two largest raw logits at tau
    top2: int
    margin: float  # top-1 minus top-2 raw logit at tau (nan: cf_no_fork)
    min_margin: float  # smallest margin in the fork window (nan: none)
    window_start: int = 0  # the fork window's first position ...
    window: tuple[float, ...] = ()  # ... and the margin at each of its positions (verify re-derives t* from them)


@dataclass
class ForkGroup(RolloutGroup):
    def check_conservation(self, horizon: int) -> None:
        """The samplers' token laws plus the fork laws; AssertionError names the pair.

        Fork laws: leaf 0 has ``v0`` and leaf 1 has ``v1`` at ``tau``; ``v1 != v0`` and ``v1`` is one of
        the two top ids; both leaves have ``prefix_len = tau``. A ``cf_no_fork`` pair has no fork tokens (-1).
        """
        for pair in self.pairs:
            name = f"pair k={pair.k} ({pair.category})"
            assert isinstance(pair, ForkPair) and pair.category in CF_CATEGORIES, f"{name}: not a fork pair"
            l0, l1 = pair.leaves
            assert l0.prefix_len == l1.prefix_len == pair.tau, f"{name}: prefix_len != tau={pair.tau}"
            if pair.category == "cf_no_fork":
                assert pair.v0 == pair.v1 == NO_TOKEN, f"{name}: a pair without a fork has fork tokens"
                continue
            t = pair.tau
            assert l0.tokens[t] == pair.v0 and l1.tokens[t] == pair.v1, f"{name}: leaves do not hold v0 / v1 at {t}"
            assert pair.v0 != pair.v1 and pair.v1 in (pair.top1, pair.top2), f"{name}: v1={pair.v1} invalid"
        # samplers.CATEGORIES names the tree categories only; the shared token laws run on a view that
        # labels each pair as the tree pair it structurally is (two leaves sharing tokens[:tau]).
        tree_view = replace(self, pairs=[replace(p, category="causal_non_eos") for p in self.pairs])
        RolloutGroup.check_conservation(tree_view, horizon)


class _WithMargins:
    """A policy view whose ``generate`` records margins and top-2 ids (for ``_Ledger.call``)."""

    def __init__(self, policy) -> None:
        self.policy = policy

    def generate(self, prompts: list[list[int]], max_new_tokens: int):
        return self.policy.generate(prompts, max_new_tokens, record_margins=True)


def cf_fork(policy, prompt: list[int], *, horizon: int, K: int = 4, B: int = 2, fork_start: int = 4,
            fork_end: int = 64, threshold: float = 0.5) -> ForkGroup:
    """K fork pairs: one stage-1 call of K roots (margins recorded), one stage-2 call for every growing leaf.

    ``fork_start`` / ``fork_end`` are token positions (the trainer scales them to profile units);
    ``threshold`` is a raw-logit gap and is not scaled.
    """
    if B != 2:
        raise ValueError(f"cf_fork draws B=2 leaves per root (on-policy v0, alternative v1), got B={B}")
    if not 1 <= fork_start < fork_end:  # a fork shares a non-empty prefix root[:t*]
        raise ValueError(f"need 1 <= fork_start < fork_end, got [{fork_start}, {fork_end})")
    prompt = list(prompt)
    ledger = _Ledger()
    roots = ledger.call(_WithMargins(policy), [list(prompt) for _ in range(K)], min(fork_end, horizon))
    plans = [plan_fork(root, m, a, b, policy.eos_id, horizon=horizon, start=fork_start, end=fork_end,
                       threshold=threshold)
             for root, m, a, b in zip(roots.tokens, roots.margins, roots.top1, roots.top2)]

    grown = grow_branches(ledger, policy, prompt, plans, horizon)  # stage 2, as the tree samplers'
    pairs = [ForkPair(k, plan.category, leaves, plan.tau, stage1, stage2, plan.v0, plan.v1, plan.top1, plan.top2,
                      plan.margin, plan.min_margin, fork_start, plan.window)
             for k, (plan, (leaves, stage1, stage2)) in enumerate(zip(plans, grown))]
    return ForkGroup(pairs, ledger.gen, ledger.prefill, ledger.padded, ledger.untrimmed)


def _fork_settings(cfg) -> list[str]:
    """The fork window must be non-empty; a pair's two leaves (and its hinge) share a backward chunk."""
    s, mb = cfg.sampler, cfg.train.backward_micro_batch
    out = [] if s.fork_start < s.fork_end else [f"sampler.fork_start={s.fork_start} must be < sampler.fork_end={s.fork_end}"]
    if mb is not None and mb % 2:
        out.append(f"train.backward_micro_batch={mb} must be even with fork pairs: a pair's two leaves (and its "
                   "fork hinge) share a backward chunk")
    return out


SAMPLERS.add(Option("cf_fork", cf_fork, check=_fork_settings, reads=("K", "B", "fork_start", "fork_end", "fork_threshold", *SAMPLING, *WARMUP),
                    lengths=("fork_start", "fork_end"), arguments={"fork_threshold": "threshold", **CALLER},
                    read_when=WARMUP_ONLY, kind="fork", credits=("fork",),
                    doc="counterfactual fork pairs at a low-margin token (paper §5.6 item 4)"))

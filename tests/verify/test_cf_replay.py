"""PASS 4 for the counterfactual arms: stored fork groups' credit replays from their ledger rows."""

from __future__ import annotations

import pandas as pd
import torch

from rlvr_sweep.credit import Credit, cf_step_fields, loss_credit
from rlvr_sweep.credit.counterfactual import cf_credit
from rlvr_sweep.rollout import ForkGroup, ForkPair, Leaf
from rlvr_sweep.update import ScoredGroup, ledger_rows
from rlvr_sweep.verify.cf_replay import replay_cf

KEYS = {"arm": "rg_cf_grpo", "horizon": 1024, "seed": 42, "run_hash": "abc"}


WINDOW_START, THRESHOLD = 2, 0.5


def fork_pair(k, tau, l0, l1, category="cf_first_gap"):
    """A fork at its first margin <= 0.5: the window [2, 8) holds 1.0 before tau, 0.3 at tau, 0.1 after."""
    window = tuple(1.0 if t < tau else 0.3 if t == tau else 0.1 for t in range(WINDOW_START, 8))
    return ForkPair(k, category, [Leaf([5] * l0, tau, True), Leaf([6] * l1, tau, False)], tau, 0, 0, 5, 6, 5, 6,
                    0.3, 0.1, WINDOW_START, window)


def stored_step(step, variant, rewards, hinge=0.15):
    """The step and pair ledger rows the trainer writes for one fork group."""
    group = ForkGroup([fork_pair(0, 3, 20, 40), fork_pair(1, 5, 9, 30), fork_pair(2, 2, 12, 12),
                       fork_pair(3, 4, 50, 7)], 0, 0, 0, 0)
    cf = cf_credit(rewards, [3, 5, 2, 4], [[20, 40], [9, 30], [12, 12], [50, 7]], variant=variant, hinge_weight=hinge)
    r = torch.tensor(rewards, dtype=torch.float32)
    credit = loss_credit(cf)
    scored = ScoredGroup(group, [""] * 8, r, r.clone(), Credit(credit.prefix, credit.cont, cf.metrics["active"], cf))
    pairs = [{**KEYS, **row} for row in ledger_rows(step, scored)]
    return {**KEYS, "step": step, **cf_step_fields(cf)}, pairs


def sweep_tables():
    cases = [("cf_rg", [[1, 0], [0, 1], [1, 1], [0, 0]]), ("cf_pb", [[1, 1], [1, 1], [1, 1], [0, 1]]),
             ("cf_uncond", [[1, 0], [1, 1], [1, 1], [1, 1]]), ("cf_rg", [[1, 0], [1, 1], [1, 1], [1, 1]])]
    steps, pairs = [], []
    for step, (variant, rewards) in enumerate(cases):
        s, p = stored_step(step, variant, rewards)
        steps.append(s)
        pairs += p
    runs = pd.DataFrame([{**KEYS, "run_dir": "runs/rg_cf_grpo/h1024_s42_abc",
                          "config": {"sampler.fork_threshold": THRESHOLD}}])
    return pd.DataFrame(steps), pd.DataFrame(pairs), runs


def test_every_stored_fork_step_replays():
    steps, pairs, runs = sweep_tables()
    assert list(steps["cf_status"]) == ["active", "active", "active", "gated_rescue_dup"]
    out = replay_cf(steps, pairs, runs)
    assert out == {"steps": 4, "active": 3, "forks": 16, "problems": [], "unchecked": []}


def test_a_changed_fork_choice_is_caught_from_the_stored_margins():
    """Seen: changing a fork pair's category or its stored margin passed (the online fork choice was
    never re-derived). Want: the choice re-derived from the window's margins disagrees, named."""
    steps, pairs, runs = sweep_tables()
    at = lambda step, k: (pairs["step"] == step) & (pairs["k"] == k)  # noqa: E731
    pairs.loc[at(0, 1), "category"] = "cf_min_margin"
    pairs.loc[at(1, 2), "fork_margin"] = 0.45
    pairs.loc[at(2, 0), "v1"] = 7
    problems = replay_cf(steps, pairs, runs)["problems"]
    assert any("step 0 pair 1: the stored margins give cf_first_gap at t*=5, the ledger says cf_min_margin" in p
               for p in problems)
    assert any("step 1 pair 2: fork_margin 0.45 is not the stored margin at t*=2" in p for p in problems)
    assert any("step 2 pair 0: alternative token 7 is not the best-ranked other than v0=5" in p for p in problems)


def test_a_changed_coefficient_or_mass_is_reported():
    steps, pairs, runs = sweep_tables()
    pairs.loc[(pairs["step"] == 1) & (pairs["k"] == 3), "a_cont1"] += 0.01
    steps.loc[steps["step"] == 0, "m_tot"] += 1.0
    problems = replay_cf(steps, pairs, runs)["problems"]
    assert len(problems) == 2, problems
    assert "step 0: M_tot replays as" in problems[0] and "step 1 pair 3: coefficients replay as" in problems[1]


def test_non_fork_sweeps_have_nothing_to_replay():
    steps = pd.DataFrame([{**KEYS, "step": 0, "active": True}])
    assert replay_cf(steps, pd.DataFrame([{**KEYS, "step": 0, "k": 0}]), pd.DataFrame()) == \
        {"steps": 0, "active": 0, "forks": 0, "problems": [], "unchecked": []}


def test_a_plugin_fork_estimator_is_replayed_with_its_own_code_or_said_not_to_be():
    """A run whose estimator a plugin registered: its fork steps are not replayed with the built-in rule
    (that is not its rule: a false failure waits there), but listed as not replayed; given the plugin's own
    estimator (`verify --plugins`), they are replayed with it, and a wrong one is caught."""
    from rlvr_sweep.credit import ESTIMATORS

    steps, pairs, runs = sweep_tables()
    steps, pairs = steps[steps["cf_variant"] == "cf_rg"], pairs[pairs["step"].isin([0, 3])]  # the cf_rg groups
    runs.at[0, "config"] = {"sampler.fork_threshold": THRESHOLD, "estimator.name": "t_my_rg"}
    alone = replay_cf(steps, pairs, runs)
    assert alone["steps"] == 0 and alone["problems"] == [] and alone["unchecked"] == [
        "runs/rg_cf_grpo/h1024_s42_abc: 2 fork groups credited by plugin estimator 't_my_rg' were not replayed, "
        "the run's plugin code is not imported (rerun with --plugins)"]
    from rlvr_sweep.credit import KINDS, BoundEstimator

    def bound(fn):
        return BoundEstimator("t_my_rg", KINDS["fork"], lambda r, s: fn(r, s, hinge_weight=0.15))

    own = replay_cf(steps, pairs, runs, lambda run_dir: (bound(ESTIMATORS["cf_rg"].fn), None))
    assert own == {"steps": 2, "active": 1, "forks": 8, "problems": [], "unchecked": []}  # step 3: gated
    # not the estimator the run used: its credit differs, named
    other = replay_cf(steps, pairs, runs, lambda run_dir: (bound(ESTIMATORS["cf_uncond"].fn), None))
    assert other["steps"] == 2 and any("step 3: status replays as 'active', stored 'gated_rescue_dup'" in p
                                       for p in other["problems"])
    refused = replay_cf(steps, pairs, runs, lambda run_dir: (None, "the plugin code at hand is not the code the run "
                                                                  "recorded"))
    assert refused["steps"] == 0 and "were not replayed, the plugin code at hand is not the code" in refused["unchecked"][0]


def test_pass4_says_what_it_found_of_a_counterfactual_arm_still_in_its_warmup():
    """Seen: "no counterfactual arm" on a sweep holding one whose steps were all warmup."""
    from types import SimpleNamespace

    from rlvr_sweep.verify import passes

    runs = pd.DataFrame([{**KEYS, "run_dir": "runs/cf", "config": {"sampler.name": "cf_fork"}},
                         {**KEYS, "run_hash": "def", "run_dir": "runs/flat", "config": {"sampler.name": "flat"}}])
    steps = pd.DataFrame([{**KEYS, "step": s, "active": True} for s in range(3)])
    result = passes.pass4(None, load=lambda: SimpleNamespace(steps=steps, pairs=pd.DataFrame(), runs=runs,
                                                             readouts=pd.DataFrame(), probes=[], eval_runs=pd.DataFrame()))
    assert result.ok and result.summary == (
        "1 counterfactual run(s) found, but their 3 steps were all flat warmup (no fork group before "
        "sampler.bifurcate_after_active active steps): no fork group to replay")
    assert passes.warmup_only(SimpleNamespace(runs=runs.iloc[1:], steps=steps)) == []

"""The vectorised §3 diagnostics against loop oracles: `surface_divergence` (groups, losers, winners and
token prefixes as arrays) against the per-group loop it replaced, and the all-0 / all-1 step counts of
`baseline_runs` (one concatenation for the sweep) against Python's max and min per step."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rlvr_sweep.analysis import diagnostics
from rlvr_sweep.analysis.diagnostics import common_prefix, equations, surface_divergence

HEADS = ["x = 3+4 = 7", "2*5=10 so", "no equation", "3+4=7", "y=2", "", "2*5 = 10, then 7=7"]


def loop_surface(rollouts: pd.DataFrame) -> dict:
    """The loop `surface_divergence` was (commit 627ddb0): groups in (step, question_id) order, failed
    rollouts in ledger order, each against every winner of its group."""
    failed = shared = 0
    prefixes = []
    rewards = rollouts["reward"].to_numpy(dtype=float).tolist()
    heads, tokens = rollouts["head_text"].tolist(), rollouts["tokens"].tolist()
    groups: dict = {}
    for i, key in enumerate(zip(rollouts["step"].tolist(), rollouts["question_id"].tolist())):
        groups.setdefault(key, []).append(i)
    for key in sorted(groups):
        members = groups[key]
        r = [rewards[i] for i in members]
        if min(r) == max(r):
            continue
        winners = [i for i in members if rewards[i] == 1]
        win_equations = [equations(heads[i]) for i in winners]
        for i in members:
            if rewards[i] != 0:
                continue
            failed += 1
            shared += any(equations(heads[i]) & other for other in win_equations)
            if winners:
                prefixes.append(max(common_prefix(tokens[i], tokens[w]) for w in winners))
    return {"failed_active": failed, "shared_equation": shared,
            "shared_share": 100 * shared / failed if failed else float("nan"),
            "mean_lcp": float(np.mean(prefixes)) if prefixes else float("nan")}


def random_rollouts(seed: int, n: int = 120) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "step": rng.integers(0, 6, n), "question_id": [f"q{i}" for i in rng.integers(0, 4, n)],
        # 0.5: a group can be active with no R = 1 sibling (its failures count, with no prefix)
        "reward": rng.choice([0.0, 1.0, 0.5], n, p=[0.5, 0.4, 0.1]),
        "head_text": [HEADS[i] for i in rng.integers(0, len(HEADS), n)],
        # few token ids and short rows: long shared prefixes, empty rows, one row a prefix of another
        "tokens": [rng.integers(1, 3, rng.integers(0, 9)).astype(np.int32) for _ in range(n)],
    })


def same(got: dict, want: dict) -> bool:
    """Equal to the bit (NaN equal to NaN): the counts and the mean of whole numbers are exact."""
    return got.keys() == want.keys() and all(got[k] == want[k] or (np.isnan(got[k]) and np.isnan(want[k]))
                                             for k in got)


@pytest.mark.parametrize("seed", range(8))
def test_surface_divergence_is_the_loop(seed):
    rollouts = random_rollouts(seed)
    assert same(surface_divergence(rollouts), loop_surface(rollouts))
    assert surface_divergence(rollouts)["failed_active"] > 0  # the draw has active groups to check


def test_prefixes_in_small_blocks_are_the_same(monkeypatch):
    rollouts = random_rollouts(3, 300)
    monkeypatch.setattr(diagnostics, "_PAIR_CELLS", 5)  # a block of one pair at a time
    assert same(surface_divergence(rollouts), loop_surface(rollouts))


def test_no_active_group_and_no_rollout():
    flat = random_rollouts(0).assign(reward=1.0)
    assert surface_divergence(flat)["failed_active"] == 0 and np.isnan(surface_divergence(flat)["mean_lcp"])
    assert surface_divergence(flat.iloc[:0])["failed_active"] == 0


def test_all_zero_and_all_one_steps_are_pythons_max_and_min():
    rng = np.random.default_rng(1)
    rewards = [rng.choice([0.0, 1.0], rng.integers(0, 5)) for _ in range(200)] + [[True, True], [0, 0], []]
    all0, all1 = diagnostics._homogeneous(np.array(rewards + [np.zeros(0)], dtype=object)[:-1])
    as_lists = [[float(x) for x in r] for r in rewards]
    assert list(all0) == [bool(r) and max(r) == 0 for r in as_lists]
    assert list(all1) == [bool(r) and min(r) == 1 for r in as_lists]
    assert diagnostics._homogeneous(np.array([[0.0, np.nan], [1.0]], dtype=object)) is None  # left to Python

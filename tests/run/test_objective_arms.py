"""The arms of the objectives GRPO is compared with, each a 3-seed smoke sweep through the entrypoint as a user
types it (shortened), then `verify all` over the lot, and the health signals each objective should show."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from rlvr_sweep import store
from tests.helpers import run_cli
from tests.sweeps import cli

SHORT = ["profile=smoke", "eval.limit=8"]
ARMS = {  # arm -> how to shorten it (the dynamic-sampling arms count active updates, the others steps)
    "grpo_original": ["train.steps=6"], "gspo": ["train.steps=6"], "dr_grpo": ["train.steps=6"],
    "dapo": ["train.active_steps=3"], "cispo": ["train.active_steps=3"],
}
SEEDS = (42, 101, 7)


@pytest.fixture(scope="module")
def objective_sweep(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("objective_arms")
    root = base / "runs"
    for arm, shorter in ARMS.items():
        proc = run_cli([f"+arm={arm}", *SHORT, *shorter, f"run.out_root={root}", "-m",
                        "seed=" + ",".join(map(str, SEEDS))], cwd=base, timeout=900)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert len(list(root.glob("*/*/*/DONE"))) == len(ARMS) * len(SEEDS)
    return root


def steps_of(root: Path, arm: str) -> pd.DataFrame:
    runs = [d for d in sorted(root.glob(f"smoke/{arm}/h*")) if (d / "DONE").exists()]
    return pd.concat([store.read_table(d, "steps") for d in runs], ignore_index=True)


@pytest.mark.slow
def test_every_objective_arm_verifies(objective_sweep):
    proc = cli("rlvr_sweep.verify", "all", str(objective_sweep))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "4/4 passes ok" in proc.stdout and f"{len(ARMS) * len(SEEDS)} finished runs" in proc.stdout
    assert "updates' ratio, clip and engine-trainer gap signals held against their objective" in proc.stdout


@pytest.mark.slow
def test_each_objective_shows_its_signals(objective_sweep):
    updates = {arm: steps_of(objective_sweep, arm).query("action == 'backward_step'") for arm in ARMS}
    for arm, frame in updates.items():
        assert len(frame) and frame["entropy"].gt(0).all(), arm  # measured on every update that ran a backward
    # KL to the initial policy: measured and in the loss of the original GRPO only; exactly 0 before the first step
    # (the reference is the initial weights), >= 0 after (k3), and > 0 once the policy has moved
    kl = updates["grpo_original"].groupby("seed")["kl_ref"]
    assert (kl.first() == 0).all() and updates["grpo_original"]["kl_ref"].ge(0).all() and (kl.max() > 0).all()
    assert all(updates[a]["kl_ref"].isna().all() for a in ARMS if a != "grpo_original")
    # ratios: exactly 1 with one on-policy step (grpo_original), spread by the later mini-batches (gspo, dapo, cispo)
    one = updates["grpo_original"]
    assert (one["ratio_min"] == 1).all() and (one["ratio_max"] == 1).all() and (one["clip_low"] == 0).all()
    for arm in ("gspo", "dapo", "cispo"):
        assert (updates[arm]["ratio_max"] > updates[arm]["ratio_min"]).any(), arm
    assert updates["dr_grpo"]["ratio_mean"].isna().all()  # reinforce has no ratio
    # dynamic sampling: no update holds a homogeneous group
    for arm in ("dapo", "cispo"):
        steps = steps_of(objective_sweep, arm)
        assert (steps["action"].isin(["backward_step", "filtered"])).all()
        assert (steps["zero_variance"] == (steps["action"] == "filtered")).all()

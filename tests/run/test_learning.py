"""Real smoke runs learn in the right direction with both loss recipes, and the tail average keeps
exactly the checkpoints of its window."""

import pytest
import torch
from safetensors.torch import load_file

from rlvr_sweep import store
from rlvr_sweep.run import run
from tests.helpers import compose_cfg, run_dir_of


@pytest.mark.slow
@pytest.mark.parametrize("arm,recipe", [("ra_flat", "scale_then_sum"), ("baseline", "sum_then_scale")])
def test_a_smoke_run_beats_the_base_policy_with_either_loss_recipe(arm, recipe, tmp_path):
    """100 steps on the tiny model lift greedy held-out accuracy (seed 42, measured: Arm 4 13.0 % ->
    18.5 %, Arm 1 13.0 % -> 17.5 %; the assertion leaves room for other CPUs' float rounding). A loss
    of the wrong sign in either recipe walks away from the rewarded completions instead."""
    cfg = compose_cfg([f"+arm={arm}", "profile=smoke", f"run.out_root={tmp_path}"])
    assert cfg.train.loss_recipe == recipe
    info = run(cfg)
    base, trained = info["accuracy"]["base"]["toy_heldout"], info["accuracy"]["trained"]["toy_heldout"]
    assert 0.05 < base < 0.35  # well below ceiling before RL
    assert trained >= base + 0.02
    totals = info["totals"]
    assert totals["steps"] == 100 and 15 <= totals["active_steps"] <= 60  # many mixed groups


def saved_weights(run_dir) -> dict:
    return load_file(str(run_dir / "model" / "model.safetensors"))


@pytest.mark.slow
def test_the_tail_average_is_the_mean_of_the_policies_after_each_step_of_its_window(tmp_path):
    """`train.tail_average=[3, 5]` over 5 steps (steps counted from 1, the window ending at the last
    step as Arm 13's [26, 50] does) averages exactly 3 policies: those after steps 3, 4 and 5, which
    runs stopped after 3, 4 and 5 steps save."""
    common = ["+arm=ra_flat", "profile=smoke", "eval=none", "seed=5", f"run.out_root={tmp_path}"]
    stopped = {n: run_dir_of(compose_cfg([*common, f"train.steps={n}"])) for n in (3, 4, 5)}
    for n in stopped:
        run(compose_cfg([*common, f"train.steps={n}"]))
    cfg = compose_cfg([*common, "train.steps=5", "train.tail_average=[3,5]"])
    info = run(cfg)
    assert info["tail_average_steps"] == 3
    policies = [saved_weights(stopped[n]) for n in (3, 4, 5)]
    averaged = saved_weights(run_dir_of(cfg))
    moved = max((policies[2][k] - policies[0][k]).abs().max().item() for k in averaged)
    assert moved > 2e-5  # an update inside the window (lr 5e-5), far above the tolerance below
    for name, value in averaged.items():
        mean = sum(p[name].float() for p in policies) / 3
        torch.testing.assert_close(value.float(), mean, rtol=0, atol=1e-6)

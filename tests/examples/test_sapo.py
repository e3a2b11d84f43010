"""The SAPO example: an objective added from outside the package (examples/sapo), by hand, against TRL's
formula written out, with the checks of a built-in option, and in a real run whose identity holds its code."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from rlvr_sweep.config import ConfigError, identity_dict
from rlvr_sweep.run import run
from rlvr_sweep.store import read_run_json, read_table
from rlvr_sweep.update import OBJECTIVES
from tests.conftest import REPO
from tests.helpers import compose_cfg

PLUGIN = str(REPO / "examples" / "sapo" / "sapo_objective.py")


def sapo():
    compose_cfg(["profile=smoke", f"plugins=[{PLUGIN}]"])  # imports the plugin, which registers itself
    return OBJECTIVES["sapo"]


def test_the_soft_gate_by_hand_and_against_trl():
    """r = 1: the gate is 4 sigmoid(0) / tau = 2 / tau, its slope 1, so the gradient is the paper's -A; r = 1.5,
    A = +1, tau 1: -4 sigmoid(0.5) = -2.4492; TRL's loss_type="sapo" on random tensors to 1e-6."""
    option = sapo()
    assert option.kind == "ratio" and option.defaults == {"tau_pos": 1.0, "tau_neg": 1.05}
    fn = option.bind(compose_cfg(["profile=smoke", f"plugins=[{PLUGIN}]", "objective=sapo"]).objective)
    one = torch.ones(1, 2, dtype=torch.bool)
    logp = torch.zeros(1, 2, requires_grad=True)
    s = fn(logp, torch.zeros(1, 2), torch.tensor([[2.0, -3.0]]), one)
    assert s.loss.tolist()[0] == pytest.approx([-4.0, 3 * 2 / 1.05])
    s.loss.sum().backward()
    assert logp.grad.tolist()[0] == pytest.approx([-2.0, 3.0])  # -A: the paper's gradient at r = 1
    assert fn(torch.log(torch.tensor([[1.5]])), torch.zeros(1, 1), torch.ones(1, 1), one[:, :1]).loss.item() == \
        pytest.approx(-4 / (1 + math.exp(-0.5)))
    g = torch.Generator().manual_seed(3)
    old = -torch.rand(3, 4, generator=g)
    logp = old + (torch.rand(3, 4, generator=g) - 0.5)
    adv = (torch.rand(3, 1, generator=g) - 0.5).expand(3, 4)
    coef_1 = torch.exp(logp - old)  # TRL grpo_trainer.py, loss_type == "sapo"
    temperatures = torch.where(adv > 0, 1.0, 1.05)
    soft_coef_1 = torch.sigmoid(temperatures * (coef_1 - 1)) * 4 / temperatures
    torch.testing.assert_close(fn(logp, old, adv, torch.ones(3, 4, dtype=torch.bool)).loss, -soft_coef_1 * adv,
                               atol=1e-6, rtol=0)


def test_a_plugin_objective_gets_the_checks_of_a_built_in_one():
    sapo()
    with pytest.raises(ConfigError, match=r"objective.params.tau_neg=-1.0: must be > 0 \(parameter 'tau_neg' of "
                                          r"objective 'sapo'"):
        compose_cfg(["profile=smoke", f"plugins=[{PLUGIN}]", "objective=sapo", "objective.params.tau_neg=-1.0"])
    with pytest.raises(ConfigError, match=r"objective.clip_high=0.3: no chosen option reads it \(objective 'sapo'"):
        compose_cfg(["profile=smoke", f"plugins=[{PLUGIN}]", "objective=sapo", "objective.clip_high=0.3"])


def test_a_run_of_the_plugin_objective_records_its_code(tmp_path):
    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", f"plugins=[{PLUGIN}]", "objective=sapo",
                       "objective.mini_batches=2", "train.steps=4", "eval.limit=2", f"run.out_root={tmp_path}"])
    assert identity_dict(cfg)["objective"]["params"] == {"tau_pos": 1.0, "tau_neg": 1.05}
    info = run(cfg)
    recorded = read_run_json(Path(info["run_dir"]))["inputs"]["plugins"]
    assert recorded["options"]["objective.name"] == "sapo" and any("sapo_objective" in m for m in recorded["files"])
    steps = read_table(Path(info["run_dir"]), "steps")
    updates = steps[steps["action"] == "backward_step"]
    assert len(updates) and (updates["optimizer_steps"] == 2).all() and updates["ratio_mean"].notna().all()
    assert updates["clip_low"].eq(0).all()  # no clip: nothing held

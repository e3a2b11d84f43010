"""The RLOO example: an estimator added from outside the package (examples/rloo), by hand and in a
smoke sweep, with the checks of a built-in option."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from rlvr_sweep.config import ConfigError
from rlvr_sweep.credit import ESTIMATORS, GroupShape, bind_estimator
from tests.conftest import REPO
from tests.helpers import compose_cfg

EXAMPLE = REPO / "examples" / "rloo"
PLUGIN = str(EXAMPLE / "rloo_estimator.py")


def rloo():
    compose_cfg(["profile=smoke", f"plugins=[{PLUGIN}]"])  # imports the plugin, which registers itself
    return ESTIMATORS["rloo"]


def test_the_leave_one_out_baseline_by_hand():
    """R = (1, 0, 0, 0): A_0 = 1 - 0 = 1, A_j = 0 - 1/3 for the others; an all-equal group is zero."""
    option = rloo()
    assert option.kind == "leaf" and option.reads == () and not option.per_token
    shape = GroupShape(torch.zeros(2, dtype=torch.long), torch.zeros(2, 2, dtype=torch.long), torch.ones(2, 2))
    advantages = option.fn(torch.tensor([[1.0, 0.0], [0.0, 0.0]]), shape)
    torch.testing.assert_close(advantages, torch.tensor([[1.0, -1 / 3], [-1 / 3, -1 / 3]]))
    assert float(advantages.sum()) == pytest.approx(0.0, abs=1e-6)  # a leave-one-out baseline is centred
    assert option.fn(torch.ones(2, 2), shape).abs().sum() == 0
    cfg = compose_cfg(["profile=smoke", f"plugins=[{PLUGIN}]", "estimator.name=rloo"])
    credit = bind_estimator(option, cfg.estimator).group(torch.tensor([[1.0, 0.0], [0.0, 0.0]]), shape)
    assert credit.active and torch.equal(credit.prefix, credit.cont) and torch.equal(credit.cont, advantages)
    assert not bind_estimator(option, cfg.estimator).group(torch.ones(2, 2), shape).active  # the framework's call


def test_a_plugin_option_gets_the_checks_of_a_built_in_one():
    rloo()
    with pytest.raises(ConfigError, match=r"estimator.std='population': no chosen option reads it \(estimator 'rloo'"):
        compose_cfg(["profile=smoke", f"plugins=[{PLUGIN}]", "estimator.name=rloo", "estimator.std=population"])
    with pytest.raises(ConfigError, match=r"estimator.name='rloo' \(leaf credit\) with sampler.name='cf_fork'"):
        compose_cfg(["+arm=cf_grpo", "profile=smoke", f"plugins=[{PLUGIN}]", "estimator.name=rloo"])
    with pytest.raises(ConfigError, match=r"plugins=\['no_such_module'\]: cannot import 'no_such_module'"):
        compose_cfg(["profile=smoke", "plugins=[no_such_module]"])


@pytest.mark.slow
def test_a_smoke_sweep_of_the_example_arm(tmp_path):
    """The command of examples/rloo/README.md: the arm file and estimator config from the example's own
    config folder (hydra.searchpath), the module from PYTHONPATH; two seeds, each a finished run whose
    identity names the plugin."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "rlvr_sweep", "+arm=rloo_flat", "profile=smoke", "train.steps=6", "eval.limit=8",
           f"hydra.searchpath=[file://{EXAMPLE / 'conf'}]", f"run.out_root={tmp_path}/runs", "-m", "seed=42,101"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "Preflight: checked 2 job(s)" in proc.stdout and "runs: 2 finished" in proc.stdout
    infos = [json.loads(p.read_text()) for p in sorted((tmp_path / "runs" / "smoke" / "rloo_flat").glob("*/run.json"))]
    assert [i["status"] for i in infos] == ["finished", "finished"]
    config = (tmp_path / "runs" / "smoke" / "rloo_flat").glob("*/config.yaml")
    assert all("name: rloo" in c.read_text() and "rloo_estimator" in c.read_text() for c in config)

"""The clip_lenpen example: two estimators (one a batch estimator) and two rewards (one token-aware) from one
plugin package named once; by hand, and through the command line as a new user meets them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from rlvr_sweep.plugins import import_plugins
from rlvr_sweep.credit import ESTIMATORS
from rlvr_sweep.reward import REWARDS, grading
from tests.conftest import REPO
from tests.helpers import compose_cfg

EXAMPLE = REPO / "examples" / "clip_lenpen"


@pytest.fixture(scope="module", autouse=True)
def plugin():
    import_plugins([str(EXAMPLE)])


def plugin_env(**extra) -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "RLVR_SWEEP_PLUGINS": str(EXAMPLE),
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]), **extra}


def test_grpo_clip_by_hand():
    """R = (1, 0, 0, 0): GRPO gives (1.5, -0.5, -0.5, -0.5) (unbiased std 0.5, eps 1e-4 aside); clip 1 keeps
    (1, -0.5, -0.5, -0.5)."""
    option = ESTIMATORS["grpo_clip"]
    advantages = option.fn(torch.tensor([[1.0, 0.0], [0.0, 0.0]]), None, eps=0.0, clip=1.0)
    torch.testing.assert_close(advantages, torch.tensor([[1.0, -0.5], [-0.5, -0.5]]))
    assert option.kind == "leaf" and option.params["clip"].default == 1.0


def test_reinforce_pp_baseline_by_hand():
    """Groups (1, 0) and (1, 1): centred (0.5, -0.5) and (0, 0); their std over the update is
    sqrt((0.25 + 0.25) / 3) = 0.40825, so (1.22474, -1.22474) and zeros."""
    option = ESTIMATORS["reinforce_pp_baseline"]
    a, b = option.fn([torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 1.0]])], [None, None], eps=0.0)
    torch.testing.assert_close(a, torch.tensor([[1.22474, -1.22474]]), atol=1e-4, rtol=0)
    assert torch.equal(b, torch.zeros(1, 2)) and option.kind == "batch"


def test_the_rewards_by_hand_with_lengths_scaled_by_the_profile():
    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "reward=token_len_penalty", "reward.params.coef=0.5"])
    tokens = REWARDS["token_len_penalty"].bind(cfg.reward, cfg.profile.length_scale)  # max_tokens 512 -> 64
    texts = ["so \\boxed{4}", "so \\boxed{5}", "\\boxed{4}"]
    rewards, correct = tokens(texts, "4", grade=grading.grade, extract=None, tokens=[[1] * 32, [1] * 64, [1] * 128])
    assert rewards == [1 - 0.5 * 0.5, 0 - 0.5 * 1.0, 1 - 0.5 * 1.0] and correct == [1.0, 0.0, 1.0]
    chars = REWARDS["len_penalty"].bind(compose_cfg(["+arm=ra_flat", "reward=len_penalty"]).reward, 1.0)
    rewards, _ = chars(["x" * 200 + "\\boxed{4}"], "4", grade=grading.grade, extract=None)  # 209 of 400 chars
    assert rewards == [pytest.approx(1 - 0.05 * 209 / 400)]


@pytest.mark.parametrize("value, said", [
    ("abc", "estimator.params.clip='abc': must be a number (parameter 'clip' of estimator 'grpo_clip': the largest "
            "|advantage| kept, default 1.0)"),
    ("-1", "estimator.params.clip=-1: must be > 0 (parameter 'clip' of estimator 'grpo_clip': the largest |advantage| "
           "kept, default 1.0)"),
])
def test_a_bad_parameter_is_one_line_and_exit_2_with_no_run_folder(tmp_path, value, said):
    proc = subprocess.run([sys.executable, "-m", "rlvr_sweep", "+arm=clip_lenpen", "profile=smoke",
                           f"run.out_root={tmp_path}/runs", f"estimator.params.clip={value}"],
                          cwd=tmp_path, env=plugin_env(), capture_output=True, text=True, timeout=300)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, proc.stderr
    assert err[0] == f"rlvr_sweep: ConfigError: invalid config: {said}"
    assert not (tmp_path / "runs").exists()


def test_diff_finds_the_plugin_arm_by_its_name_alone(tmp_path):
    cmd = [sys.executable, "-m", "rlvr_sweep.analysis", "diff", "baseline", "clip_lenpen"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=plugin_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [" ".join(line.split()) for line in proc.stdout.splitlines()]
    for row in ("estimator.name grpo grpo_clip", "estimator.params.clip <absent> 1.0", "reward.name ungated len_penalty",
                "reward.params.max_chars <absent> 400", f"plugins [] [{EXAMPLE}]"):
        assert row in lines, proc.stdout
    alone = subprocess.run(cmd, cwd=tmp_path, env=plugin_env(RLVR_SWEEP_PLUGINS=""), capture_output=True, text=True,
                           timeout=300)
    assert alone.returncode == 2 and "no run folder, config file or arm named 'clip_lenpen'" in alone.stderr


def test_a_plugin_length_is_recorded_in_run_json_as_the_run_used_it(tmp_path):
    """Beside the built-in `rollout_cap` and `readout_cap`: `reward.params.max_tokens` 512 paper tokens is 64 under
    the smoke profile (length_scale 0.125), and run.json says so."""
    from rlvr_sweep import store
    from rlvr_sweep.run import run

    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "reward=token_len_penalty", "reward.gate_chars=null",
                       "train.steps=1", "eval.limit=2", f"plugins=[{EXAMPLE}]", f"run.out_root={tmp_path}"])
    info = store.read_run_json(run(cfg)["run_dir"])
    assert info["plugin_lengths"] == {"reward.params.max_tokens": 64} and info["rollout_cap"] == 64


def test_a_misspelt_plugin_parameter_names_the_options_parameters_first(tmp_path):
    """Not Hydra's advice to append it with `+` (which the parameter check would refuse next)."""
    from tests.helpers import run_cli

    proc = run_cli(["+arm=ra_flat", "profile=smoke", "estimator=grpo_clip", "estimator.params.clp=0.5"], cwd=tmp_path,
                   timeout=120, env_extra={"RLVR_SWEEP_PLUGINS": str(EXAMPLE)})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().endswith("estimator.params.clp: no parameter 'clp' of estimator 'grpo_clip' (its "
                                        "parameters: clip); did you mean estimator.params.clip?"), proc.stderr

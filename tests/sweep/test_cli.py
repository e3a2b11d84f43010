"""The command line as users type it, and every arm composing with Hydra's compose API."""

import json
import shutil

import pytest

from rlvr_sweep.config import Config, paper_arm
from rlvr_sweep.sweep.cli import normalize_argv, normalize_overrides
from tests.conftest import CONF_DIR, REPO, need_data
from tests.helpers import compose_cfg, run_cli

TINY = REPO / "src" / "rlvr_sweep" / "policy" / "assets" / "tiny_qwen3"
ARMS = sorted(p.stem for p in (CONF_DIR / "arm").glob("*.yaml"))


def test_multirun_flag_anywhere_and_bare_horizon():
    argv = ["rlvr_sweep", "+arm=stopped_tree", "horizon=1024", "-m", "seed=42,101,7"]
    assert normalize_argv(argv) == ["rlvr_sweep", "-m", "+arm=stopped_tree", "horizon='1024'", "seed=42,101,7"]
    assert normalize_argv(["p", "--multirun", "horizon=512,1024"]) == ["p", "--multirun", "horizon='512','1024'"]
    # values that merely contain the word stay as they are
    assert normalize_overrides(["horizon.tokens=768", "eval.max_new_tokens=1024"]) == ["horizon.tokens=768", "eval.max_new_tokens=1024"]


@pytest.mark.parametrize("arm", ARMS)
def test_every_arm_composes(arm):
    cfg = compose_cfg([f"+arm={arm}"])
    assert isinstance(cfg, Config)
    assert cfg.arm == arm
    smoke = compose_cfg([f"+arm={arm}", "profile=smoke", "horizon=1024"])
    assert smoke.model.name == "tiny" and smoke.horizon.tokens == 1024 and smoke.profile.length_scale == 0.125


def test_paper_arm_map():
    expected = {  # DESIGN "Paper arm -> configuration", Arms 1-4
        "baseline": ("full_backward", None, "sum_then_scale"),
        "zero_grad_flat": ("zero_grad", None, "scale_then_sum"),
        "gate_flat": ("skip", 30, "scale_then_sum"),
        "ra_flat": ("zero_grad", 30, "scale_then_sum"),
    }
    for arm, (step, gate, recipe) in expected.items():
        cfg = compose_cfg([f"+arm={arm}"])
        assert (cfg.optimizer_step.name, cfg.reward.gate_chars, cfg.train.loss_recipe) == (step, gate, recipe)
        assert cfg.sampler.name == "flat" and cfg.estimator.name == "grpo"


def test_paper_profile_is_the_real_recipe():
    cfg = compose_cfg(["+arm=baseline"])
    assert cfg.model.hub_id == "Qwen/Qwen3-0.6B-Base" and cfg.model.dtype == "bfloat16" and cfg.model.path is None
    assert cfg.data.name == "math_train" and cfg.horizon.tokens == 512 and cfg.profile.length_scale == 1.0
    assert (cfg.sampler.group_size, cfg.sampler.temperature, cfg.sampler.top_p) == (8, 0.8, 0.9)
    t = cfg.train
    assert (t.steps, t.lr, tuple(t.betas), t.adam_eps, t.weight_decay, t.grad_clip) == (50, 1e-5, (0.9, 0.999), 1e-8, 0.01, 1.0)
    assert (cfg.eval.max_new_tokens, cfg.eval.batch_size, cfg.eval.benchmarks) == (2048, 32, ["math500", "math_val210", "ext240"])
    assert (cfg.estimator.std, cfg.estimator.eps) == ("unbiased", 1e-4)


@pytest.mark.slow
def test_design_card_line_verbatim_is_accepted(tmp_path):
    """`+arm=ra_flat horizon=1024 -m seed=42,101,7` (paper profile): the line parses into three jobs;
    with no data and no weights on this machine the preflight stops the sweep before launching any of
    them, naming the missing data file; given the data, it names the missing weights and says how to
    point the run at a local copy."""
    proc = run_cli(["+arm=ra_flat", "horizon=1024", "-m", "seed=42,101,7"], cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert "unrecognized arguments" not in out and "must be a string" not in out, out[-3000:]
    assert "job 1 of 3 (+arm=ra_flat horizon='1024' seed=42)" in out, out[-3000:]
    assert proc.returncode == 2 and "data file not found: data/math_train.jsonl" in out
    data = need_data("math_train.jsonl", "math500.jsonl")
    proc = run_cli(["+arm=ra_flat", "horizon=1024", f"data.root={data}", "eval.benchmarks=[math500]",
                    "-m", "seed=42,101,7"], cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "job 1 of 3" in out
    assert "model.path=" in out and "Qwen/Qwen3-0.6B-Base" in out
    assert "Launching" not in out  # nothing was launched
    assert not (tmp_path / "outputs" / "runs").exists()


@pytest.mark.slow
def test_sweep_preflight_names_conflicting_settings_before_launch(tmp_path):
    proc = run_cli(["profile=smoke", "estimator=tree_mean", "-m", "seed=1,2"], cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Launching" not in out
    assert "estimator.name='tree_mean'" in out and "sampler.name='flat'" in out


@pytest.mark.slow
def test_sweep_preflight_names_a_missing_data_file_before_launch(tmp_path):
    proc = run_cli(["profile=smoke", "eval.benchmarks=[math500]", f"data.root={tmp_path}/nowhere", "-m", "seed=1,2"],
                   cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Launching" not in out
    assert "job 1 of 2" in out and "math500.jsonl" in out and "data.root" in out


@pytest.mark.slow
def test_sweep_with_a_failed_run_goes_on_and_exits_non_zero(tmp_path):
    """Both runs die when they load the model (a folder with a config, a tokenizer and a truncated
    weights file passes the preflight's check of where the model is); the second still runs after the
    first failed, each records its traceback, and the summary counts them."""
    broken = tmp_path / "broken_model"
    shutil.copytree(TINY, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    proc = run_cli(["+arm=ra_flat", "profile=smoke", "train.steps=2", "eval=none", "run.out_root=runs",
                    f"model.path={broken}", "-m", "seed=1,2"], cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert "runs: 2 failed" in out and "broken_model" in out
    infos = [json.loads(p.read_text()) for p in (tmp_path / "runs").rglob("run.json")]
    assert infos == [] or all(i["status"] == "failed" for i in infos)


def test_unknown_arm_lists_the_valid_ones(tmp_path):
    proc = run_cli(["+arm=no_such_arm"], cwd=tmp_path)
    assert proc.returncode != 0
    err = proc.stdout + proc.stderr
    assert "no_such_arm" in err and "ra_flat" in err and "baseline" in err


PAPER_ARMS = {  # (arm, horizon) -> the paper arm it reproduces (Table 1, Table 3)
    ("baseline", 512): "1", ("zero_grad_flat", 512): "2", ("gate_flat", 512): "3", ("ra_flat", 512): "4",
    ("stopped_tree", 512): "5", ("stopped_tree_bonus", 512): "6", ("root_restart", 512): "7",
    ("root_restart_bonus", 512): "8", ("midpoint_ra_mst", 512): "9", ("midpoint_mst", 512): "10",
    ("stopped_tree_accum", 512): "11", ("stopped_tree", 1024): "12", ("stopped_tree_bonus", 1024): "13",
    ("ablate_skip", 512): "ablate_skip", ("ablate_selective", 512): "ablate_selective",
    ("mst_act30", 512): "mst_act30", ("mst_zpd_act35", 512): "mst_zpd_act35",
    ("ra_mst_tail50", 512): "ra_mst_tail50", ("stopped_tree_h1024", 1024): "stopped_tree_h1024",
    ("cf_grpo", 1024): "14", ("rg_cf_grpo", 1024): "15", ("rg_cf_grpo_act18", 1024): "16", ("pb_cf_grpo", 1024): "17",
    ("rg_cf_grpo_strat", 1024): "18", ("pb_cf_grpo_strat", 1024): "19",
}


@pytest.mark.slow
def test_every_paper_arm_has_its_own_name():
    for (arm, horizon), label in PAPER_ARMS.items():
        assert paper_arm(compose_cfg([f"+arm={arm}", f"horizon={horizon}"])) == label, (arm, horizon)
    assert paper_arm(compose_cfg(["+arm=ra_flat", "horizon=1024"])) == ""  # not a paper arm
    assert paper_arm(compose_cfg(["+arm=root_restart", "estimator.beta=0.25"])) == "7"  # a variant, not Arm 8
    assert len(set(PAPER_ARMS.values())) == len(PAPER_ARMS)
    root_restart, arm8 = compose_cfg(["+arm=root_restart"]), compose_cfg(["+arm=root_restart_bonus"])
    assert (root_restart.estimator.beta, arm8.estimator.beta) == (0.0, 0.25)


@pytest.mark.slow
def test_paper_grid_files_name_arms_1_to_13_and_read_arm13_out_at_batch_64():
    seen = {}
    for path in sorted((CONF_DIR / "sweep" / "paper_arms").glob("*.yaml")):
        cfg = compose_cfg([f"+sweep/paper_arms={path.stem}"])
        seen[paper_arm(cfg)] = cfg.eval.batch_size
        assert path.stem.startswith(f"arm{int(paper_arm(cfg)):02d}_")
    assert seen == {str(n): (64 if n == 13 else 32) for n in range(1, 14)}


def test_mst_zpd_act35_stops_at_the_papers_90_step_budget():
    cfg = compose_cfg(["+arm=mst_zpd_act35"])
    assert (cfg.train.active_steps, cfg.train.max_steps) == (35, 90)


@pytest.mark.slow
def test_a_killed_job_is_one_failed_line_and_the_summary_is_printed(tmp_path):
    """Seen: with hydra/launcher=submitit_local, one job killed (kill -9, an OOM) made the sweep command
    die with submitit's UncompletedJobError traceback and no summary. Want: the summary, with that job
    as one failed line, the other run finished, exit 1."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from rlvr_sweep.store.lock import lock_path
    from tests.helpers import run_dir_of

    smoke = ["+arm=ra_flat", "profile=smoke", "train.steps=30", "train.write_every=1", "eval=none"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src")}
    cmd = [sys.executable, "-m", "rlvr_sweep", *smoke, "run.out_root=runs", "hydra/launcher=submitit_local",
           "hydra.launcher.submitit_folder=submitit/%j", "-m", "seed=1,2"]
    sweep = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    victim = run_dir_of(compose_cfg([*smoke, "seed=1", f"run.out_root={tmp_path}/runs"]))
    deadline, pid = time.monotonic() + 300, None
    while pid is None and time.monotonic() < deadline and sweep.poll() is None:
        if (victim / "steps.parquet").is_file():  # training: the job holds the run's lock, its pid inside
            pid = json.loads(lock_path(victim).read_text())["pid"]
        time.sleep(0.2)
    assert pid is not None, sweep.communicate()[0][-3000:]
    os.kill(pid, signal.SIGKILL)
    out = sweep.communicate(timeout=600)[0]
    assert sweep.returncode == 1, out[-3000:]
    assert "UncompletedJobError" not in out.replace("(UncompletedJobError", "")  # no traceback of it
    assert "Traceback" not in out
    assert "Sweep summary" in out and "runs: 1 failed, 1 finished" in out
    assert "did not finish" in out

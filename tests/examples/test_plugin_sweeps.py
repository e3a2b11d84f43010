"""Past the paper with every guarantee, through the command line as a researcher runs it (slow tier): a batch
estimator, a token-aware reward and a task of one's own each run a 3-seed smoke sweep that `verify all`
passes; an edited plugin is a new run; verify says "incomplete" (exit 3) until asked to import the plugin's
recorded code; an exception in plugin code is the plugin's, not a bug of ours."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

SEEDS = "seed=42,101,7"
SHORT = ["profile=smoke", "train.steps=8", "eval.limit=16"]
EXIT_INCOMPLETE = 3


def command(module: str, *args: str, cwd: Path, plugins: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RLVR_SWEEP_PLUGINS": plugins,
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)


def sweep(tmp_path: Path, args: list[str], plugins: str = "") -> subprocess.CompletedProcess:
    proc = command("rlvr_sweep", *args, *SHORT, f"run.out_root={tmp_path}/runs", "-m", SEEDS, cwd=tmp_path,
                   plugins=plugins)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return proc


def verify(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return command("rlvr_sweep.verify", "all", str(tmp_path / "runs"), *extra, cwd=tmp_path)


def passes(proc) -> dict[str, str]:
    return {line.split()[1]: line.split()[2].rstrip(":") for line in proc.stdout.splitlines() if line.startswith("PASS")}


def test_a_batch_estimator_sweep_verifies(tmp_path):
    proc = sweep(tmp_path, ["+arm=ra_flat", "estimator=grpo_batch_std", "train.accumulate_questions=4"])
    assert "runs: 3 finished" in proc.stdout
    checked = verify(tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert passes(checked) == {"1": "ok", "2": "ok", "3": "ok", "4": "ok"}
    steps = [json.loads(p.read_text())["totals"]["steps"] for p in (tmp_path / "runs").glob("smoke/ra_flat/*/run.json")]
    assert steps == [8, 8, 8]


def test_a_token_reward_sweep_is_incomplete_without_its_code_and_verifies_with_it(tmp_path):
    example = str(REPO / "examples" / "clip_lenpen")
    sweep(tmp_path, ["+arm=token_penalty"], plugins=example)
    plain = verify(tmp_path)
    assert plain.returncode == EXIT_INCOMPLETE, plain.stdout + plain.stderr
    assert passes(plain) == {"1": "INCOMPLETE", "2": "ok", "3": "ok", "4": "ok"}
    assert plain.stdout.count("rollout rewards come from plugin reward 'token_len_penalty' and were not re-derived") == 3
    assert "incomplete: PASS 1 (plugin code not imported: --plugins re-derives it)" in plain.stdout
    refused = verify(tmp_path, "--plugins")  # its folder named nowhere: nothing imported, and said so
    assert refused.returncode == EXIT_INCOMPLETE and "lies outside the places named for plugins" in refused.stdout
    assert "--plugins was given: the lines above say why" in refused.stdout
    opted = verify(tmp_path, "--plugins", example)
    assert opted.returncode == 0, opted.stdout + opted.stderr
    assert "PASS 1 ok: 3 finished runs; 96 grades and 192 rollout rewards regraded; 24 step stds" in opted.stdout
    info = json.loads(next((tmp_path / "runs").glob("smoke/token_penalty/*/run.json")).read_text())
    assert info["inputs"]["plugins"]["options"] == {"reward.name": "token_len_penalty"}
    assert sorted(info["inputs"]["plugins"]["files"]) == ["clip_lenpen", "clip_lenpen.estimators", "clip_lenpen.rewards"]


def test_the_example_task_sweeps_tabulates_reports_and_verifies(tmp_path):
    example = str(REPO / "examples" / "countdown")
    proc = sweep(tmp_path, ["+arm=countdown_grpo"], plugins=example)
    assert "runs: 3 finished" in proc.stdout and proc.stdout.count("countdown_heldout") >= 3
    tables = command("rlvr_sweep.analysis", "tables", str(tmp_path / "runs"), "--out", str(tmp_path / "tables"),
                     cwd=tmp_path)
    assert tables.returncode == 0, tables.stderr
    assert "benchmarks ['countdown_heldout']" in tables.stdout and "| countdown_grpo |" in tables.stdout
    report = command("rlvr_sweep.analysis", "report", str(tmp_path / "runs"), "--out", str(tmp_path / "r.html"),
                     "--plugins", example, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "r.html").read_text()
    assert "countdown_heldout" in html and "every pass ok" in html
    assert verify(tmp_path).returncode == EXIT_INCOMPLETE
    opted = verify(tmp_path, "--tables", str(tmp_path / "tables"), "--plugins", example)
    assert opted.returncode == 0, opted.stdout + opted.stderr
    assert "PASS 1 ok: 3 finished runs; 96 grades and 192 rollout rewards regraded; 24 step stds" in opted.stdout


def test_an_edited_plugin_is_a_new_run_never_a_skip(tmp_path):
    plugin = tmp_path / "lenpen"
    shutil.copytree(REPO / "examples" / "clip_lenpen", plugin)
    arm = ["+arm=clip_lenpen", "train.steps=4", "eval.limit=8"]
    sweep(tmp_path, arm, plugins=str(plugin))
    again = sweep(tmp_path, arm, plugins=str(plugin))
    assert "runs: 3 skipped" in again.stdout
    rewards = plugin / "rewards.py"
    rewards.write_text(rewards.read_text().replace("r - coef * min(1.0, len(t) / max_chars)",
                                                   "r - 2 * coef * min(1.0, len(t) / max_chars)"))
    edited = sweep(tmp_path, arm, plugins=str(plugin))
    assert "runs: 3 finished" in edited.stdout and "skipping" not in edited.stdout
    infos = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("smoke/clip_lenpen/*/run.json")]
    assert len(infos) == 6 and len({i["run_hash"] for i in infos}) == 6
    codes = {i["inputs"]["plugins"]["files"]["lenpen.rewards"] for i in infos}
    assert len(codes) == 2 and len({(i["seed"], i["settings_hash"]) for i in infos}) == 3  # per seed: same settings
    tables = command("rlvr_sweep.analysis", "tables", str(tmp_path / "runs"), "--out", str(tmp_path / "t"), cwd=tmp_path)
    assert "arm 'clip_lenpen' is 2 rows" in tables.stdout and "clip_lenpen [plugin lenpen.rewards v2]" in tables.stdout
    run_dirs = sorted(p.parent for p in (tmp_path / "runs").glob("smoke/clip_lenpen/*_s42_*/run.json"))
    diff = command("rlvr_sweep.analysis", "diff", str(run_dirs[0]), str(run_dirs[1]), cwd=tmp_path)
    assert "plugins module lenpen.rewards" in diff.stdout and "settings that differ: none" in diff.stdout

    # the earlier runs stay checkable: each kept the code it ran, re-derived with it when the folder is named
    runs = tmp_path / "runs"
    moved = verify(tmp_path, "--plugins", str(plugin))
    assert moved.returncode == EXIT_INCOMPLETE, moved.stdout + moved.stderr
    assert moved.stdout.splitlines()[-1].endswith(
        f"(the plugin code changed since 3 run(s) ran: --plugins-kept-in {runs} re-derives them with the code each "
        "run kept (it imports that code from the results folder: only for results you trust))")
    kept = verify(tmp_path, "--plugins", str(plugin), "--plugins-kept-in", str(runs))
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "PASS 1 ok: 6 finished runs" in kept.stdout and "4/4 passes ok" in kept.stdout
    old = next(i for i in infos if i["inputs"]["plugins"]["files"]["lenpen.rewards"] != codes_now(plugin))
    assert (Path(old["run_dir"]) / "plugin_code" / str((plugin / "rewards.py").resolve()).lstrip("/")).is_file()


def codes_now(plugin: Path) -> str:
    import hashlib

    return hashlib.sha256((plugin / "rewards.py").read_bytes()).hexdigest()


def test_an_error_raised_in_plugin_code_is_the_plugin_s(tmp_path):
    plugin = tmp_path / "broken.py"
    plugin.write_text("from rlvr_sweep.credit import ESTIMATORS\n\n\n"
                      "@ESTIMATORS.register('broken', kind='leaf')\n"
                      "def broken(rewards, shape):\n"
                      "    return rewards / 0 + len(None)\n")
    proc = command("rlvr_sweep", "+arm=ra_flat", "estimator=broken", "profile=smoke", "train.steps=2", "eval.limit=4",
                   f"run.out_root={tmp_path}/runs", cwd=tmp_path, plugins=str(plugin))
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr
    assert err[-1] == ("rlvr_sweep: plugin rlvr_sweep_plugin_broken raised TypeError: object of type 'NoneType' has "
                       f"no len() in rlvr_sweep_plugin_broken.broken ({plugin}:6: return rewards / 0 + len(None)); "
                       "the run is recorded as failed")
    assert "bug in rlvr_sweep" not in proc.stderr
    info = json.loads(next((tmp_path / "runs").glob("smoke/ra_flat/*/run.json")).read_text())
    assert info["status"] == "failed" and info["error_in"].startswith("plugin rlvr_sweep_plugin_broken.broken (")


def test_an_estimator_output_its_kind_does_not_return_is_the_plugin_s(tmp_path):
    """Seen: a plugin estimator returning text (or the wrong shape) ended as "a bug in rlvr_sweep" with a
    traceback. Want: one line naming the estimator and what it returned; the run recorded as failed."""
    plugin = tmp_path / "wordy.py"
    plugin.write_text("from rlvr_sweep.extend import ESTIMATORS\n\n\n"
                      "@ESTIMATORS.register('wordy', kind='leaf')\n"
                      "def wordy(rewards, shape):\n"
                      "    return 'lots'\n")
    proc = command("rlvr_sweep", "+arm=ra_flat", "estimator=wordy", "profile=smoke", "train.steps=2", "eval.limit=4",
                   f"run.out_root={tmp_path}/runs", cwd=tmp_path, plugins=str(plugin))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "rlvr_sweep: estimator 'wordy' returned str as its advantages: it returns numbers, one per rollout; the run "
        "is recorded as failed")
    assert "bug in rlvr_sweep" not in proc.stderr and "Traceback" not in proc.stderr

"""Working like researchers' tools: experiment loggers, progress bars, run.log, the kept model and the
evaluation-only read-out of any checkpoint."""

from __future__ import annotations

import csv
import json
import os
import pty
import subprocess
import sys

import pytest

from rlvr_sweep import store
from rlvr_sweep.verify.integrity import run_problems
from rlvr_sweep.run import run
from tests.conftest import REPO
from tests.helpers import compose_cfg, run_cli, run_killed_at

SMOKE = ["+arm=ra_flat", "profile=smoke", "eval.limit=40"]


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    """A 12-step smoke run with every logger on."""
    root = tmp_path_factory.mktemp("logged")
    info = run(compose_cfg([*SMOKE, "train.steps=12", "logger=[csv,tensorboard,wandb]", f"run.out_root={root}"]))
    return info


@pytest.mark.slow
def test_csv_logs_every_step_and_phase(logged_run):
    with open(os.path.join(logged_run["run_dir"], "logs", "metrics.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    steps = [r for r in rows if r["kind"] == "step"]
    assert [int(r["step"]) for r in steps] == list(range(12))
    stored = store.read_table(logged_run["run_dir"], "steps")
    assert [float(r["mean_reward"]) for r in steps] == pytest.approx(stored["mean_reward"].tolist())
    assert all(float(r["lr"]) == 5e-5 for r in steps) and all(float(r["gen_tokens"]) > 0 for r in steps)
    for column in ("entropy", "length_mean", "truncated_share"):  # the health signals, empty where a step has none
        logged = [float(r[column]) if r[column] else float("nan") for r in steps]
        assert logged == pytest.approx(stored[column].astype(float).tolist(), nan_ok=True), column
    accuracy = {(r["phase"], r["benchmark"]): float(r["accuracy"]) for r in rows if r["kind"] == "accuracy"}
    assert accuracy == {(p, "toy_heldout"): logged_run["accuracy"][p]["toy_heldout"] for p in ("base", "trained")}


def test_tensorboard_events_load_in_tensorboards_own_reader(logged_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(os.path.join(logged_run["run_dir"], "logs", "tensorboard"))
    events.Reload()
    rewards = events.Scalars("train/mean_reward")
    stored = store.read_table(logged_run["run_dir"], "steps")
    assert [e.step for e in rewards] == list(range(12))
    assert [e.value for e in rewards] == pytest.approx(stored["mean_reward"].tolist())
    assert {"train/grad_norm", "train/tokens_per_s", "train/lr", "accuracy/trained/toy_heldout"} <= set(
        events.Tags()["scalars"])
    assert "config/text_summary" in events.Tags()["tensors"]  # the resolved config, as text


def test_wandb_logs_offline(logged_run):
    pytest.importorskip("wandb", reason="W&B is an optional extra: pip install 'rlvr_sweep[wandb]'")
    folder = os.path.join(logged_run["run_dir"], "logs", "wandb")
    (offline,) = [d for d in os.listdir(folder) if d.startswith("offline-run-")]
    (record,) = [f for f in os.listdir(os.path.join(folder, offline)) if f.endswith(".wandb")]
    data = open(os.path.join(folder, offline, record), "rb").read()
    assert b"train/mean_reward" in data and b"accuracy/trained/toy_heldout" in data and b"train.lr" in data


def test_run_log_and_the_kept_model(logged_run):
    run_dir = logged_run["run_dir"]
    log = open(os.path.join(run_dir, "logs", "run.log")).read()
    assert "step 0 q=" in log and "step 11 q=" in log and "trained toy_heldout" in log
    assert store.verify_manifest(run_dir) == []  # the logs are outside the manifest, the model inside
    manifest = json.loads(open(os.path.join(run_dir, store.MANIFEST)).read())["files"]
    assert "model/model.safetensors" in manifest and not any(name.startswith("logs/") for name in manifest)


@pytest.mark.slow
def test_evaluate_task_reads_a_kept_model_out_with_the_accuracy_it_had(logged_run, tmp_path):
    """`task=evaluate model.path=<run>/model`: same benchmark, same accuracy as the trained read-out, in its
    own run folder whose identity includes the checkpoint's digest."""
    model = os.path.join(logged_run["run_dir"], "model")
    proc = run_cli(["task=evaluate", "profile=smoke", f"model.path={model}", "eval.limit=40", "run.out_root=runs"],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_json,) = (tmp_path / "runs" / "smoke" / "evaluate").rglob("run.json")
    info = json.loads(run_json.read_text())
    assert info["accuracy"]["eval"]["toy_heldout"] == logged_run["accuracy"]["trained"]["toy_heldout"]
    assert info["task"] == "evaluate"
    # the read-out's model input is the run's saved model: the same digest, so analysis credits it to the run
    assert info["model_digest"] == logged_run["saved_model_digest"] == info["inputs"]["model"]["sha256"]
    grades = store.read_table(run_json.parent, "grades")
    trained = store.read_table(logged_run["run_dir"], "grades").query("phase == 'trained'")
    assert grades["phase"].unique().tolist() == ["eval"]
    assert grades["response"].tolist() == trained["response"].tolist()
    assert run_problems(run_json.parent) == []  # an evaluate run trains nothing: no ledgers expected


@pytest.mark.slow
def test_a_resumed_run_logs_each_step_once(tmp_path):
    base = [*SMOKE, "train.steps=12", "train.checkpoint_every=5", "eval=none", "logger=[csv,tensorboard]",
            f"run.out_root={tmp_path}"]
    run_killed_at(compose_cfg(base), step=7)
    info = run(compose_cfg(base))
    with open(os.path.join(info["run_dir"], "logs", "metrics.csv"), newline="") as f:
        steps = [int(r["step"]) for r in csv.DictReader(f) if r["kind"] == "step"]
    assert steps == list(range(12))
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(os.path.join(info["run_dir"], "logs", "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("train/mean_reward")] == list(range(12))


def cli_output(cwd, args, terminal: bool) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src"), "COLUMNS": "120"}
    cmd = [sys.executable, "-m", "rlvr_sweep", *args]
    cwd.mkdir()
    if not terminal:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        return proc.stdout + proc.stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=600)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.slow
def test_progress_is_a_bar_in_a_terminal_and_plain_lines_elsewhere(tmp_path):
    args = [*SMOKE, "train.steps=6", "eval.limit=16", "run.out_root=runs"]
    in_terminal = cli_output(tmp_path / "a", args, terminal=True)
    plain = cli_output(tmp_path / "b", args, terminal=False)
    assert "\r" in in_terminal and "train:" in in_terminal and "step/s" in in_terminal  # a redrawn tqdm bar
    assert "\r" not in plain
    assert "train: 100% 6/6" in plain and "read-out trained toy_heldout: 100% 16/16" in plain

"""Launching through SLURM, and the launcher and sweep presets.

The SLURM tests run against a real controller: the one-node cluster that
`launchers/slurm/start_local_cluster.sh` starts (`.ci/run` starts it before the tests). Where no
controller answers `sinfo` they skip, saying how to start one; with RLVR_SWEEP_REQUIRE_SLURM=1
(set by `.ci/run`) they fail instead, with the daemons' logs in the message. Jobs run as root on this machine, so the tests' folders live under pytest's tmp_path
(on /tmp), which the jobs can read and write.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser

from rlvr_sweep import store as results
from rlvr_sweep.run import checkpoint
from rlvr_sweep.config import paper_arm, register_configs
from tests.conftest import CONF_DIR, REPO, unavailable
from tests.helpers import compose_cfg, run_dir_of, same_inputs_identity

# Our launcher presets carry the plugin's names, so Hydra merges the plugin's dataclass into them
# as their schema and says that this matching is deprecated (see launchers/README.md).
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings(
    r"ignore:\s*'hydra/launcher/submitit_(slurm|local)' is validated against ConfigStore schema:UserWarning"
)]

PARTITION = "debug"
SLURM_CONF = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
# CPU-sized resources so that two smoke jobs fit on a 2-CPU node at once
SLURM_LAUNCH = [
    "hydra/launcher=submitit_slurm", f"hydra.launcher.partition={PARTITION}", "hydra.launcher.gpus_per_node=null",
    "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2", "hydra.launcher.timeout_min=10",
]
SMOKE = ["profile=smoke", "train.steps=3", "eval.limit=8"]


# --- the controller ---------------------------------------------------------------------------

def daemon_logs(lines: int = 60) -> str:
    """The tail of every SLURM and munge daemon log: the files slurm.conf names, else /var/log/slurm*."""
    paths = []
    if SLURM_CONF.is_file():
        text = SLURM_CONF.read_text()
        paths += [Path(m) for m in re.findall(r"^\s*Slurm(?:ctld|d)LogFile\s*=\s*(\S+)", text, re.M | re.I)]
    else:
        paths.append(SLURM_CONF)  # reported as missing
    paths += sorted(Path("/var/log").glob("slurm*/*.log")) + sorted(Path("/var/log").glob("slurm*.log"))
    paths.append(Path("/var/log/munge/munged.log"))
    out, seen = [], set()
    for path in paths:
        if path in seen:
            continue
        seen.add(path)
        try:
            tail = "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as err:
            tail = f"({err})"
        out.append(f"----- {path} -----\n{tail}")
    return "\n".join(out)


def slurm(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


@functools.lru_cache(maxsize=None)
def controller_state() -> tuple[str | None, str]:
    """(usable node of the `debug` partition, None) or (None, why not), asked once per session: a
    controller that is down makes `sinfo` wait for its own timeouts, so it is asked with a short one."""
    try:
        proc = slurm("sinfo", "-h", "-N", "-p", PARTITION, "-o", "%N %T", timeout=5)
    except (OSError, subprocess.SubprocessError) as err:
        return None, f"no SLURM controller here (cannot run sinfo: {err!r})"
    nodes = [line.split() for line in proc.stdout.splitlines() if line.strip()]
    usable = [name for name, state in nodes if re.match(r"(idle|mixed|allocated|completing)", state)]
    if proc.returncode != 0 or not usable:
        return None, f"the SLURM controller is not usable: sinfo exit {proc.returncode}, nodes {nodes}, {proc.stderr.strip()}"
    return usable[0], ""


def require_controller() -> str:
    """The node of the local cluster's `debug` partition. Without a usable controller the test skips,
    saying how to start one, or fails with the daemons' logs when RLVR_SWEEP_REQUIRE_SLURM=1."""
    node, why = controller_state()
    if node is None:
        hint = "start one with: launchers/slurm/start_local_cluster.sh (as root; see launchers/README.md)"
        unavailable("SLURM", f"{why}; {hint}\n{daemon_logs()}")
    return node


def launch_cmd(tmp: Path, overrides: list[str]) -> list[str]:
    return [sys.executable, "-m", "rlvr_sweep", *overrides, f"run.out_root={tmp}/runs", f"hydra.sweep.dir={tmp}/sweep",
            *SLURM_LAUNCH, f"hydra.launcher.submitit_folder={tmp}/submitit/%j"]


def cli_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def job_state(job_id: str) -> str:
    proc = slurm("scontrol", "-o", "show", "job", job_id)
    match = re.search(r"JobState=(\S+)", proc.stdout)
    return match[1] if match else "GONE"


def failure_report(tmp: Path, proc: subprocess.CompletedProcess | None = None) -> str:
    parts = []
    if proc is not None:
        parts.append(f"launcher exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-6000:]}")
    for log in sorted((tmp / "submitit").glob("*/*_log.*")):
        parts.append(f"--- {log} ---\n" + "\n".join(log.read_text(errors="replace").splitlines()[-40:]))
    parts.append(f"--- squeue ---\n{slurm('squeue', '-a').stdout}")
    parts.append(daemon_logs(30))
    return "\n".join(parts)


# --- status while a SLURM sweep runs ----------------------------------------------------------

def test_status_follows_a_slurm_sweep_while_it_runs(tmp_path):
    """Polled while a 2-job array runs: each run is seen queued or starting under its SLURM job, then
    running with its progress (phase, step i / N, its SLURM job), then finished; the verdict rests on
    the states seen, the polling interval only sets how often they are looked at."""
    from rlvr_sweep.sweep.status import sweep_states

    require_controller()
    root = tmp_path / "runs"
    cmd = launch_cmd(tmp_path, ["+arm=ra_flat", "profile=smoke", "train.steps=6", "eval.limit=8", "-m", "seed=42,101"])
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: dict[int, list[dict]] = {42: [], 101: []}
    try:
        while proc.poll() is None:
            for row in sweep_states(root):
                seen[row["seed"]].append(row)
            time.sleep(0.1)
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-4000:] + failure_report(tmp_path)
    final = sweep_states(root)
    assert [(r["seed"], r["state"]) for r in final] == [(42, "finished"), (101, "finished")], final
    for seed, rows in seen.items():
        states = [r["state"] for r in rows]
        assert "running" in states, (seed, sorted(set(states)))
        running = [r for r in rows if r["state"] == "running" and "total" in r["progress"]]
        assert running, (seed, [r["detail"] for r in rows if r["state"] == "running"])
        assert {r["progress"]["total"] for r in running} <= {6, 8}  # training steps, read-out items
        assert all(re.search(r", SLURM job \d+_[01]$", r["detail"]) for r in running), running[0]["detail"]
        before = states[:states.index("running")]
        assert set(before) <= {"checking", "queued", "starting"}, before  # nothing else before it runs
        assert states[-1] == "finished" or "finished" not in states or states.index("finished") > states.index("running")


# --- (a) a 2 arms x 2 seeds smoke sweep through SLURM ------------------------------------------

def test_smoke_sweep_through_slurm_is_collected(tmp_path, capsys):
    controller = require_controller()
    arms, seeds = ["ra_flat", "gate_flat"], [42, 101]
    cmd = launch_cmd(tmp_path, [f"+arm={','.join(arms)}", *SMOKE, "-m", f"seed={','.join(map(str, seeds))}"])
    start = time.time()
    proc = subprocess.run(cmd, cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, failure_report(tmp_path, proc)

    expected = {run_dir_of(compose_cfg([f"+arm={arm}", *SMOKE, f"seed={seed}", f"run.out_root={tmp_path}/runs"]))
                for arm in arms for seed in seeds}
    for run_dir in expected:
        assert results.is_finished(run_dir), f"{run_dir} has no DONE marker\n{failure_report(tmp_path, proc)}"
        assert results.read_run_json(run_dir)["status"] == "finished"
    collected = results.collect(tmp_path / "runs")
    wall = time.time() - start
    scripts = list((tmp_path / "submitit").glob("*/*_submission.sh"))
    assert len(scripts) == 1, f"expected one sbatch job array, found {scripts}"  # the jobs went through sbatch
    since_sbatch = time.time() - scripts[0].stat().st_mtime

    runs = collected["runs"]
    assert len(runs) == 4, runs
    assert {Path(d).resolve() for d in runs["run_dir"]} == {d.resolve() for d in expected}
    assert set(zip(runs["arm"], runs["seed"])) == {(a, s) for a in arms for s in seeds}
    assert set(collected["steps"].groupby(["arm", "seed"]).size()) == {3}
    said = proc.stdout + proc.stderr  # without accounting: sacct's words and submitit's warning, once per sweep
    for message in ("Slurm accounting storage is disabled", "sacct does not answer"):
        assert said.count(message) <= 1, f"{message!r} said {said.count(message)} times:\n{said[-4000:]}"
    assert "Bypassing sacct error" not in said, said[-4000:]
    finished_logs = [p for p in (tmp_path / "submitit").glob("*/*_log.out") if "completed successfully" in p.read_text()]
    assert len(finished_logs) == 4, failure_report(tmp_path, proc)
    for log in finished_logs:  # progress in a SLURM log: plain lines, no carriage-return redraws
        text = log.read_text() + log.with_name(log.name.replace("_log.out", "_log.err")).read_text()
        assert "train: 100% 3/3" in text and "read-out trained toy_heldout: 100%" in text and "\r" not in text
    with capsys.disabled():
        print(f"\n[test_slurm] 2x2 smoke sweep on node {controller}: launch -> collected {wall:.1f}s, "
              f"sbatch -> collected {since_sbatch:.1f}s")


@pytest.mark.slow
def test_one_run_over_two_slurm_tasks_is_the_one_process_run(tmp_path):
    """`hydra.launcher.tasks_per_node=2`: the job's two tasks are one run's two ranks (submitit's own rendezvous,
    gloo, FSDP2): rank 0 writes the run folder, whose rollouts and rewards before the first update are the
    one-process run's."""
    from rlvr_sweep.run import run

    require_controller()
    args = ["+arm=ra_flat", *SMOKE, "model.engine=reference"]
    cmd = launch_cmd(tmp_path, [*args, "hydra.launcher.tasks_per_node=2", "-m", "seed=42"])
    proc = subprocess.run(cmd, cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, failure_report(tmp_path, proc)
    run_dir = run_dir_of(compose_cfg([*args, "seed=42", f"run.out_root={tmp_path}/runs"]))
    info = results.read_run_json(run_dir)
    assert results.is_finished(run_dir) and info["status"] == "finished" and info["world_size"] == 2, \
        failure_report(tmp_path, proc)
    one = Path(run(compose_cfg([*args, "seed=42", f"run.out_root={tmp_path}/one"]))["run_dir"])
    assert one.name == run_dir.name and sorted(p.name for p in one.iterdir()) == sorted(p.name for p in run_dir.iterdir())
    steps = results.read_table(one, "steps")
    first = int(steps.loc[steps["action"] == "backward_step", "step"].min())
    pairs = [results.read_table(d, "pairs") for d in (one, run_dir)]
    before = [p[p["step"] <= first].drop(columns=[c for c in p.columns if c in results.RUN_KEYS]) for p in pairs]
    assert before[0].equals(before[1])


def test_a_cluster_without_accounting_is_said_once_per_sweep(tmp_path, monkeypatch, capfd, caplog):
    """submitit's watcher polls a `sacct` that fails as it does without accounting storage: inside a launch
    (`_sacct_said_once`) neither sacct's stderr nor submitit's warnings reach the terminal at each poll; one
    line says both, once; after it, submitit is as it was. (No cluster needed: a fake sacct.)"""
    import logging

    from submitit.core import core
    from submitit.slurm.slurm import SlurmInfoWatcher

    from hydra_plugins.rlvr_sweep_launchers.launchers import _sacct_said_once

    fake = tmp_path / "bin" / "sacct"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'Slurm accounting storage is disabled' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    watcher = SlurmInfoWatcher(delay_s=600)
    watcher.register_job("4242_0")
    with caplog.at_level(logging.WARNING), _sacct_said_once():
        for _ in range(3):  # three polls, as a sweep makes several
            watcher.update()
    printed = "".join(capfd.readouterr())
    assert watcher.num_calls == 3
    assert "Slurm accounting storage is disabled" not in printed and "Bypassing sacct error" not in printed, printed
    said = [r.getMessage() for r in caplog.records if "sacct" in r.getMessage()]
    assert said == [("sacct does not answer on this cluster (Slurm accounting storage is disabled): submitit follows "
                     "the jobs without it; its further warnings about it are not shown")], said
    assert core.subprocess is subprocess and not logging.getLogger("submitit").filters  # put back
    caplog.clear()
    with caplog.at_level(logging.WARNING), _sacct_said_once():  # the next sweep says it again
        watcher.update()
    assert len([r for r in caplog.records if "sacct does not answer" in r.getMessage()]) == 1


def test_a_plugin_named_once_reaches_the_slurm_jobs(tmp_path):
    """A plugin named only in the environment (RLVR_SWEEP_PLUGINS): its arm and options compose in the SLURM
    job processes too (sbatch passes the environment on), and each run records the plugin's code."""
    require_controller()
    example = REPO / "examples" / "clip_lenpen"
    cmd = launch_cmd(tmp_path, ["+arm=clip_lenpen", *SMOKE, "estimator.params.clip=0.5", "-m", "seed=42,101"])
    proc = subprocess.run(cmd, cwd=tmp_path, env={**cli_env(), "RLVR_SWEEP_PLUGINS": str(example)},
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, failure_report(tmp_path, proc)
    infos = [results.read_run_json(p.parent) for p in sorted((tmp_path / "runs").glob("smoke/clip_lenpen/*/DONE"))]
    assert [i["status"] for i in infos] == ["finished", "finished"], failure_report(tmp_path, proc)
    assert all(i["inputs"]["plugins"]["options"] == {"estimator.name": "grpo_clip", "reward.name": "len_penalty"}
               for i in infos)
    assert len(list((tmp_path / "submitit").glob("*/*_submission.sh"))) == 1  # through sbatch


# --- (b) a job killed mid-run resumes when the same command is launched again ------------------

def test_killed_slurm_job_resumes_with_the_same_command(tmp_path, capsys):
    require_controller()
    overrides = ["+arm=ra_flat", "profile=smoke", "train.steps=200", "train.checkpoint_every=5", "eval=none"]
    cmd = launch_cmd(tmp_path, [*overrides, "-m", "seed=42"])
    run_dir = run_dir_of(compose_cfg([*overrides, "seed=42", f"run.out_root={tmp_path}/runs"]))

    first = subprocess.Popen(cmd, cwd=tmp_path, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while not (run_dir / checkpoint.CHECKPOINT).is_file():
            assert first.poll() is None, f"the launcher exited early ({first.returncode})\n{failure_report(tmp_path)}"
            assert time.time() < deadline, f"no checkpoint in {run_dir} after 300 s\n{failure_report(tmp_path)}"
            time.sleep(0.05)
        job_id = next(p.name for p in (tmp_path / "submitit").iterdir() if re.fullmatch(r"\d+(_\d+)?", p.name))
        # kill -9 the job's python (and its children): the processes of job step 0 as SLURM lists them.
        # (`scancel --signal=KILL` is a plain cancel to SLURM: SIGTERM, which submitit ignores, then
        # SIGKILL after KillWait.)
        listed = slurm("scontrol", "listpids", job_id).stdout.splitlines()[1:]
        step_pids = [int(row.split()[0]) for row in listed if len(row.split()) > 2 and row.split()[2] == "0"]
        assert step_pids, f"no processes listed for job {job_id}: {listed}\n{failure_report(tmp_path)}"
        for pid in step_pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.time() + 120
        while job_state(job_id) in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            assert time.time() < deadline, f"job {job_id} still {job_state(job_id)} after scancel\n{failure_report(tmp_path)}"
            time.sleep(0.2)
    finally:
        # Without an accounting database submitit cannot learn that a killed job ended, so the first
        # launcher would wait forever: stop it (the user's Ctrl-C).
        if first.poll() is None:
            first.send_signal(signal.SIGINT)
            try:
                first.wait(timeout=30)
            except subprocess.TimeoutExpired:
                first.kill()
                first.wait()
    killed_state = job_state(job_id)
    assert not results.is_finished(run_dir), "the run finished before it could be killed; lengthen it"
    assert (run_dir / checkpoint.CHECKPOINT).is_file()

    start = time.time()
    again = subprocess.run(cmd, cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, failure_report(tmp_path, again)
    info = results.read_run_json(run_dir)
    assert results.is_finished(run_dir) and info["status"] == "finished", info
    assert info.get("resumed_from_step", 0) >= 5, f"the run started over instead of resuming: {info}"
    steps = results.read_table(run_dir, "steps")
    assert len(steps) == 200 and steps["step"].is_unique, steps
    with capsys.disabled():
        print(f"\n[test_slurm] job {job_id} killed ({killed_state}) after checkpointing; relaunch resumed from step "
              f"{info['resumed_from_step']} and finished in {time.time() - start:.1f}s")


# --- presets (no cluster needed) -------------------------------------------------------------

def sweep_jobs(overrides: list[str]) -> list[list[str]]:
    """The jobs (override lists) a `-m` launch with these overrides expands to, as Hydra's basic sweeper builds them."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        master = compose("config", overrides=overrides, return_hydra_config=True)
        params = [f"{key}={value}" for key, value in master.hydra.sweeper.params.items()]
        parser = OverridesParser.create(config_loader=GlobalHydra.instance().config_loader())
        return BasicSweeper.split_arguments(parser.parse_overrides(params), None)[0]


MAIN_ARMS = {  # paper_grid: arm preset and horizon of Arms 1-13
    "baseline": [512], "zero_grad_flat": [512], "gate_flat": [512], "ra_flat": [512], "stopped_tree": [512, 1024],
    "stopped_tree_bonus": [512, 1024], "root_restart": [512], "root_restart_bonus": [512], "midpoint_ra_mst": [512],
    "midpoint_mst": [512], "stopped_tree_accum": [512],
}
ABLATIONS = ["ablate_skip", "ablate_selective", "mst_act30", "mst_zpd_act35", "ra_mst_tail50", "stopped_tree_h1024"]


@pytest.mark.parametrize("grid,profile", [("paper_grid", "paper"), ("smoke_grid", "smoke")])
def test_grid_preset_is_arms_1_to_13_times_three_seeds(grid, profile):
    jobs = sweep_jobs([f"+sweep={grid}"])
    assert len(jobs) == 13 * 3
    cfgs = [compose_cfg([f"+sweep={grid}", *job]) for job in jobs]
    assert {c.profile.name for c in cfgs} == {profile}
    found = {}
    for cfg in cfgs:
        found.setdefault(cfg.arm, []).append(cfg.horizon.tokens)
    assert {arm: sorted(h) for arm, h in found.items()} == {arm: sorted(h * 3) for arm, h in MAIN_ARMS.items()}
    assert sorted(c.seed for c in cfgs) == sorted([42, 101, 7] * 13)
    assert len({(c.arm, c.horizon.tokens, c.seed, same_inputs_identity(c)) for c in cfgs}) == 39  # 39 distinct runs
    assert sorted(paper_arm(c) for c in cfgs) == sorted([str(n) for n in range(1, 14)] * 3)
    assert {c.eval.batch_size for c in cfgs if paper_arm(c) == "13"} == {64}  # as the paper read Arm 13 out
    assert {c.eval.batch_size for c in cfgs if paper_arm(c) != "13"} == {32}


def test_grid_runs_share_folders_with_the_same_runs_launched_by_hand():
    """A relaunch by hand finds (and skips) what the grid ran: same config, same hash, same folder
    (Arm 13 by hand needs the paper's read-out batch of 64)."""
    by_hand = {
        "arm12_stopped_tree_h1024": ["+arm=stopped_tree", "horizon=1024"],
        "arm13_stopped_tree_bonus_h1024": ["+arm=stopped_tree_bonus", "horizon=1024", "eval.batch_size=64"],
        "arm08_root_restart_bonus": ["+arm=root_restart_bonus"],
        "arm01_baseline": ["+arm=baseline"],
    }
    for cell, hand in by_hand.items():
        for extra in ([], ["profile=smoke"]):
            grid = compose_cfg([f"+sweep/paper_arms={cell}", "seed=7", *extra])
            assert same_inputs_identity(grid) == same_inputs_identity(compose_cfg([*hand, "seed=7", *extra])), cell
    smoke = compose_cfg(["+sweep=smoke_grid", "+sweep/paper_arms=arm05_stopped_tree", "seed=42"])
    assert run_dir_of(smoke) == run_dir_of(compose_cfg(["+arm=stopped_tree", "profile=smoke", "seed=42"]))


@pytest.mark.parametrize("preset,profile", [("paper_ablations", "paper"), ("smoke_ablations", "smoke")])
def test_ablation_preset_is_table_3_at_seed_101(preset, profile):
    jobs = sweep_jobs([f"+sweep={preset}"])
    cfgs = [compose_cfg([f"+sweep={preset}", *job]) for job in jobs]
    assert sorted(c.arm for c in cfgs) == sorted(ABLATIONS)
    assert {c.seed for c in cfgs} == {101} and {c.profile.name for c in cfgs} == {profile}


def launcher_cfg(overrides: list[str]):
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True).hydra.launcher


def test_launcher_presets_come_from_our_config_tree():
    slurm_cfg = launcher_cfg(["hydra/launcher=submitit_slurm"])
    assert slurm_cfg._target_.endswith("SlurmLauncher")
    assert (slurm_cfg.gpus_per_node, slurm_cfg.cpus_per_task, slurm_cfg.mem_gb) == (1, 8, 64)  # ours, not the plugin's
    assert slurm_cfg.submitit_folder.startswith("outputs/submitit/") and slurm_cfg.signal_delay_s == 120
    debug = launcher_cfg(["hydra/launcher=slurm_debug"])
    assert (debug.partition, debug.gpus_per_node, debug.cpus_per_task) == (PARTITION, None, 1)
    local = launcher_cfg(["hydra/launcher=submitit_local"])
    assert local._target_.endswith("LocalLauncher") and local.submitit_folder.startswith("outputs/submitit/")
    assert launcher_cfg([])._target_.endswith("BasicLauncher")
    site = launcher_cfg(["hydra/launcher=submitit_slurm", "+hydra.launcher.additional_parameters.mail-type=END"])
    assert site.additional_parameters == {"mail-type": "END"}


# --- (c) a submission error shows the scheduler's own message ------------------------------------

def test_submission_error_shows_the_schedulers_message(tmp_path):
    require_controller()
    cmd = [*launch_cmd(tmp_path, ["+arm=ra_flat", *SMOKE, "-m", "seed=42"]), "hydra.launcher.partition=no_such_partition"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "invalid partition specified" in out.lower() or "no_such_partition" in out, out[-3000:]
    assert "sbatch" in out.lower(), out[-3000:]

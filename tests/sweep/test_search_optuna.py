"""Searches under Optuna's sweeper, end to end on the smoke profile (docs/search.md): trials run as
identity-hashed runs, the best is reported, a failing trial is recorded as failed and the search goes on,
a relaunch reads the finished runs, and the runs are seen by `status`, `analysis` and `verify`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import run_cli

pytestmark = pytest.mark.slow  # each trial trains a tiny model in a subprocess

SEARCH = ["+arm=ra_flat", "profile=smoke", "hydra/sweeper=optuna", "train.steps=2", "eval.limit=4"]
BROKEN = """from rlvr_sweep.credit import ESTIMATORS


@ESTIMATORS.register("t_broken_leaf", kind="leaf")
def broken(rewards, shape):
    return sorted([rewards, None])
"""


def _search(tmp_path: Path, *extra: str):
    line = [*SEARCH, f"run.out_root={tmp_path / 'runs'}", f"hydra.sweep.dir={tmp_path / 'multirun'}", *extra, "-m"]
    return run_cli(line, cwd=tmp_path, timeout=600)


def _record(tmp_path: Path, launch: int = 1) -> Path:
    """The record of the line's `launch`-th search into its sweep folder (each launch has its own)."""
    folders = sorted((tmp_path / "runs" / ".searches").iterdir(), key=lambda p: len(p.name))
    return folders[launch - 1]


def _trials(tmp_path: Path, launch: int = 1) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(_record(tmp_path, launch).glob("trial_*.json"))]


def _run_json(tmp_path: Path, run: dict) -> dict:
    return json.loads((tmp_path / "runs" / run["run_dir"] / "run.json").read_text())


def test_an_interval_search_runs_its_trials_reports_the_best_and_resumes(tmp_path):
    proc = _search(tmp_path, "hydra.sweeper.n_trials=2", "train.lr=interval(1e-6,1e-4)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = _trials(tmp_path)
    assert [t["status"] for t in trials] == ["ok", "ok"] and [t["number"] for t in trials] == [0, 1]
    lrs = []
    for trial in trials:  # each trial one identity-hashed run, its value read from that run's record
        (run,) = trial["runs"]
        info = _run_json(tmp_path, run)
        assert trial["value"] == run["value"] == info["accuracy"]["trained"]["toy_heldout"]
        assert run["run_hash"] == info["run_hash"] and Path(run["run_dir"]).name.endswith(info["run_hash"])
        config = yaml.safe_load((tmp_path / "runs" / run["run_dir"] / "config.yaml").read_text())
        assert f"train.lr={config['train']['lr']!r}" in trial["overrides"] and 1e-6 <= config["train"]["lr"] <= 1e-4
        lrs.append(config["train"]["lr"])
    assert lrs[0] != lrs[1]
    best = max(trials, key=lambda t: (t["value"], -t["number"]))
    out = proc.stdout.splitlines()
    at = out.index("Search summary: 2 trial(s), 2 done, 0 failed; objective trained.toy_heldout (maximize)")
    assert out[at + 1:at + 4] == [f"  trial {t['number']}: train.lr={lrs[i]!r}: {t['value']:.4f}"
                                  for i, t in enumerate(trials)] + [
        f"best: trial {best['number']}, trained.toy_heldout = {best['value']:.4f} (train.lr={lrs[best['number']]!r})"]
    summary = json.loads((_record(tmp_path) / "summary.json").read_text())
    assert summary["best"]["number"] == best["number"] and summary["failed"] == 0

    # status names the search and its best; analysis gives each setting its own row, labelled by what differs
    status = subprocess.run([sys.executable, "-m", "rlvr_sweep", "status", str(tmp_path / "runs")],
                            capture_output=True, text=True, timeout=300)
    assert status.returncode == 0 and "2 finished" in status.stdout
    said = (f"  {_record(tmp_path).name}: 2 trial(s), 2 done, 0 failed; maximize; best trained.toy_heldout = "
            f"{best['value']:.4f} (train.lr={lrs[best['number']]!r})")
    line = next(x for x in status.stdout.splitlines() if x.startswith(said))  # and whether it is within noise
    assert line in (said, f"{said}, within noise of 1 other trial(s)")
    tables = subprocess.run([sys.executable, "-m", "rlvr_sweep.analysis", "tables", str(tmp_path / "runs"),
                             "--out", str(tmp_path / "tables")], capture_output=True, text=True, timeout=300)
    assert tables.returncode == 0, tables.stderr[-2000:]
    assert "arm '4. ra_flat' is 2 rows" in tables.stdout
    assert all(f"4. ra_flat [train.lr={lr:.3g}] (1 run)" in tables.stdout for lr in lrs)  # the shared steps: a note
    verify = subprocess.run([sys.executable, "-m", "rlvr_sweep.verify", "all", str(tmp_path / "runs")],
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0 and "4/4 passes ok" in verify.stdout, verify.stdout[-2000:]

    # a relaunch (the sampler seeded by the line's seed) proposes the same trials and reads their runs; into the
    # same sweep folder, it is a search launch of its own, with its own record: the first one's is kept as it was
    kept = {p.name: p.read_bytes() for p in _record(tmp_path).iterdir() if p.suffix == ".json"}
    again = _search(tmp_path, "hydra.sweeper.n_trials=2", "train.lr=interval(1e-6,1e-4)")
    assert again.returncode == 0, again.stderr[-3000:]
    assert _record(tmp_path, 2).name == f"{_record(tmp_path).name}-2"
    assert {p.name: p.read_bytes() for p in _record(tmp_path).iterdir() if p.suffix == ".json"} == kept
    assert [[r["skipped"] for r in t["runs"]] for t in _trials(tmp_path, 2)] == [[True], [True]]
    assert [t["value"] for t in _trials(tmp_path, 2)] == [t["value"] for t in trials]
    assert len([p for p in (tmp_path / "runs" / "smoke" / "ra_flat").iterdir() if not p.name.startswith(".")]) == 2


def test_a_failing_trial_is_recorded_as_failed_and_a_trial_averages_over_its_seeds(tmp_path):
    plugin = tmp_path / "t_broken_est.py"
    plugin.write_text(BROKEN)
    proc = _search(tmp_path, "hydra/sweeper/sampler=grid", "estimator.name=choice(grpo,t_broken_leaf)",
                   f"plugins=[{plugin}]", "sweep.objective_seeds=[1,2]", "sweep.objective=totals.gen_tokens",
                   "sweep.direction=minimize")
    assert proc.returncode == 0, proc.stderr[-3000:]
    by_estimator = {next(o for o in t["overrides"] if o.startswith("estimator.name=")): t for t in _trials(tmp_path)}
    good, bad = by_estimator["estimator.name=grpo"], by_estimator["estimator.name=t_broken_leaf"]
    assert good["status"] == "ok" and [r["seed"] for r in good["runs"]] == [1, 2]
    tokens = [_run_json(tmp_path, r)["totals"]["gen_tokens"] for r in good["runs"]]
    assert good["value"] == sum(tokens) / 2 and len({r["run_hash"] for r in good["runs"]}) == 2
    assert bad["status"] == "failed"
    assert bad["error"].startswith("plugin rlvr_sweep_plugin_t_broken_est raised TypeError: ") and f"{plugin}:6" in bad["error"]
    out = proc.stdout.splitlines()
    assert "Search summary: 2 trial(s), 1 done, 1 failed; objective totals.gen_tokens (minimize)" in out
    assert f"best: trial {good['number']}, totals.gen_tokens = {good['value']:.4f} (estimator.name=grpo)" in out
    assert any(line.startswith(f"  trial {bad['number']}: estimator.name=t_broken_leaf: failed: plugin "
                               "rlvr_sweep_plugin_t_broken_est raised TypeError") for line in out)


def test_a_search_whose_every_trial_failed_ends_in_one_line_and_exit_1(tmp_path):
    plugin = tmp_path / "t_broken_est.py"
    plugin.write_text(BROKEN)
    proc = _search(tmp_path, "hydra.sweeper.n_trials=1", "estimator.name=choice(t_broken_leaf)", f"plugins=[{plugin}]")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert any(line.endswith("search ended: no trial completed (each one failed; the summary below says why)")
               for line in proc.stdout.splitlines())
    assert "best: none (no trial completed)" in proc.stdout.splitlines()


def test_a_trial_whose_run_another_process_holds_waits_for_it_instead_of_failing(tmp_path):
    """The trial's run is locked by another process (here: this test, until the trial has located its run and 3 s
    more): the trial waits, then runs it; its settings are not recorded as a failure."""
    import threading
    import time

    from rlvr_sweep.run.plan import locate
    from rlvr_sweep.store import run_lock
    from tests.helpers import compose_cfg

    cfg = compose_cfg([*SEARCH[:2], *SEARCH[3:], "train.lr=1e-05", f"run.out_root={tmp_path / 'runs'}"])
    run_dir = locate(cfg).run_dir
    held, released = threading.Event(), []

    def hold():
        with run_lock(run_dir):
            held.set()
            deadline = time.monotonic() + 300
            while not list((tmp_path / "multirun").rglob("run_dir.txt")) and time.monotonic() < deadline:
                time.sleep(0.1)  # the trial has located its run (and will take its lock next)
            time.sleep(3)
            released.append(time.monotonic())

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    proc = _search(tmp_path, "hydra.sweeper.n_trials=1", "train.lr=choice(1e-5)")
    holder.join()
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trial,) = _trials(tmp_path)
    assert trial["status"] == "ok", trial
    assert Path(trial["runs"][0]["run_dir"]).name == run_dir.name


def test_a_search_into_a_folder_whose_search_runs_is_refused_and_a_killed_search_says_it_was_cut_off(tmp_path):
    """Item 5 of issue 47: a second search into the sweep folder of a running one is refused in one line (exit 3),
    writing nothing; the first, killed (-9) mid-way, reads in `status` as cut off after its trials of 20 asked for,
    its unfinished trial named, never as a finished smaller search."""
    import os
    import signal
    import time

    from tests.conftest import REPO

    line = [*SEARCH, f"run.out_root={tmp_path / 'runs'}", f"hydra.sweep.dir={tmp_path / 'multirun'}",
            "hydra.sweeper.n_trials=20", "train.lr=interval(1e-6,1e-4)", "-m"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    first = subprocess.Popen([sys.executable, "-m", "rlvr_sweep", *line], cwd=tmp_path, env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    record = tmp_path / "runs" / ".searches" / f"{tmp_path.name}_multirun"

    def trials() -> list[dict]:
        out = []
        for path in record.glob("trial_*.json"):
            try:
                out.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                pass  # being replaced: read again at the next look
        return out

    def wait_for(done, what: str) -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and first.poll() is None:
            if done():
                return
            time.sleep(0.05)
        raise AssertionError(f"the first search never {what}")

    try:
        wait_for(lambda: trials(), "started a trial")
        second = _search(tmp_path, "hydra.sweeper.n_trials=2", "train.lr=interval(1e-6,1e-4)")
        assert second.returncode == 3, second.stderr[-2000:]
        assert second.stderr.strip().splitlines()[-1].startswith(
            f"Search not launched: hydra.sweep.dir={tmp_path / 'multirun'}: another search runs into this folder (pid ")
        assert len(list((tmp_path / "runs" / ".searches").iterdir())) == 1
        # killed while a trial after the first one runs (however far the search got meanwhile)
        wait_for(lambda: any(t.get("status") == "started" and t.get("number", 0) >= 1 for t in trials()),
                 "started a second trial")
        os.killpg(first.pid, signal.SIGKILL)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    left = trials()
    done = sum(t["status"] == "ok" for t in left)
    assert sum(t["status"] == "started" for t in left) == 1 and done == len(left) - 1 >= 1
    status = subprocess.run([sys.executable, "-m", "rlvr_sweep", "status", str(tmp_path / "runs")],
                            capture_output=True, text=True, timeout=300, env=env)
    (said,) = [s for s in status.stdout.splitlines() if s.startswith(f"  {tmp_path.name}_multirun: ")]
    assert f"{len(left)} trial(s), {done} done, 0 failed, 1 unfinished; maximize; best trained.toy_heldout = " in said
    assert said.endswith(f"; cut off after {len(left)} of 20 trial(s) asked for (its process ended before the search "
                         "did; relaunch the line to go on: finished runs are read, not rerun)")

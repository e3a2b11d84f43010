"""One search trial (`sweep.trial.run_trial`) in the fast tier, on run folders made to look finished (no training):
it writes to the record its sweep folder names, first as `started`; it reads each seed's finished run, never
trains it again; its value is the mean over `sweep.objective_seeds`; a refused trial is recorded `failed` and
returns the failure marker, never a number; its runs are located to be waited for, not failed, when busy."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest
from hydra import initialize_config_dir

from rlvr_sweep.config import build_config
from rlvr_sweep.run.plan import locate
from rlvr_sweep.store import DONE_MARKER, RUN_JSON
from rlvr_sweep.sweep import trial as trial_module
from rlvr_sweep.sweep.command_line import CONF_DIR, normalize_overrides
from rlvr_sweep.sweep.preflight import job_configs
from rlvr_sweep.sweep.search import FAILED
from rlvr_sweep.sweep.search_record import start_search
from tests.helpers import register_configs, shared_compositions

VALUES = {1: 0.2, 2: 0.4}


def raw_config(overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return next(job_configs([normalize_overrides(overrides)], shared_compositions()))


@pytest.fixture
def search(tmp_path):
    """(the trial's overrides, its job folder, its record folder), each seed's run folder finished with its value."""
    overrides = ["+arm=ra_flat", "profile=smoke", f"run.out_root={tmp_path / 'runs'}", "sweep.objective_seeds=[1,2]",
                 "train.lr=3e-05"]
    cfg = build_config(raw_config(overrides))
    for seed, value in VALUES.items():
        run_dir = locate(dataclasses.replace(cfg, seed=seed)).run_dir
        run_dir.mkdir(parents=True)
        (run_dir / RUN_JSON).write_text(json.dumps({"status": "finished", "run_hash": run_dir.name[-8:],
                                                    "accuracy": {"trained": {"toy_heldout": value}}}))
        (run_dir / DONE_MARKER).write_text("")
    sweep = tmp_path / "multirun" / "d" / "t"
    started = start_search(tmp_path / "runs", sweep, {"objective": "trained.toy_heldout", "direction": "maximize"})
    (sweep / "0").mkdir(parents=True)
    yield overrides, sweep / "0", started.folder
    started.close()


def test_a_trial_reads_its_seeds_finished_runs_and_records_their_mean_where_its_sweep_folder_says(search, monkeypatch):
    overrides, job_dir, record = search
    writes, located = [], []
    real_write = trial_module.write_trial
    monkeypatch.setattr(trial_module, "write_trial", lambda folder, n, rec: (writes.append((folder, rec["status"])),
                                                                           real_write(folder, n, rec)))
    plan_module = sys.modules["rlvr_sweep.run.plan"]  # the module (`rlvr_sweep.run.plan` is also a function's name)
    real = plan_module.locate
    monkeypatch.setattr(plan_module, "locate", lambda c: (located.append(c.run.wait_for_lock), real(c))[1])
    value = trial_module.run_trial(raw_config(overrides), job_dir, 0, overrides)
    assert value == pytest.approx(0.3)  # the mean over objective_seeds [1, 2], not their max or the first
    assert [w[1] for w in writes] == ["started", "ok"] and {w[0] for w in writes} == {record}
    assert located == [True, True]  # each seed's run located to be waited for when another process holds it
    saved = json.loads((record / "trial_0.json").read_text())
    assert saved["status"] == "ok" and [r["seed"] for r in saved["runs"]] == [1, 2]
    assert [r["skipped"] for r in saved["runs"]] == [True, True] and [r["value"] for r in saved["runs"]] == [0.2, 0.4]


def test_a_refused_trial_is_recorded_failed_and_returns_no_number(search):
    overrides, job_dir, record = search
    refused = [*overrides, "sweep.objective=trained.math500", "eval.benchmarks=[toy_heldout,math500]"]
    value = trial_module.run_trial(raw_config(refused), job_dir, 0, refused)
    assert isinstance(value, str) and value.startswith(f"{FAILED}: ConfigError: sweep.objective=trained.math500: ")
    saved = json.loads((record / "trial_0.json").read_text())
    assert saved["status"] == "failed" and "MATH-500 is a benchmark the paper reports on" in saved["error"]

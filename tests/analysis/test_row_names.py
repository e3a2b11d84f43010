"""Row names (`analysis.row_names`): each arm row named by what it changes from its arm's preset, the paper number
kept only where its options are the arm's, shared changes said once, alike rows told apart by input version."""

from __future__ import annotations

import pandas as pd
import pytest

from rlvr_sweep.analysis import row_names
from rlvr_sweep.analysis.row_names import (
    departures, input_versions, keeps_paper_number, name_rows, override_parts, preset_settings, remember_preset, shown,
)
from tests.helpers import compose_cfg


@pytest.fixture(scope="module")
def ra_flat():
    preset = preset_settings("ra_flat", "smoke", 512)
    assert preset is not None
    return preset


def test_the_preset_is_the_arms_own_composition(ra_flat):
    assert ra_flat["optimizer_step.name"] == "zero_grad" and ra_flat["reward.name"] == "gated"
    assert ra_flat["train.loss_recipe"] == "scale_then_sum" and ra_flat["profile.name"] == "smoke"
    assert "paper_arms.512" not in ra_flat and "seed" not in ra_flat  # bookkeeping and the seed tell no row apart
    assert preset_settings("no_such_arm", "smoke", 512) is None
    assert preset_settings("ra_flat", "no_such_profile", 512) is None


@pytest.mark.parametrize("line", [
    ["+arm=baseline", "profile=smoke", "run.out_root=/tmp/x"],  # the smoke run's line
    ["+arm=stopped_tree_h1024", "profile=paper", "seed=7"],  # the arm picks its horizon
    ["+arm=baseline_lora", "profile=smoke", "horizon=1024", "hydra.run.dir=/tmp/h"],
])
def test_a_preset_line_remembers_the_preset_preset_settings_composes(line, monkeypatch):
    monkeypatch.setattr(row_names, "_PRESETS", {})
    cfg = compose_cfg(line)
    remember_preset(cfg, line)
    key = (cfg.arm, cfg.profile.name, cfg.horizon.tokens)
    remembered = row_names._PRESETS.pop(key)
    assert remembered == preset_settings(*key)  # composed now: nothing remembered under the key


@pytest.mark.parametrize("extra", [
    ["train.lr=1e-5"], ["~eval.limit"], ["hydra.searchpath=[file:///tmp]"], ["model=tiny"],
])
def test_a_line_that_sets_more_remembers_nothing(extra, monkeypatch):
    monkeypatch.setattr(row_names, "_PRESETS", {})
    remember_preset(compose_cfg(["+arm=baseline", "profile=smoke"]), ["+arm=baseline", "profile=smoke", *extra])
    assert row_names._PRESETS == {}


def test_departures_count_only_what_the_run_set_otherwise(ra_flat):
    config = {**ra_flat, "train.lr": 3.8079471765888886e-05, "seed": 7, "paper_arms.512": "4"}
    assert departures(config, ra_flat) == {"train.lr": 3.8079471765888886e-05}
    older = {k: v for k, v in ra_flat.items() if not k.startswith("objective.")}  # made before `objective` existed
    assert departures(older, ra_flat) == {}
    assert departures({**ra_flat, "train.steps": float(ra_flat["train.steps"])}, ra_flat) == {}  # 100 == 100.0


@pytest.mark.parametrize("departed, kept", [
    ({}, True),
    ({"train.lr": 1e-5}, True),  # a setting every arm shares: still the arm, at another learning rate
    ({"eval.limit": 50, "train.steps": 16}, True),
    ({"sampler.bifurcate_after_active": 1}, True),  # a setting of one of its options: shown in the name
    ({"reward.name": "len_penalty", "plugins": ["/x"]}, False),  # another option, from a plugin
    ({"estimator.name": "tree_mean"}, False),  # another of the package's options
    ({"plugins": ["/x"]}, False),
])
def test_the_paper_number_stays_only_with_the_arms_options(departed, kept):
    assert keeps_paper_number(departed) is kept


def test_departures_are_shown_as_typed():
    assert shown({"reward.name": "len_penalty", "reward.gate_chars": None, "plugins": ["/tmp/x"],
                  "train.lr": 3.8079471765888886e-05}) == ["reward=len_penalty", "train.lr=3.81e-05"]
    assert shown({"eval.benchmarks": ["math500"], "eval.limit": 5}) == ["eval.benchmarks=[math500]", "eval.limit=5"]
    # a folder of this machine by its name; a hub id as it is
    assert shown({"model.path": "/scratch/me/models/Qwen3-0.6B-Base/"}) == ["model.path=…/Qwen3-0.6B-Base"]
    assert shown({"model.hub_id": "Qwen/Qwen3-0.6B-Base"}) == ["model.hub_id=Qwen/Qwen3-0.6B-Base"]


def test_input_versions_number_the_differing_input_by_first_run():
    inputs = {"a": {"model": "m1", "plugin p.rewards": "r1"}, "b": {"model": "m1", "plugin p.rewards": "r2"},
              "c": {"model": "m1", "plugin p.rewards": "r1"}}
    got = input_versions(["a", "b", "c"], inputs, {"a": 30.0, "b": 10.0, "c": 20.0})
    assert got == {"a": ["plugin p.rewards v2"], "b": ["plugin p.rewards v1"], "c": ["plugin p.rewards v2"]}


def test_launch_line_overrides_name_a_job_not_started():
    line = ["+arm=ra_flat", "profile=smoke", "seed=7", "horizon=512", "train.lr=3.8079471765888886e-05",
            "train.steps=16", "reward=len_penalty", "hydra.sweep.dir=/x", "run.out_root=/x/runs", "data.root=/d"]
    assert override_parts(line) == ["reward=len_penalty", "train.lr=3.81e-05", "train.steps=16"]  # as `shown` orders
    assert override_parts(None) == []


def test_name_rows_on_rows_made_by_hand(ra_flat):
    configs = {"preset": dict(ra_flat), "lr": {**ra_flat, "train.lr": 2e-5},
               "reward": {**ra_flat, "reward.name": "len_penalty", "plugins": ["/p"]}}
    first = pd.DataFrame({"arm": ["ra_flat"] * 3, "profile": ["smoke"] * 3, "horizon": [512] * 3,
                          "paper_arm": ["4"] * 3, "config": list(configs.values()), "run_dir": ["", "", ""]},
                         index=list(configs))
    names, paper, at_preset, notes, said = name_rows(first, {"preset": 3, "lr": 1, "reward": 2}, {},
                                               lambda run, pa: f"{pa}. {run['arm']}" if pa else run["arm"])
    assert names == {"preset": "4. ra_flat", "lr": "4. ra_flat [train.lr=2e-05]", "reward": "ra_flat [reward=len_penalty]"}
    assert paper == {"preset": "4", "lr": "4", "reward": ""} and at_preset == {"preset": True, "lr": False,
                                                                                "reward": False}
    assert notes == [] and said == {"smoke": []}
    # a change all of them share is said once, and the rows that made it are at their preset otherwise
    first["config"] = [{**c, "train.steps": 16} for c in configs.values()]
    names, _, at_preset, notes, said = name_rows(first, {"preset": 3, "lr": 1, "reward": 2}, {},
                                           lambda run, pa: f"{pa}. {run['arm']}" if pa else run["arm"])
    assert names["preset"] == "4. ra_flat" and at_preset["preset"] and names["lr"] == "4. ra_flat [train.lr=2e-05]"
    assert notes == ["every arm row departs from its arm's preset in train.steps=16: said here, not in each row's name"]
    assert said == {"smoke": ["train.steps=16"]}


def test_status_names_a_job_without_a_folder_by_its_launch_line(tmp_path):
    from rlvr_sweep.sweep.status import named

    rows = [{"arm": "ra_flat", "profile": "smoke", "run_dir": str(tmp_path / "none"), "state": "queued",
             "overrides": ["+arm=ra_flat", "profile=smoke", "train.lr=2e-05", "seed=1"]},
            {"arm": "baseline", "profile": "smoke", "run_dir": str(tmp_path / "none2"), "state": "queued"}]
    assert [r["row"] for r in named(rows)] == ["ra_flat [train.lr=2e-05]", "baseline"]


def test_the_presets_composed_beside_collect_are_the_ones_composed_here(tmp_path, ra_flat):
    """`load_sweep(presets_beside=True)` (the command line) composes the presets in a forked child while it
    collects: the child asks for the (arm, profile, horizon) of each finished training run's run.json, and what it
    sends back is what this process composes; a run.json it cannot use asks for nothing."""
    import json

    from rlvr_sweep.analysis import row_names
    from rlvr_sweep.analysis.row_names import composed_beside

    runs = {"a": {"arm": "ra_flat", "profile": "smoke", "horizon": 512},
            "b": {"arm": "ra_flat", "profile": "smoke", "horizon": 512, "task": "train"},
            "c": {"arm": "baseline", "profile": "paper", "horizon": 512},  # another profile
            "d": {"arm": "ra_flat", "profile": "smoke", "horizon": 1024, "task": "evaluate"},  # a read-out
            "e": {"arm": "ra_flat", "profile": "smoke", "horizon": "long"},  # untrusted: asks for nothing
            "f": ["not", "a", "mapping"]}
    for name, info in runs.items():
        (tmp_path / "smoke" / name).mkdir(parents=True)
        (tmp_path / "smoke" / name / "run.json").write_text(json.dumps(info))
        (tmp_path / "smoke" / name / "DONE").write_text("")
    composing = composed_beside(tmp_path, "smoke")
    try:
        found = next(composing.results())
    finally:
        composing.close()
    assert found == {("ra_flat", "smoke", 512): ra_flat}
    kept = row_names._PRESETS[("ra_flat", "smoke", 512)]
    row_names.remember_presets({("ra_flat", "smoke", 512): {"other": 1}})  # one composed here stays
    assert preset_settings("ra_flat", "smoke", 512) is kept

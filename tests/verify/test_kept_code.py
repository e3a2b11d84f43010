"""A run keeps the plugin code it ran (`plugins.kept`), and `verify --plugins-kept-in DIR` re-derives it with that
code after the plugin was edited: checked against run.json's digests before import, never without the folder
named, and in one process with other versions of the same plugin (`plugins.versions`)."""

from __future__ import annotations

import sys
from argparse import Namespace

import pytest

from rlvr_sweep.plugins import ENV, code_record
from rlvr_sweep.plugins.kept import KEPT, keep_code, kept_path
from rlvr_sweep.plugins.versions import module_names, put_aside
from rlvr_sweep.verify.plugin_runs import load, trust

PLUGIN = ("from rlvr_sweep.extend import REWARDS\n\n\n"
          "@REWARDS.register('t_kept_value')\n"
          "def value(texts, gold, *, grade):\n"
          "    import t_kept_helper  # a helper imported lazily, from elsewhere on the path\n"
          "    return [{value} + t_kept_helper.BONUS] * len(texts), [True] * len(texts)\n")
CONFIG = {"reward": {"name": "t_kept_value"}, "profile": {"length_scale": 1.0}}


@pytest.fixture(autouse=True)
def nothing_trusted(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("PYTHONPATH", "")
    trust([])
    yield
    trust([])


@pytest.fixture
def edited_plugin(tmp_path, monkeypatch):
    """(a run folder that ran the plugin at reward 0.5 and kept its code, its run.json, config, the plugin file,
    the run.json of a later run of the plugin edited to 0.25 and its helper's bonus from 0.0 to 0.125)."""
    plugin, lib = tmp_path / "code" / "t_kept_value.py", tmp_path / "lib"
    plugin.parent.mkdir()
    lib.mkdir()
    helper = lib / "t_kept_helper.py"
    monkeypatch.syspath_prepend(str(lib))
    plugin.write_text(PLUGIN.format(value=0.5))
    helper.write_text("BONUS = 0.0\n")
    first = code_record([str(plugin)])
    run_dir = tmp_path / "runs" / "smoke" / "arm" / "h512_s42_abc"
    run_dir.mkdir(parents=True)
    assert keep_code(run_dir, first) == []
    put_aside(module_names(first))  # the next run is another process: the edited code, imported afresh
    plugin.write_text(PLUGIN.format(value=0.25))
    helper.write_text("BONUS = 0.125\n")
    second = code_record([str(plugin)])
    assert second["files"] != first["files"]
    config = {"plugins": [str(plugin)], **CONFIG}
    yield run_dir, {"inputs": {"plugins": {**first, "options": {"reward.name": "t_kept_value"}}}}, config, \
        {"inputs": {"plugins": {**second, "options": {"reward.name": "t_kept_value"}}}}
    put_aside({"t_kept_helper", "rlvr_sweep_plugin_t_kept_value"})  # the next test imports its own versions


def test_a_run_keeps_each_recorded_file_at_its_own_path_as_recorded(tmp_path):
    plugin = tmp_path / "code" / "t_kept_copy.py"
    plugin.parent.mkdir()
    plugin.write_text("VALUE = 1\n")
    record = code_record([str(plugin)])
    run_dir = tmp_path / "run"
    assert keep_code(run_dir, record) == []
    copy = kept_path(run_dir, str(plugin))
    assert copy == run_dir / KEPT / str(plugin.resolve()).lstrip("/") and copy.read_bytes() == plugin.read_bytes()
    before = copy.stat().st_mtime_ns
    plugin.write_text("VALUE = 2\n")  # edited after the run recorded it: the copy is what ran, never the edit
    assert keep_code(run_dir, record) == [] and copy.stat().st_mtime_ns == before and copy.read_text() == "VALUE = 1\n"
    copy.unlink()  # a resumed run whose copy went missing, the file edited since: the bytes compiled are kept
    assert keep_code(run_dir, record) == [] and copy.read_text() == "VALUE = 1\n"
    data = tmp_path / "code" / "t_table.csv"  # a recorded file that was never compiled, edited since: not kept
    data.write_text("a,b\n")
    record = {**record, "files": {**record["files"], "t:t_table.csv": "0" * 64},
              "paths": {**record["paths"], "t:t_table.csv": str(data)}}
    assert keep_code(tmp_path / "other", record) == ["t:t_table.csv"]
    assert not kept_path(tmp_path / "other", str(data)).exists()
    put_aside({"rlvr_sweep_plugin_t_kept_copy"})


def test_an_earlier_run_is_re_derived_with_the_code_it_kept_only_when_its_folder_is_named(tmp_path, edited_plugin):
    run_dir, first, config, second = edited_plugin
    trust([tmp_path / "code", tmp_path / "lib"], results=tmp_path / "runs")
    rules, why = load(first, config, "baseline", run_dir)  # the code at hand moved on: refused, and said so
    assert rules is None and why.startswith("the plugin code at hand is not the code the run recorded: ")
    trust([tmp_path / "code", tmp_path / "lib"], results=tmp_path / "runs", kept_in=[tmp_path / "runs"])
    for _ in range(2):  # both versions, in turn, in one process
        rules, why = load(first, config, "baseline", run_dir)
        assert why is None and rules.reward(["a"], ["1"], None) == ([0.5], [True])  # the helper's kept bonus too
        rules, why = load(second, config, "baseline", None)  # the later run: the code at hand
        assert why is None and rules.reward(["a"], ["1"], None) == ([0.375], [True])


def test_kept_code_that_is_not_what_the_run_recorded_is_refused_before_it_runs(tmp_path, edited_plugin):
    run_dir, first, config, _ = edited_plugin
    copy = kept_path(run_dir, first["inputs"]["plugins"]["paths"]["rlvr_sweep_plugin_t_kept_value"])
    marker = tmp_path / "executed"
    copy.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n")
    trust([], results=tmp_path / "runs", kept_in=[tmp_path / "runs"])
    rules, why = load(first, config, "baseline", run_dir)
    assert rules is None and not marker.exists()
    assert why.startswith("the plugin code at hand is not the code the run recorded: rlvr_sweep_plugin_t_kept_value "
                          "(recorded ") and why.endswith(f"(its kept code, {run_dir.resolve() / KEPT})")
    trust([], results=tmp_path / "runs", kept_in=[tmp_path / "elsewhere"])  # a folder not named: not kept code
    rules, why = load(first, config, "baseline", run_dir)
    assert rules is None and "lies outside the places named for plugins" in why and not marker.exists()


@pytest.mark.parametrize("given, unchecked, said", [
    ({}, ["r1: rollout rewards come from plugin reward 'x'"], "plugin code not imported: --plugins re-derives it"),
    ({"plugins": []}, ["r1: its rewards were not re-derived: the plugin code at hand is not the code the run recorded: m"],
     "the plugin code changed since 1 run(s) ran: --plugins-kept-in ROOT re-derives them with the code each run "
     "kept (it imports that code from the results folder: only for results you trust)"),
    ({"plugins": []}, ["r1: lies outside the places named for plugins"],
     "plugin code not imported for some runs although --plugins was given: the lines above say why"),
    ({"plugins": [], "plugins_kept_in": ["ROOT"]}, ["r1: the plugin code at hand is not the code the run recorded"],
     "plugin code not imported for some runs although --plugins and --plugins-kept-in was given: the lines above "
     "say why"),
])
def test_the_advice_matches_the_situation(given, unchecked, said):
    from rlvr_sweep.verify.cli import _plugin_advice

    args = Namespace(output_dir="ROOT", plugins=given.get("plugins"), plugins_kept_in=given.get("plugins_kept_in"))
    assert _plugin_advice(args, unchecked) == said


PACKAGE = ("import json\nfrom pathlib import Path\n\nfrom rlvr_sweep.extend import REWARDS\n\n"
           "WEIGHT = json.loads((Path(__file__).parent / 'tables' / 'w.json').read_text())['w']\n\n\n"
           "@REWARDS.register('t_kept_pkg')\n"
           "def weighted(texts, gold, *, grade):\n"
           "    return [WEIGHT] * len(texts), [True] * len(texts)\n")


def test_a_package_with_a_data_file_is_re_derived_from_its_kept_copy_data_included(tmp_path):
    pkg = tmp_path / "code" / "t_kept_pkg"
    (pkg / "tables").mkdir(parents=True)
    (pkg / "__init__.py").write_text(PACKAGE)
    (pkg / "tables" / "w.json").write_text('{"w": 0.5}')
    record = code_record([str(pkg)])
    assert "t_kept_pkg:tables/w.json" in record["files"]
    run_dir = tmp_path / "runs" / "r"
    assert keep_code(run_dir, record) == []
    put_aside(module_names(record))
    (pkg / "tables" / "w.json").write_text('{"w": 0.25}')  # the data edited since the run
    info = {"inputs": {"plugins": {**record, "options": {"reward.name": "t_kept_pkg"}}}}
    config = {"plugins": [str(pkg)], "reward": {"name": "t_kept_pkg"}, "profile": {"length_scale": 1.0}}
    trust([], results=tmp_path / "runs", kept_in=[tmp_path / "runs"])
    rules, why = load(info, config, "baseline", run_dir)
    assert why is None and rules.reward(["a"], ["1"], None) == ([0.5], [True])  # the kept table's weight
    put_aside({"t_kept_pkg"})


def test_a_damaged_copy_is_kept_again_from_the_bytes_recorded_and_a_copy_linking_out_is_refused(tmp_path, edited_plugin):
    run_dir, first, config, _ = edited_plugin
    record = first["inputs"]["plugins"]
    key = "rlvr_sweep_plugin_t_kept_value"
    copy = kept_path(run_dir, record["paths"][key])
    kept_bytes = copy.read_bytes()
    copy.write_text("damaged = True\n")  # a resumed run finds its copy damaged, the recorded bytes gone (edited):
    assert keep_code(run_dir, record) == [key]  # said, and never the edited bytes kept in their place
    assert copy.read_text() == "damaged = True\n"
    outside = tmp_path / "outside.py"
    outside.write_bytes(kept_bytes)  # the same bytes, elsewhere: a link out of the run's folder is refused
    copy.unlink()
    copy.symlink_to(outside)
    trust([], results=tmp_path / "runs", kept_in=[tmp_path / "runs"])
    rules, why = load(first, config, "baseline", run_dir)
    assert rules is None and "lies outside the run's plugin_code folder" in why

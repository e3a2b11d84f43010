"""`verify --plugins` imports a run's plugins only when their code is the code the run recorded (CONVENTIONS #20),
and checks that before anything runs: every recorded file must lie in a place the user named (after `--plugins`,
in RLVR_SWEEP_PLUGINS or on PYTHONPATH), be there with its recorded sha256, and a package's folder must hold no
file the record lacks; a crafted record is refused with no code executed and `sys.path` left as it was."""

from __future__ import annotations

import sys

import pytest

from rlvr_sweep.plugins import ENV, code_record
from rlvr_sweep.verify.plugin_runs import load, trust

PLUGIN = ("from rlvr_sweep.reward import REWARDS\n\n\n"
          "@REWARDS.register('t_verify_half')\n"
          "def half(texts, gold, *, grade):\n"
          "    return [0.5] * len(texts), [True] * len(texts)\n")
CONFIG = {"reward": {}, "profile": {"length_scale": 1.0}}


@pytest.fixture(autouse=True)
def nothing_trusted(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("PYTHONPATH", "")
    trust([])
    yield
    trust([])


def test_a_run_s_plugin_is_imported_only_with_the_code_it_recorded(tmp_path):
    plugin = tmp_path / "t_verify_half.py"
    plugin.write_text(PLUGIN)
    record = {**code_record([str(plugin)]), "options": {"reward.name": "t_verify_half"}}
    config = {"plugins": [str(plugin)], **CONFIG}
    trust([tmp_path])
    rules, why = load({"inputs": {"plugins": record}}, config, "baseline")
    assert why is None and rules.reward(["a", "b"], ["1", "2"], None) == ([0.5, 0.5], [True, True])
    module = "rlvr_sweep_plugin_t_verify_half"
    now = record["files"][module]
    edited = {**record, "files": {module: "0" * 64}}  # the file's digest when the run ran: another file's
    rules, why = load({"inputs": {"plugins": edited}}, config, "baseline")
    assert rules is None
    assert why == (f"the plugin code at hand is not the code the run recorded: {module} (recorded 000000000000, "
                   f"now {now[:12]}); nothing imported")


HOSTILE = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"


def hostile_run(tmp_path, name="t_hostile"):
    """A results folder whose run.json names a file of its own, with that file's true digest."""
    evil = tmp_path / "results" / f"{name}.py"
    evil.parent.mkdir(parents=True, exist_ok=True)
    marker = tmp_path / "executed"
    evil.write_text(HOSTILE.format(marker=str(marker)))
    import hashlib

    module = f"rlvr_sweep_plugin_{name}"
    record = {"sha256": "x", "files": {module: hashlib.sha256(evil.read_bytes()).hexdigest()},
              "paths": {module: str(evil)}, "entries": [str(evil)], "modules": [module],
              "options": {"reward.name": name}}
    return {"inputs": {"plugins": record}}, {"plugins": [str(evil)], **CONFIG}, marker


def test_a_crafted_results_folder_runs_no_code_on_the_readers_machine(tmp_path):
    info, config, marker = hostile_run(tmp_path)
    path_before = list(sys.path)
    rules, why = load(info, config, "baseline")
    assert rules is None and not marker.exists() and sys.path == path_before
    assert "lies outside the places named for plugins (after --plugins, in RLVR_SWEEP_PLUGINS or on PYTHONPATH): " \
           "nothing imported" in why


def test_a_file_new_in_a_plugin_folder_is_refused_before_import(tmp_path):
    pkg = tmp_path / "t_folder_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(PLUGIN.replace("t_verify_half", "t_folder_half"))
    record = {**code_record([str(pkg)]), "options": {"reward.name": "t_folder_half"}}
    marker = tmp_path / "executed"
    (pkg / "later.py").write_text(HOSTILE.format(marker=str(marker)))
    trust([tmp_path])
    rules, why = load({"inputs": {"plugins": record}}, {"plugins": [str(pkg)], **CONFIG}, "baseline")
    assert rules is None and not marker.exists()
    assert why == (f"the plugin code at hand is not the code the run recorded: t_folder_plugin.later is new in {pkg}; "
                   "nothing imported")


@pytest.mark.parametrize("plugins, files", [([], None), (None, None), ([3], None), (["x.py"], "bad")])
def test_an_empty_or_malformed_plugin_setting_or_record_is_one_line(tmp_path, plugins, files):
    info, config, marker = hostile_run(tmp_path)
    config = {**config, "plugins": plugins} if plugins != ["x.py"] else config
    if files is not None:
        info["inputs"]["plugins"]["files"] = files
    rules, why = load(info, config, "baseline")
    assert rules is None and not marker.exists()
    assert ("names no plugin to import" in why) if plugins != ["x.py"] else ("record (files and paths) is missing "
                                                                           "or malformed" in why)


def test_a_dotted_module_leaves_sys_path_as_it_was(tmp_path):
    root = tmp_path / "lib"
    (root / "t_dotted_pkg").mkdir(parents=True)
    (root / "t_dotted_pkg" / "__init__.py").write_text("")
    (root / "t_dotted_pkg" / "rewards.py").write_text(PLUGIN.replace("t_verify_half", "t_dotted_half"))
    sys.path.insert(0, str(root))
    try:
        record = {**code_record(["t_dotted_pkg.rewards"]), "options": {"reward.name": "t_dotted_half"}}
    finally:
        sys.path.remove(str(root))
    trust([root])
    before = list(sys.path)
    rules, why = load({"inputs": {"plugins": record}}, {"plugins": ["t_dotted_pkg.rewards"], **CONFIG}, "baseline")
    assert why is None and rules.reward(["a"], ["1"], None) == ([0.5], [True])
    assert sys.path == before


def test_a_plugin_reward_is_re_derived_to_a_millionth():
    """A stored reward 4e-6 away from what the run's own reward gives is a disagreement, one 4e-7 away is float32
    storage (a tolerance loosened a hundredfold would pass the first)."""
    import pandas as pd

    from rlvr_sweep.verify.regrade import plugin_reward_problems

    def reward(texts, gold, tokens):
        return [0.123456 * len(t) for t in texts], [True] * len(texts)

    def rollouts(offset):
        return pd.DataFrame({"step": [0, 0], "index": [0, 1], "text": ["ab", "abc"], "gold": ["1", "1"],
                             "tokens": [[1, 2], [1, 2, 3]], "reward": [0.246912 + offset, 0.370368]})

    assert plugin_reward_problems(rollouts(4e-7), reward) == []
    found = plugin_reward_problems(rollouts(4e-6), reward)
    assert len(found) == 1 and found[0]["diffs"]["reward"]["recomputed"] == pytest.approx(0.246912)


def test_a_crafted_record_cannot_steer_the_import_to_unchecked_code(tmp_path, monkeypatch):
    """No `modules` (or one not among the checked files) would import the entry as config.yaml spells it; a path
    through `..` or a NUL; a results folder inside a trusted PYTHONPATH folder: each refused, nothing run."""
    info, config, marker = hostile_run(tmp_path)
    trust([tmp_path])  # even with the evil file's folder trusted, the record must name checked files
    record = info["inputs"]["plugins"]
    for modules in (None, [], ["os"], [record["modules"][0], "extra"]):
        crafted = {"inputs": {"plugins": {**record, "modules": modules}}}
        rules, why = load(crafted, config, "baseline")
        assert rules is None and "names no checked file for each entry" in why, (modules, why)
    dotted = {**record, "paths": {record["modules"][0]: str(tmp_path / "results" / ".." / "results" / "t_hostile.py")}}
    rules, why = load({"inputs": {"plugins": dotted}}, config, "baseline")
    assert rules is None and "is named through '..'" in why
    nul = {**record, "paths": {record["modules"][0]: "bad\x00path.py"}}
    rules, why = load({"inputs": {"plugins": nul}}, config, "baseline")
    assert rules is None and "cannot be read (ValueError)" in why
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # PYTHONPATH=$PWD, the results beneath it
    trust([], results=tmp_path / "results")
    rules, why = load(info, config, "baseline")
    assert rules is None and "lies outside the places named for plugins" in why
    assert not marker.exists()


# ---------------------------------------------------------------- siblings (issue 47 item 10: a mutation campaign's survivors)
def test_a_file_entry_trusts_that_file_only_never_its_folder(tmp_path, monkeypatch):
    good = tmp_path / "code" / "t_named.py"
    good.parent.mkdir()
    good.write_text(PLUGIN.replace("t_verify_half", "t_named_half"))
    monkeypatch.setenv(ENV, str(good))
    info, config, marker = hostile_run(tmp_path)
    evil = tmp_path / "code" / "t_neighbour.py"  # beside the named file, with its true digest in the record
    evil.write_text((tmp_path / "results" / "t_hostile.py").read_text())
    import hashlib

    module = info["inputs"]["plugins"]["modules"][0]
    info["inputs"]["plugins"].update(files={module: hashlib.sha256(evil.read_bytes()).hexdigest()},
                                     paths={module: str(evil)})
    rules, why = load(info, {**config, "plugins": [str(evil)]}, "baseline")
    assert rules is None and "lies outside the places named for plugins" in why and not marker.exists()


@pytest.mark.parametrize("extra", ["files", "paths"])
def test_a_record_whose_files_and_paths_disagree_runs_nothing(tmp_path, extra):
    info, config, marker = hostile_run(tmp_path)
    trust([tmp_path])
    record = info["inputs"]["plugins"]
    record[extra] = {**record[extra], "t_more": "0" * 64 if extra == "files" else str(tmp_path / "more.py")}
    rules, why = load(info, config, "baseline")
    assert rules is None and not marker.exists() and "record (files and paths) is missing or malformed" in why


def test_a_recorded_file_gone_is_said_so_which_names_the_kept_code_as_the_way_on(tmp_path):
    plugin = tmp_path / "t_gone.py"
    plugin.write_text(PLUGIN.replace("t_verify_half", "t_gone_half"))
    record = {**code_record([str(plugin)]), "options": {"reward.name": "t_gone_half"}}
    plugin.unlink()
    trust([tmp_path])
    rules, why = load({"inputs": {"plugins": record}}, {"plugins": [str(plugin)], **CONFIG}, "baseline")
    assert rules is None and f"its plugin file {plugin} (rlvr_sweep_plugin_t_gone) is not there any more" in why


def test_a_module_the_plugin_imports_that_its_record_lacks_is_refused(tmp_path, monkeypatch):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "t_helper17.py").write_text("BONUS = 0.0\n")
    monkeypatch.syspath_prepend(str(lib))
    plugin = tmp_path / "t_uses17.py"
    plugin.write_text("import t_helper17\n" + PLUGIN.replace("t_verify_half", "t_uses17_half"))
    record = code_record([str(plugin)])
    assert "t_helper17" in record["files"]
    sys.modules.pop("t_helper17", None)
    from rlvr_sweep.plugins.versions import put_aside

    put_aside({"rlvr_sweep_plugin_t_uses17", "t_helper17"})
    lacking = {**record, "files": {k: v for k, v in record["files"].items() if k != "t_helper17"},
               "paths": {k: v for k, v in record["paths"].items() if k != "t_helper17"},
               "options": {"reward.name": "t_uses17_half"}}
    trust([tmp_path])
    rules, why = load({"inputs": {"plugins": lacking}}, {"plugins": [str(plugin)], **CONFIG}, "baseline")
    assert rules is None and why.startswith("the plugin code at hand is not the code the run recorded: t_helper17")


def test_a_dotted_module_without_its_parent_package_in_the_record_is_one_line(tmp_path):
    root = tmp_path / "lib"
    (root / "t_noparent").mkdir(parents=True)
    marker = tmp_path / "executed"
    (root / "t_noparent" / "__init__.py").write_text(HOSTILE.format(marker=str(marker)))
    rewards = root / "t_noparent" / "rewards.py"
    rewards.write_text(PLUGIN.replace("t_verify_half", "t_noparent_half"))
    import hashlib

    record = {"sha256": "x", "files": {"t_noparent.rewards": hashlib.sha256(rewards.read_bytes()).hexdigest()},
              "paths": {"t_noparent.rewards": str(rewards)}, "entries": ["t_noparent.rewards"],
              "modules": ["t_noparent.rewards"], "options": {"reward.name": "t_noparent_half"}}
    trust([root])
    rules, why = load({"inputs": {"plugins": record}}, {"plugins": ["t_noparent.rewards"], **CONFIG}, "baseline")
    assert rules is None and "places a module where its name does not put it" in why and not marker.exists()

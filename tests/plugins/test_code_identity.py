"""What counts as a plugin's code, and that the code that ran is the code hashed (docs/extending.md, "Identity"):
every file under a package plugin's folder (data files and modules imported lazily included), helpers it
imports wherever they live and whatever the import order, an installed distribution's files, and the bytes a
module was compiled from, never a stale bytecode cache. Each case runs in a fresh interpreter, as a launch does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO

RECORD = """
import json, sys
from rlvr_sweep.plugins import code_record, import_plugins
first, _, named = sys.argv[1].rpartition("|")  # "a|b": a imported first, b recorded
import_plugins([e for e in first.split(",") if e])
entries = named.split(",")
record = code_record(entries)
out = {"sha256": record["sha256"], "files": record["files"]}
if len(sys.argv) > 2:
    import importlib
    module, function = sys.argv[2].rsplit(".", 1)
    out["value"] = getattr(importlib.import_module(module), function)()
print(json.dumps(out))
"""


def record(tmp_path: Path, entries: list[str], call: str | None = None, path: list[Path] = ()) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), *map(str, path)])}
    proc = subprocess.run([sys.executable, "-c", RECORD, ",".join(entries), *([call] if call else [])],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_a_data_file_and_a_lazily_imported_module_in_the_folder_are_code(tmp_path):
    pkg = tmp_path / "lenpen"
    write(pkg / "__init__.py", "def value():\n    from lenpen import lazy\n    return lazy.COEF\n")
    write(pkg / "lazy.py", "COEF = 1\n")
    table = write(pkg / "tables" / "weights.json", '{"w": 1}\n')
    write(pkg / "conf" / "arm" / "mine.yaml", "arm: mine\n")  # Hydra's: the run's config records it
    write(pkg / "README.md", "# mine\n")
    before = record(tmp_path, [str(pkg)])
    assert sorted(before["files"]) == ["lenpen", "lenpen.lazy", "lenpen:tables/weights.json"]
    table.write_text('{"w": 2}\n')
    write(pkg / "README.md", "# mine, edited\n")
    after = record(tmp_path, [str(pkg)])
    assert after["sha256"] != before["sha256"] and after["files"]["lenpen"] == before["files"]["lenpen"]
    (pkg / "lazy.py").write_text("COEF = 2\n")
    assert record(tmp_path, [str(pkg)])["files"]["lenpen.lazy"] != after["files"]["lenpen.lazy"]


def test_a_helper_imported_inside_a_function_elsewhere_is_code_in_any_import_order(tmp_path):
    helpers = tmp_path / "shared"
    write(helpers / "penalties.py", "COEF = 0.5\n")
    a = write(tmp_path / "a.py", "from penalties import COEF\n")
    b = write(tmp_path / "b.py", "def reward():\n    from penalties import COEF\n    return COEF\n")
    alone = record(tmp_path, [str(b)], path=[helpers])
    after_a = record(tmp_path, [f"{a}|{b}"], path=[helpers])  # a imported penalties before b was imported
    assert sorted(alone["files"]) == sorted(after_a["files"]) == ["penalties", "rlvr_sweep_plugin_b"]
    assert after_a["sha256"] == alone["sha256"]


def test_the_bytes_that_ran_are_the_bytes_hashed_even_with_a_stale_bytecode_cache(tmp_path):
    """Two versions of a module with the same size and modification time (what `cp -p`, `tar x` and `rsync -t`
    make): Python's cache check passes, yet the new source is what runs and what is recorded."""
    pkg = tmp_path / "sized"
    write(pkg / "__init__.py", "")
    module = write(pkg / "reward.py", "def value():\n    return 'old'\n")
    stamp = module.stat().st_mtime_ns
    writing = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    subprocess.run([sys.executable, "-c", "import sized.reward"], cwd=tmp_path, check=True,
                   env={**writing, "PYTHONPATH": str(tmp_path)})  # writes __pycache__/reward.*.pyc
    assert list((pkg / "__pycache__").glob("reward.*.pyc"))
    module.write_text("def value():\n    return 'new'\n")
    os.utime(module, ns=(stamp, stamp))
    got = record(tmp_path, ["sized"], "sized.reward.value", path=[tmp_path])
    import hashlib

    assert got["value"] == "new" and got["files"]["sized.reward"] == hashlib.sha256(module.read_bytes()).hexdigest()


def test_a_dotted_entry_s_parent_package_runs_the_bytes_hashed_too(tmp_path):
    """Seen (a mutation campaign's find): the entry `sized4.reward` had its folder looked up with
    `importlib.util.find_spec`, which imported `sized4/__init__.py` through its stale bytecode cache before the
    entry was recorded: the old code ran under the new digest. Now the folder is found without importing."""
    pkg = tmp_path / "sized4"
    init = write(pkg / "__init__.py", "def value():\n    return 'old'\n")
    write(pkg / "reward.py", "from sized4 import value\n")
    stamp = init.stat().st_mtime_ns
    writing = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    subprocess.run([sys.executable, "-c", "import sized4"], cwd=tmp_path, check=True,
                   env={**writing, "PYTHONPATH": str(tmp_path)})  # writes __pycache__/__init__.*.pyc
    init.write_text("def value():\n    return 'new'\n")
    os.utime(init, ns=(stamp, stamp))
    got = record(tmp_path, ["sized4.reward"], "sized4.reward.value", path=[tmp_path])
    import hashlib

    assert got["value"] == "new" and got["files"]["sized4"] == hashlib.sha256(init.read_bytes()).hexdigest()


def test_an_installed_distribution_is_its_recorded_files(tmp_path, monkeypatch):
    """A plugin installed (not from a user folder): every file its RECORD lists, so a new build is new code."""
    site = tmp_path / "site"
    write(site / "lenplug" / "__init__.py", "COEF = 1\n")
    info = site / "lenplug-1.0.dist-info"
    write(info / "METADATA", "Metadata-Version: 2.1\nName: lenplug\nVersion: 1.0\n")
    write(info / "top_level.txt", "lenplug\n")
    write(info / "RECORD", "lenplug/__init__.py,,\nlenplug-1.0.dist-info/METADATA,,\nlenplug-1.0.dist-info/RECORD,,\n")
    script = (f"import sys; sys.path.insert(0, {str(site)!r})\n"
              "from rlvr_sweep.plugins import roots\n"
              f"roots._LIBRARY_ROOTS = roots._LIBRARY_ROOTS + ({str(site.resolve()) + os.sep!r},)\n" + RECORD)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}

    def digest():
        proc = subprocess.run([sys.executable, "-c", script, "lenplug"], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    first = digest()
    assert sorted(first["files"]) == ["lenplug==1.0:lenplug/__init__.py"]  # the installer's metadata aside
    (site / "lenplug" / "__init__.py").write_text("COEF = 2\n")
    assert digest()["sha256"] != first["sha256"]


def test_the_shipped_examples_keep_their_digests():
    """The rule covers what the examples always held (their folders hold no data file): the same three modules, each
    the sha256 of its file, and the digest over (module, sha256) pairs the earlier rule made, so their runs keep
    their identities across the change."""
    import hashlib

    folder = REPO / "examples" / "clip_lenpen"
    got = record(REPO, [str(folder)])
    files = {"clip_lenpen": folder / "__init__.py", "clip_lenpen.estimators": folder / "estimators.py",
             "clip_lenpen.rewards": folder / "rewards.py"}
    shas = {m: hashlib.sha256(f.read_bytes()).hexdigest() for m, f in files.items()}
    assert got["files"] == shas
    assert got["sha256"] == hashlib.sha256("".join(f"{m}\0{sha}\n" for m, sha in sorted(shas.items())).encode()).hexdigest()


def test_code_imported_during_the_run_by_a_computed_name_fails_the_run_loudly(tmp_path, monkeypatch):
    """A reward that imports a helper by a name built at run time: no record could follow it, so the run that ran
    it is recorded as failed, naming the file, rather than credited to code that did not produce it."""
    import pytest

    from rlvr_sweep import store
    from rlvr_sweep.plugins import PluginCodeChanged
    from rlvr_sweep.run import run
    from tests.helpers import compose_cfg

    helpers = tmp_path / "elsewhere"
    write(helpers / "hidden_coef.py", "COEF = 0.0\n")
    monkeypatch.syspath_prepend(str(helpers))
    plugin = write(tmp_path / "computed_import.py", '''
        import importlib

        from rlvr_sweep.extend import REWARDS, score_rollouts


        @REWARDS.register("t_computed_import", receives=("extract",))
        def computed(texts, gold, *, grade, extract):
            coef = importlib.import_module("hidden_" + "coef").COEF
            rewards, correct = score_rollouts(texts, gold, None, grade, extract)
            return [r - coef for r in rewards], correct
        ''')
    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "train.steps=1", "eval.limit=2", f"plugins=[{plugin}]",
                       "reward.name=t_computed_import", "reward.gate_chars=null",
                       f"run.out_root={tmp_path / 'runs'}"])
    with pytest.raises(PluginCodeChanged, match=r"hidden_coef.py was imported during the run by a name its plugin's "
                                                r"code does not spell out"):
        run(cfg)
    info = store.read_run_json(next(d for d in (tmp_path / "runs").glob("*/*/h*") if d.is_dir()))
    assert info["status"] == "failed" and "hidden_coef.py" in info["error"]


def test_the_module_a_registered_function_comes_from_is_code_whoever_imported_it_first(tmp_path):
    """A plugin that registers a function it got by a computed import, from a helper another plugin imported
    first: neither a statement nor the plugin's own import shows the helper, the function's home does."""
    helpers = tmp_path / "shared"
    write(helpers / "len_helper.py", "def reward(texts, gold, *, grade):\n    return [0.0] * len(texts), [False] * len(texts)\n")
    a = write(tmp_path / "first.py", "import importlib\nimportlib.import_module('len_' + 'helper')\n")
    b = write(tmp_path / "second.py", """
        import importlib
        from rlvr_sweep.extend import REWARDS

        REWARDS.register("t_from_helper")(importlib.import_module("len_" + "helper").reward)
        """)
    got = record(tmp_path, [f"{a}|{b}"], path=[helpers])
    assert sorted(got["files"]) == ["len_helper", "rlvr_sweep_plugin_second"]


def test_a_plugin_file_whose_module_name_is_taken_by_another_file_is_refused(tmp_path):
    """Two `.py` plugins of one name in two folders: the second is not silently the first one's module."""
    import pytest

    from rlvr_sweep.config import ConfigError
    from rlvr_sweep.plugins import import_plugins

    one = write(tmp_path / "one" / "t_same_name.py", "VALUE = 1\n")
    two = write(tmp_path / "two" / "t_same_name.py", "VALUE = 2\n")
    import_plugins([str(one)])
    with pytest.raises(ConfigError, match=r"cannot import .*t_same_name.py.* a module named "
                                          r"'rlvr_sweep_plugin_t_same_name' is already imported from .*one"):
        import_plugins([str(two)])


def test_every_file_of_a_package_folder_is_code_however_it_is_named_or_reached(tmp_path):
    """A `.py` file whose name starts like documentation (`README_tools.py`) is code; a module shadowed by a
    package of the same name keeps its own key (it was overwritten by the package's); a symlinked folder is walked,
    once, even when it links back up the tree."""
    from rlvr_sweep.plugins.files import folder_files

    pkg = tmp_path / "t_walked"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "README.md").write_text("docs\n")
    (pkg / "README_tools.py").write_text("X = 1\n")
    (pkg / "a.py").write_text("SHADOWED = 1\n")
    (pkg / "a" / "__init__.py").write_text("PACKAGE = 1\n")
    shared = tmp_path / "shared_data"
    shared.mkdir()
    (shared / "table.csv").write_text("1,2\n")
    (pkg / "linked").symlink_to(shared, target_is_directory=True)
    (pkg / "a" / "up").symlink_to(pkg, target_is_directory=True)  # a loop
    files = folder_files(pkg, "t_walked")
    assert sorted(files) == ["t_walked", "t_walked.README_tools", "t_walked.a", "t_walked:a.py",
                             "t_walked:linked/table.csv"]
    assert files["t_walked.a"][0] == str((pkg / "a" / "__init__.py").resolve())
    assert files["t_walked:a.py"][0] == str((pkg / "a.py").resolve())


def test_a_lazy_standard_library_import_is_no_unrecorded_code_and_a_lazy_module_edited_before_its_import_is(tmp_path):
    """The end-of-run check names user code the record does not hold: never a library a plugin imports lazily
    (`colorsys` here), always a recorded module whose bytes changed before its first import."""
    from rlvr_sweep.plugins import code_record, compiled_now, unrecorded_code
    from rlvr_sweep.plugins.versions import put_aside

    pkg = tmp_path / "t_lazy7"
    write(pkg / "__init__.py", "def colour():\n    import colorsys\n    return colorsys.ONE_THIRD\n\n\n"
                               "def later():\n    from t_lazy7 import lazy\n    return lazy.COEF\n")
    lazy = write(pkg / "lazy.py", "COEF = 1\n")
    try:
        rec = code_record([str(pkg)])
        before = compiled_now()
        import t_lazy7

        t_lazy7.colour()
        assert unrecorded_code(rec, before) == []
        lazy.write_text("COEF = 2\n")  # edited after the record, before its first import
        assert t_lazy7.later() == 2
        (said,) = unrecorded_code(rec, before)
        assert said.startswith("t_lazy7.lazy (") and "ran as other bytes than its recorded sha256" in said
    finally:
        put_aside({"t_lazy7", "t_lazy7.lazy"})

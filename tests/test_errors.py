"""A user's mistake is one line naming it, with exit 2, from every command; a bug is a traceback and a
line saying it is one."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from rlvr_sweep.io.entry import run_command
from rlvr_sweep.sweep import preflight
from rlvr_sweep.sweep.cli import normalize_overrides, register_configs
from tests.conftest import CONF_DIR
from tests.helpers import run_cli

MISTAKES = {  # the line -> what the one line must say
    ("+arm=ra_flta",): "Could not find 'arm/ra_flta' (available options in 'arm': ablate_selective,",
    ("+arm=ra_flat", "train.stpes=5"): "Could not override 'train.stpes'.",
    ("+arm=ra_flat", "horizon=777"): "Could not find 'horizon/777' (available options in 'horizon': 1024, 512); "
                                     "a rollout cap of any length: horizon.tokens=N (in paper tokens)",
    ("+arm=ra_flat", "train.lr=abc"): "Error merging override train.lr=abc: Value 'abc' of type 'str' could not be "
                                      "converted to Float",
    ("+sweep=paper_gird",): "Could not find 'sweep/paper_gird' (available options in 'sweep': cf_grid,",
}


@pytest.mark.parametrize("line", list(MISTAKES), ids=" ".join)
def test_a_mistake_on_the_line_is_one_line_for_a_run_and_a_sweep(line):
    register_configs()
    said = preflight.composition_problem(str(CONF_DIR), normalize_overrides(list(line)))
    assert said is not None and MISTAKES[line] in said and "\n" not in said
    with pytest.raises(preflight.PreflightError) as err:
        preflight.located_jobs(str(CONF_DIR), normalize_overrides([*line, "profile=smoke", "seed=1,2"]))
    assert MISTAKES[line] in str(err.value) and "\n" not in str(err.value)


def test_the_any_length_horizon_the_hint_names_composes():
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        assert compose("config", overrides=["+arm=ra_flat", "horizon.tokens=777"]).horizon.tokens == 777
    assert preflight.composition_problem(str(CONF_DIR), ["+arm=ra_flat", "horizon.tokens=777"]) is None


@pytest.mark.parametrize("multirun", [False, True], ids=["single", "sweep"])
def test_the_command_exits_2_with_one_line(tmp_path, multirun):
    args = ["+arm=ra_flat", "horizon=777", "profile=smoke", f"run.out_root={tmp_path / 'runs'}"]
    proc = run_cli([*args, "-m", "seed=1,2"] if multirun else args, cwd=tmp_path, timeout=120)
    err = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(err) == 1, proc.stderr
    assert "Could not find 'horizon/777'" in err[0] and "horizon.tokens=N" in err[0]
    assert not (tmp_path / "runs").exists()  # nothing was written


@pytest.mark.parametrize("stage,argv,said", [
    ("data", ["check", "--data-root", "/nonexistent"], "data root /nonexistent is not a folder"),
    ("data", ["build-splits", "--out", "X", "--seed", "0", "--data-root", "/nonexistent"], "not found in /nonexistent"),
    ("store", ["collect", "/nonexistent", "--out", "X"], "no such folder: /nonexistent"),
    ("analysis", ["tables", "/nonexistent", "--out", "X"], "no such folder: /nonexistent"),
    ("analysis", ["report", "/nonexistent", "--out", "X.html"], "no such folder: /nonexistent"),
    ("analysis", ["diff", "/nonexistent/a", "ra_flat"], "/nonexistent/a"),
    ("verify", ["all", "/nonexistent"], "no such folder: /nonexistent"),
    ("evaluation", ["probe", "/nonexistent/a", "/nonexistent/b", "--out", "X"], "/nonexistent/a"),
])
def test_every_stage_command_says_a_mistake_in_one_line(stage, argv, said, tmp_path, monkeypatch, capsys):
    import importlib

    monkeypatch.chdir(tmp_path)
    main = importlib.import_module({"store": "rlvr_sweep.store.collect_files"}.get(stage, f"rlvr_sweep.{stage}.cli")).main
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and said in err[0], err
    assert not any(tmp_path.iterdir())  # before any work: nothing written


def test_a_bug_is_a_traceback_and_a_line_saying_so(capsys):
    def broken():
        raise KeyError("internal")

    with pytest.raises(SystemExit) as stop:
        run_command("python -m rlvr_sweep.analysis", broken)
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "KeyError: 'internal'" in err
    assert err.strip().splitlines()[-1].startswith("python -m rlvr_sweep.analysis: this is a bug in rlvr_sweep")
    with pytest.raises(SystemExit) as stop:
        run_command("x", lambda: 2)
    assert stop.value.code == 2

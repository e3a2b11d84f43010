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
    ("+arm=ra_flat", "horizon=777"): "Could not find 'horizon/777' (available options in 'horizon': 1024, 512); "
                                     "a rollout cap of any length: horizon.tokens=N (in paper tokens)",
    # a misspelt key, arm or option: the valid names closest to it, not Hydra's `+key` (refused next)
    ("+arm=ra_flat", "train.stpes=5"): "train.stpes: no such setting; did you mean train.steps?",
    ("+arm=ra_flat", "+train.stpes=5"): "train.stpes: no such setting; did you mean train.steps?",
    ("+arm=ra_flat", "trian.steps=5"): "trian.steps: no such setting; did you mean train.steps?",
    ("+arm=ra_flat", "~train.stpes"): "train.stpes: no such setting; did you mean train.steps?",
    ("+arm=ra_flat", "sampelr=flat"): "sampelr: no such setting; did you mean sampler?",
    ("+arm=ra_flat", "estimator.params.clp=0.5"): "estimator.params.clp: estimator 'grpo' declares no parameters",
    ("+arm=ra_flat", "objective=sapo_missing"): "Could not find 'objective/sapo_missing'",
    ("+arm=basline",): ", zero_grad_flat; did you mean baseline?)",
    ("+arm=ra_flat", "sampler=stoped_tree"): "Could not find 'sampler/stoped_tree' (available options in 'sampler': "
                                             "cf_fork, flat, midpoint, root_restart, stopped_tree; did you mean stopped_tree?)",
    ("+arm=ra_flat", "horizon=1025"): "Could not find 'horizon/1025' (available options in 'horizon': 1024, 512; did you "
                                      "mean 1024?); a rollout cap of any length: horizon.tokens=N (in paper tokens)",
    ("+arm=ra_flat", "logger=[csv,tensorbord]"): "Could not load 'logger/tensorbord' (available options in 'logger': csv, "
                                                 "tensorboard, wandb; did you mean tensorboard?)",
    ("+arm=ra_flat", "sweep=paper_gird"): "To append to your default list use +sweep=paper_gird ('paper_gird' is no option of "
                                          "'sweep' either: available options in 'sweep': cf_grid,",
    ("+arm=ra_flat", "hydra/launcher=slurm_debg"): "Could not find 'hydra/launcher/slurm_debg' (available options in "
                                                   "'hydra/launcher': basic, slurm_debug,",
    ("+arm=ra_flat", "hydra/launcher=slurm_debug", "hydra.launcher.partiton=gpu"):
        "hydra.launcher.partiton: no such setting; did you mean hydra.launcher.partition?",
    # a parameter the chosen option does not declare: named with the ones it does (a `+` would be refused next)
    ("+arm=ra_flat", "estimator.params.clip=1"): "estimator.params.clip: estimator 'grpo' declares no parameters",
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


ARMS = ("ablate_selective, ablate_skip, baseline, baseline_lora, cf_grpo, cispo, dapo, dr_grpo, gate_flat, grpo_original, "
        "gspo, midpoint_mst, midpoint_ra_mst, mst_act30, mst_zpd_act35, pb_cf_grpo, pb_cf_grpo_strat, ra_flat, "
        "ra_mst_tail50, rg_cf_grpo, rg_cf_grpo_act18, rg_cf_grpo_strat, root_restart, root_restart_bonus, stopped_tree, "
        "stopped_tree_accum, stopped_tree_bonus, stopped_tree_h1024, stopped_tree_lora, zero_grad_flat")
MISSPELT = {  # the command line (profile=smoke is added) -> its whole stderr
    "+arm=baseline train.stpes=10": "rlvr_sweep: train.stpes: no such setting; did you mean train.steps?",
    # appended: composes, and used to be refused only after Hydra had made its output folder
    "+arm=baseline +train.stpes=10": "rlvr_sweep: train.stpes: no such setting; did you mean train.steps?",
    "+arm=basline": f"rlvr_sweep: In 'config': Could not find 'arm/basline' (available options in 'arm': {ARMS}; "
                    "did you mean baseline?)",
    "+arm=baseline sampler=stoped_tree": "rlvr_sweep: In 'config': Could not find 'sampler/stoped_tree' (available options "
                                         "in 'sampler': cf_fork, flat, midpoint, root_restart, stopped_tree; did you mean "
                                         "stopped_tree?)",
    "+arm=baseline train.stpes=10 -m seed=1,2": "Sweep not launched: the command line (+arm=baseline train.stpes=10 "
                                                "profile=smoke seed=1,2): train.stpes: no such setting; did you mean "
                                                "train.steps?",
    "+arm=baseline horizon=1025 -m seed=1,2": "Sweep not launched: the command line (+arm=baseline horizon='1025' "
                                              "profile=smoke seed=1,2): In 'config': Could not find 'horizon/1025' "
                                              "(available options in 'horizon': 1024, 512; did you mean 1024?); a rollout "
                                              "cap of any length: horizon.tokens=N (in paper tokens)",
}


@pytest.mark.slow
@pytest.mark.parametrize("line", list(MISSPELT))
def test_a_misspelt_name_is_one_line_naming_the_closest_and_writes_nothing(tmp_path, line):
    args = line.split()
    at = args.index("-m") if "-m" in args else len(args)
    proc = run_cli([*args[:at], "profile=smoke", *args[at:]], cwd=tmp_path, timeout=120)
    assert (proc.returncode, proc.stderr) == (2, MISSPELT[line] + "\n"), proc.stderr
    assert not any(tmp_path.iterdir())  # no run folder, no Hydra folder, no launch record


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

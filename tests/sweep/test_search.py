"""A search's objective, its guard against the test benchmarks and its record (`sweep/search.py`), without
running a trial (the trials themselves: tests/sweep/test_search_optuna.py, slow tier)."""

from __future__ import annotations

import json
import re

import pytest

from rlvr_sweep.config import ConfigError
from rlvr_sweep.io import atomic_write_json
from rlvr_sweep.sweep.search import failed_trial, is_search, objective_of, value_of
from rlvr_sweep.sweep.search_record import (best_trial, differing, read_search, summary_lines, swept_keys,
                                            write_trial)
from tests.helpers import compose_cfg


@pytest.mark.parametrize("overrides, objective", [
    (["+arm=ra_flat"], "trained.math_val210"),  # the paper profile: MATH's validation split
    (["+arm=ra_flat", "profile=smoke"], "trained.toy_heldout"),  # the toy task's held-out split
    (["task=evaluate", "profile=smoke"], "eval.toy_heldout"),
    (["+arm=ra_flat", "sweep.objective=base.math_val210"], "base.math_val210"),
    (["+arm=ra_flat", "sweep.objective=totals.seconds", "sweep.direction=minimize"], "totals.seconds"),
])
def test_the_objective_is_the_validation_split_unless_named(overrides, objective):
    assert objective_of(compose_cfg(overrides)) == objective


@pytest.mark.parametrize("objective, name", [("trained.math500", "MATH-500"), ("trained.ext240", "Ext240"),
                                             ("base.math500", "MATH-500")])
def test_a_test_benchmark_objective_is_refused_saying_why_unless_allowed(objective, name):
    cfg = compose_cfg(["+arm=ra_flat", f"sweep.objective={objective}"])
    with pytest.raises(ConfigError) as err:
        objective_of(cfg)
    assert str(err.value) == (f"sweep.objective={objective}: {name} is a benchmark the paper reports on; tuning on "
                              "it selects on the test set. Tune on the validation split (sweep.objective="
                              "trained.math_val210), or say so with sweep.allow_test_objective=true")
    allowed = compose_cfg(["+arm=ra_flat", f"sweep.objective={objective}", "sweep.allow_test_objective=true"])
    assert objective_of(allowed) == objective


@pytest.mark.parametrize("objective, name", [("trained.pool950", "Pool950"), ("eval.amc23", "AMC23-40 (part of Ext240)"),
                                             ("trained.gsm8k200", "GSM8K-200 (part of Ext240)")])
def test_every_benchmark_the_paper_reports_on_is_refused_however_it_is_read(objective, name):
    with pytest.raises(ConfigError, match=rf"^sweep.objective={objective}: {re.escape(name)} is a benchmark the paper"):
        objective_of(compose_cfg(["+arm=ra_flat", f"sweep.objective={objective}"]))


@pytest.mark.parametrize("overrides, said", [
    (["profile=smoke", "sweep.objective=trained.toy_heldout", "eval.after=false"],
     "sweep.objective=trained.toy_heldout: this run reads out no 'trained' accuracy (task=train, eval.before=True, "
     "eval.after=False)"),
    (["profile=smoke", "sweep.objective=trained.toy_heldout.x"],
     "sweep.objective=trained.toy_heldout.x: an accuracy is named <part>.<benchmark>, e.g. trained.math_val210"),
    (["profile=smoke", "sweep.objective=trained.math_val210"],
     "sweep.objective=trained.math_val210: 'math_val210' is not read out (eval.benchmarks=['toy_heldout'])"),
    (["profile=smoke", "sweep.objective=trained"],
     "sweep.objective=trained: an accuracy is named <part>.<benchmark>, e.g. trained.math_val210"),
    (["profile=smoke", "sweep.objective=base.toy_heldout", "eval.before=false"],
     "sweep.objective=base.toy_heldout: this run reads out no 'base' accuracy (task=train, eval.before=False, "
     "eval.after=True)"),
    (["profile=smoke", "sweep.objective_seeds=[1,2,1]"],
     "sweep.objective_seeds=[1, 2, 1]: seed 1 given twice (each seed is one run, counted once in the trial's mean)"),
])
def test_an_objective_the_run_cannot_give_is_refused_by_name(overrides, said):
    with pytest.raises(ConfigError) as err:
        objective_of(compose_cfg(["+arm=ra_flat", *overrides]))
    assert str(err.value) == said


def test_no_validation_split_read_out_asks_for_a_named_objective():
    cfg = compose_cfg(["+arm=ra_flat", "eval.benchmarks=[math500]"])
    with pytest.raises(ConfigError, match=r"sweep.objective: not given, and no validation split \(math_val210, "
                                          r"toy_heldout\) is read out \(eval.benchmarks=\['math500'\]\)"):
        objective_of(cfg)


def test_the_value_is_read_from_the_run_record_and_must_be_a_number():
    info = {"run_dir": "r/1", "accuracy": {"trained": {"toy_heldout": 0.25}}, "totals": {"seconds": 12}}
    assert value_of(info, "trained.toy_heldout") == 0.25
    assert value_of(info, "totals.seconds") == 12.0
    with pytest.raises(ValueError, match=r"the run's record has no base.toy_heldout \(r/1\)"):
        value_of(info, "base.toy_heldout")
    for bad in (None, True, "0.5", float("nan")):
        with pytest.raises(ValueError, match="not a number"):
            value_of({"accuracy": {"trained": {"toy_heldout": bad}}}, "trained.toy_heldout")


def test_a_failed_trial_returns_text_no_sweeper_reads_as_a_number():
    marker = failed_trial("ValueError: boom")
    assert marker == "trial failed: ValueError: boom"
    with pytest.raises(ValueError):
        float(marker)


def test_only_the_grid_sweepers_are_not_searches():
    assert not is_search("hydra_plugins.rlvr_sweep_launchers.sweeper.CheckedSweeper")
    assert not is_search("hydra._internal.core_plugins.basic_sweeper.BasicSweeper")
    assert not is_search(None)
    assert is_search("hydra_plugins.rlvr_sweep_launchers.search.CheckedOptunaSweeper")
    assert is_search("hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper")


def _search(folder, direction="maximize", ended=True):
    """A search record as a search launch leaves it (`search_record.start_search`, trials, summary)."""
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(folder / "search.json", {
        "line": ["+arm=ra_flat", "profile=smoke", "train.lr=interval(1e-6,1e-4)", "train.steps=3"],
        "objective": "trained.toy_heldout", "direction": direction, "sweeper": "optuna", "swept": ["train.lr"],
        "asked": 5, "sweep_dir": str(folder / "sweep"), "started": 0.0})
    if ended:
        atomic_write_json(folder / "summary.json", {})
    write_trial(folder, 0, {"overrides": ["+arm=ra_flat", "train.lr=2e-05", "train.steps=3"], "status": "ok",
                            "value": 0.4, "runs": [{"run_dir": "a", "seed": 42, "value": 0.4}]})
    write_trial(folder, 1, {"overrides": ["+arm=ra_flat", "train.lr=7e-05", "train.steps=3"], "status": "failed",
                            "error": "RuntimeError: out of memory"})
    write_trial(folder, 2, {"overrides": ["+arm=ra_flat", "train.lr=9e-06", "train.steps=3"], "status": "ok",
                            "value": 0.6, "runs": []})


def test_the_search_record_reads_back_and_names_the_best(tmp_path):
    _search(tmp_path)
    meta, trials, problems = read_search(tmp_path)
    assert problems.lines == [] and meta["objective"] == "trained.toy_heldout"
    assert [(t["number"], t["status"], t["value"]) for t in trials] == [(0, "ok", 0.4), (1, "failed", None),
                                                                         (2, "ok", 0.6)]
    assert swept_keys(meta) == {"train.lr"}
    assert summary_lines(meta, trials) == [
        "Search summary: 3 trial(s), 2 done, 1 failed; objective trained.toy_heldout (maximize)",
        "  trial 0: train.lr=2e-05: 0.4000",
        "  trial 1: train.lr=7e-05: failed: RuntimeError: out of memory",
        "  trial 2: train.lr=9e-06: 0.6000",
        "best: trial 2, trained.toy_heldout = 0.6000 (train.lr=9e-06)"]
    assert best_trial(trials, "minimize")["number"] == 0


def test_ties_go_to_the_first_trial_and_no_completed_trial_has_no_best():
    trials = [{"number": n, "status": "ok", "value": 0.5, "overrides": []} for n in (0, 1)]
    assert best_trial(trials, "maximize")["number"] == 0 and best_trial(trials, "minimize")["number"] == 0
    failed = [{"number": 0, "status": "failed", "value": None, "overrides": ["x=1"], "error": "E"}]
    assert best_trial(failed, "maximize") is None
    assert summary_lines({"objective": "o"}, failed)[-1] == "best: none (no trial completed)"


@pytest.mark.parametrize("name, text, problem", [
    ("trial_3.json", "{not json", "trial_3.json: not read: JSONDecodeError"),
    ("trial_3.json", "[1, 2]", "trial_3.json: not read: not a JSON object"),
    ("trial_3.json", '{"number": true, "status": "ok", "value": 1}', "trial_3.json: number: True is not a trial"),
    ("trial_3.json", '{"number": 3, "status": "done", "value": 1}', "trial_3.json: status: 'done' is none of"),
    ("trial_3.json", '{"number": 3, "status": "ok", "value": NaN}', "trial_3.json: value: nan is not a number"),
    ("trial_3.json", '{"number": 3, "status": "ok", "value": "0.9"}', "trial_3.json: value: '0.9' is not a number"),
    ("trial_3.json", b'\xff\xfe', "trial_3.json: not read: UnicodeDecodeError"),
    ("trial_3.json", "[" * 100_000 + "]" * 100_000, "trial_3.json: not read: nested too deep to read"),
])
def test_a_crafted_trial_file_is_one_problem_line_and_the_others_still_read(tmp_path, name, text, problem):
    _search(tmp_path)
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    meta, trials, problems = read_search(tmp_path)
    assert [t["number"] for t in trials] == [0, 1, 2]
    assert len(problems.lines) == 1 and problem in problems.lines[0] and str(tmp_path) in problems.lines[0]


def test_crafted_fields_of_a_kept_trial_are_made_harmless(tmp_path):
    (tmp_path / "trial_0.json").write_text(json.dumps({"number": 0, "status": "failed", "value": 5,
                                                       "overrides": "x=1", "error": {"a": 1}, "runs": "r"}))
    (tmp_path / "search.json").write_text("[]")
    meta, trials, problems = read_search(tmp_path)
    assert meta == {} and problems.lines == [f"{tmp_path / 'search.json'}: not read: not a JSON object"]
    assert trials == [{"number": 0, "status": "failed", "value": None, "overrides": [], "error": "{'a': 1}",
                       "runs": []}]
    assert summary_lines(meta, trials)[0] == "Search summary: 1 trial(s), 0 done, 1 failed; objective ? (maximize)"


def test_a_moved_search_folder_reads_the_same(tmp_path):
    _search(tmp_path / "here")
    before = read_search(tmp_path / "here")[:2]
    (tmp_path / "here").rename(tmp_path / "there")
    assert read_search(tmp_path / "there")[:2] == before


def test_status_lists_each_search_with_its_best_and_names_a_crafted_file(tmp_path, capsys):
    from rlvr_sweep.sweep.status_cli import main

    _search(tmp_path / ".searches" / "2026-12-03_10-00-00")
    _search(tmp_path / ".searches" / "2026-12-03_11-00-00", direction="minimize")
    (tmp_path / ".searches" / "2026-12-03_11-00-00" / "trial_1.json").write_text('{"number": 1, "status": 3}')
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("2 searches (.searches):")
    assert out[at + 1:at + 3] == [
        "  2026-12-03_10-00-00: 3 trial(s), 2 done, 1 failed; maximize; best trained.toy_heldout = 0.6000 "
        "(train.lr=9e-06)",
        "  2026-12-03_11-00-00: 2 trial(s), 2 done, 0 failed; minimize; best trained.toy_heldout = 0.4000 "
        "(train.lr=2e-05)"]
    assert out[0].split() == ["arm", "paper", "horizon", "seed", "state", "detail"] and out[2] == "0 runs: "
    problem = f"  {tmp_path / '.searches' / '2026-12-03_11-00-00' / 'trial_1.json'}: status: 3 is none of 'ok', 'failed', 'started'"
    assert out[-1] == problem and "read in part: 1 file" in out[-2]


SEARCH = ["+arm=ra_flat", "profile=smoke", "hydra/sweeper=optuna"]


def test_a_search_space_of_any_kind_is_checked_at_its_corners():
    from rlvr_sweep.sweep.cli import CONF_DIR, register_configs
    from rlvr_sweep.sweep.preflight import search_jobs
    from hydra import initialize_config_dir

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        jobs = search_jobs(str(CONF_DIR), [*SEARCH, "train.lr=interval(1e-6,1e-4)", "train.steps=range(2,9)",
                                           "estimator.name=choice(grpo,treerl)"])
    fixed = ["+arm=ra_flat", "profile=smoke", "hydra/sweeper=optuna"]
    assert jobs == [[*fixed, "train.lr=1e-06", "train.steps=2", "estimator.name=grpo"],
                    [*fixed, "train.lr=0.0001", "train.steps=2", "estimator.name=grpo"],
                    [*fixed, "train.lr=1e-06", "train.steps=8", "estimator.name=grpo"],
                    [*fixed, "train.lr=1e-06", "train.steps=2", "estimator.name=treerl"]]


def test_the_search_preflight_settles_direction_sampler_seed_and_failure_rate():
    from rlvr_sweep.sweep.cli import CONF_DIR, register_configs
    from rlvr_sweep.sweep.preflight import check_search, search_sweeper

    register_configs()
    line = [*SEARCH, "train.lr=interval(1e-6,1e-4)", "sweep.direction=minimize", "seed=7",
            "sweep.objective=totals.seconds"]
    assert search_sweeper(str(CONF_DIR), line) == "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    assert check_search(str(CONF_DIR), line) == (2, [
        "hydra.sweeper.direction=minimize", "hydra.sweeper.sampler.seed=7",
        "hydra.sweeper._target_=hydra_plugins.rlvr_sweep_launchers.search.CheckedOptunaSweeper",
        "hydra.sweeper.max_failure_rate=1.0"])
    given = [*line, "hydra.sweeper.sampler.seed=null", "hydra.sweeper.max_failure_rate=0.5"]
    assert check_search(str(CONF_DIR), given)[1] == [
        "hydra.sweeper.direction=minimize",
        "hydra.sweeper._target_=hydra_plugins.rlvr_sweep_launchers.search.CheckedOptunaSweeper"]
    assert search_sweeper(str(CONF_DIR), ["+arm=ra_flat", "profile=smoke", "seed=1,2"]) is None  # the grid's


def test_a_search_that_varies_what_its_objective_is_read_on_is_refused_before_any_trial():
    from rlvr_sweep.sweep.cli import CONF_DIR, register_configs
    from rlvr_sweep.sweep.preflight import PreflightError, check_search

    register_configs()
    for swept in ("eval.limit=choice(2,8)", "data.toy_heldout_size=range(50,200,step=50)", "++eval.limit=choice(2,8)",
                  "data.root=choice(data,data2)"):
        with pytest.raises(PreflightError, match=r"the search varies \['(eval.limit|data.toy_heldout_size|data.root)'\], which "
                                                 r"change the items its objective is read on"):
            check_search(str(CONF_DIR), [*SEARCH, "train.lr=interval(1e-6,1e-4)", swept])


@pytest.mark.parametrize("extra, said", [
    (["sweep.objective=trained.math500", "eval.benchmarks=[toy_heldout,math500]"],
     "Sweep not launched: corner 1 of 2 (+arm=ra_flat profile=smoke sweep.objective=trained.math500 "
     "eval.benchmarks=[toy_heldout,math500] train.lr=1e-06): sweep.objective=trained.math500: "
     "MATH-500 is a benchmark the paper reports on; tuning on it selects on the test set. Tune on the validation "
     "split (sweep.objective=trained.math_val210), or say so with sweep.allow_test_objective=true"),
    (["hydra.sweeper.direction=minimize"],
     "Sweep not launched: hydra.sweeper.direction=minimize but sweep.direction=maximize: the search would "
     "optimise its objective the wrong way; set sweep.direction alone (the sweeper follows it)"),
])
def test_a_refused_search_is_one_line_and_exit_2_with_nothing_written(tmp_path, extra, said):
    from tests.helpers import run_cli

    proc = run_cli([*SEARCH, "train.lr=interval(1e-6,1e-4)", *extra, "-m"],
                   cwd=tmp_path, timeout=300)
    assert proc.returncode == 2 and proc.stderr.strip() == said, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no run, record or Hydra folder


def test_the_summary_docs_search_md_shows_is_laid_out_as_a_search_prints_it():
    import re

    from tests.conftest import REPO
    from rlvr_sweep.sweep.search_noise import noise_line
    from tests.test_docs import shown_output

    shown = shown_output("Search summary:", REPO / "docs" / "search.md")
    rows = [re.fullmatch(r"  trial (\d+): train\.lr=(\S+): ([\d.]+)", line) for line in shown[1:-3]]
    trials = [{"number": int(m[1]), "status": "ok", "value": float(m[3]), "overrides": [f"train.lr={m[2]}", "x=1"]}
              for m in rows]
    meta = {"objective": "trained.toy_heldout", "direction": "maximize", "swept": ["train.lr"]}
    assert len(trials) == 3 and summary_lines(meta, trials) == shown[:-2]  # without the runs: no noise line
    noise = {"tied": ["trial 1: +1 of 200 items, p = 1.00", "trial 2: +3 of 200 items, p = 0.61"], "apart": [],
             "seeds": 1}  # what the runs of the shown search gave (tests/sweep/test_many_variants_named.py runs one)
    assert noise_line(noise) == shown[-2]
    assert shown[-1].startswith("search record: outputs/runs/.searches/")


def test_a_crafted_swept_field_shows_a_trial_s_whole_overrides():
    trial = {"number": 0, "status": "ok", "value": 1.0, "overrides": ["train.lr=1e-05", "seed=3"]}
    for swept in ("train.lr", 7, None, {"train.lr": 1}):
        assert differing({"swept": swept})(trial) == "train.lr=1e-05 seed=3"
    assert differing({"swept": ["train.lr", 5]})(trial) == "train.lr=1e-05"


# ---------------------------------------------------------------- one record per search launch (issue 47 item 5)
START = {"line": ["train.lr=interval(1e-6,1e-4)"], "objective": "trained.toy_heldout", "direction": "maximize",
         "sweeper": "optuna", "swept": ["train.lr"], "asked": 3}


def test_a_second_search_into_a_used_sweep_folder_gets_its_own_record_and_the_first_is_kept(tmp_path):
    from rlvr_sweep.sweep.search_record import record_of, start_search

    sweep = tmp_path / "multirun" / "2026-12-05" / "10-00-00"
    first = start_search(tmp_path / "runs", sweep, START)
    write_trial(first.folder, 0, {"overrides": ["train.lr=1e-05"], "status": "ok", "value": 0.5, "runs": []})
    first.close()
    kept = {p.name: p.read_bytes() for p in first.folder.iterdir() if p.suffix == ".json"}
    other = {**START, "objective": "totals.seconds", "direction": "minimize", "asked": 2}
    second = start_search(tmp_path / "runs", sweep, other)
    write_trial(second.folder, 0, {"overrides": ["train.lr=3e-05"], "status": "ok", "value": 41.0, "runs": []})
    second.close()
    assert first.folder.name == "2026-12-05_10-00-00" and second.folder.name == "2026-12-05_10-00-00-2"
    assert record_of(sweep) == second.folder.resolve()  # the trials of the later launch write to its record
    assert {p.name: p.read_bytes() for p in first.folder.iterdir() if p.suffix == ".json"} == kept
    meta, trials, _ = read_search(second.folder)
    assert summary_lines(meta, trials)[0] == "Search summary: 1 trial(s), 1 done, 0 failed; objective totals.seconds (minimize)"
    # a sweep folder elsewhere whose last two parts are the same names: a record of its own too
    third = start_search(tmp_path / "runs", tmp_path / "b" / "2026-12-05" / "10-00-00", START)
    third.close()
    assert third.folder.name == "2026-12-05_10-00-00-3"


def test_a_second_search_into_a_sweep_folder_whose_search_runs_is_refused_naming_it(tmp_path):
    import os

    from rlvr_sweep.sweep.search_record import SearchBusyError, start_search

    sweep = tmp_path / "multirun" / "d" / "t"
    running = start_search(tmp_path / "runs", sweep, START)
    with pytest.raises(SearchBusyError, match=f"hydra.sweep.dir={sweep}: another search runs into this folder "
                                              rf"\(pid {os.getpid()} on host "):
        start_search(tmp_path / "runs", sweep, START)
    assert [p.name for p in (tmp_path / "runs" / ".searches").iterdir()] == ["d_t"]  # nothing made for it
    running.close()
    start_search(tmp_path / "runs", sweep, START).close()  # once the first ended, the folder is free


def test_status_tells_a_running_search_from_one_cut_off_and_one_ended(tmp_path, capsys):
    from rlvr_sweep.sweep.search_record import search_state, start_search
    from rlvr_sweep.sweep.status_cli import main

    started = start_search(tmp_path, tmp_path / "multirun" / "d" / "t", START)
    write_trial(started.folder, 0, {"overrides": ["train.lr=1e-05"], "status": "ok", "value": 0.5, "runs": []})
    write_trial(started.folder, 1, {"overrides": ["train.lr=2e-05"], "status": "started"})
    assert search_state(started.folder) == "running"
    main([str(tmp_path)])
    line = "  d_t: 2 trial(s), 1 done, 0 failed, 1 unfinished; maximize; best trained.toy_heldout = 0.5000 (train.lr=1e-05)"
    assert f"{line}; running (2 of 3 trial(s) so far)" in capsys.readouterr().out.splitlines()
    started.close()  # the process ends without its summary: what `kill -9` of a search leaves
    assert search_state(started.folder) == "cut off"
    main([str(tmp_path)])
    assert (f"{line}; cut off after 2 of 3 trial(s) asked for (its process ended before the search did; relaunch "
            "the line to go on: finished runs are read, not rerun)") in capsys.readouterr().out.splitlines()
    meta, trials, _ = read_search(started.folder)
    assert summary_lines(meta, trials)[2] == "  trial 1: train.lr=2e-05: did not finish"
    atomic_write_json(started.folder / "summary.json", {})
    assert search_state(started.folder) == "ended"


@pytest.mark.parametrize("pointer, said", [
    (None, "the search's record pointer cannot be read"),
    ('{"record": "/etc"}', "'/etc' is not a search record folder"),
    ("[1]", "the search's record pointer cannot be read"),
    ("other", "is not a search record folder"),  # a folder with a search.json, but not under .searches
    ("empty", "is not a search record folder"),  # under .searches, without a search.json
    ('{"record": "relative/.searches/x"}', "is not a search record folder"),
])
def test_a_trial_writes_only_to_the_record_its_sweep_folder_names(tmp_path, pointer, said):
    from rlvr_sweep.sweep.search_record import RECORD_POINTER, record_of

    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "search.json").write_text("{}")
    (tmp_path / ".searches" / "empty").mkdir(parents=True)
    where = {"other": tmp_path / "other", "empty": tmp_path / ".searches" / "empty"}
    if pointer in where:
        pointer = json.dumps({"record": str(where[pointer])})
    if pointer is not None:
        (tmp_path / RECORD_POINTER).write_text(pointer)
    with pytest.raises(ValueError, match=said):
        record_of(tmp_path)

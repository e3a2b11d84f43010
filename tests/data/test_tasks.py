"""Tasks of one's own: registered once, their rows checked, their prompt, answers and benchmarks used by the
run; MATH's prompt and rules unchanged."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlvr_sweep import data
from rlvr_sweep.config import ConfigError, DataConfig
from rlvr_sweep.config.options import param
from rlvr_sweep.config.rules import at_least
from rlvr_sweep.data import MATH, TASKS, DataError, benchmark_task, render_prompt, task_of
from rlvr_sweep.data.tasks import checked_rows, task_checksums
from rlvr_sweep.io import rows_digest
from rlvr_sweep.reward import answering, grading
from tests.conftest import REPO
from tests.helpers import compose_cfg

PROMPT = "Echo the word.\nWord: {problem}\nAnswer:"


def _echo_rows(prefix: str, size: int) -> list[dict]:
    return [{"id": f"{prefix}-{i}", "problem": f"w{i}", "answer": f"w{i}"} for i in range(size)]


@TASKS.register("t_echo", prompt=PROMPT, extract=lambda text: text.strip().split("\n")[-1].strip(),
                grade=lambda pred, gold: pred == gold, gold=("a word starting with w", lambda a: a.startswith("w")),
                benchmarks={"t_echo_heldout": lambda *, size: _echo_rows("held", 3)},
                params={"size": param(5, at_least(1))})
def t_echo(*, size, root):
    """Echo tasks."""
    assert root is not None  # a rows function may take the data folder
    return _echo_rows("train", size)


def test_the_baseline_prompt_is_unchanged():
    assert render_prompt("What is {x}?") == (
        "You are a helpful math assistant.\nAnswer the question and write the final result on a new line as:\n"
        "\\boxed{ANSWER}\n\nQuestion:\nWhat is {x}?\n\nAnswer:")
    assert MATH.render("2+2") == render_prompt("2+2")


def test_a_task_is_a_data_option_with_its_rows_benchmarks_prompt_and_answer_rules():
    assert task_of("t_echo").prompt == PROMPT and task_of("math_train") is MATH and task_of("toy_arith") is MATH
    assert benchmark_task("t_echo_heldout").name == "t_echo" and benchmark_task("math500") is MATH
    assert "t_echo_heldout" in data.benchmark_names()
    cfg = DataConfig(name="t_echo", params={"size": 3})
    assert [r["id"] for r in data.training_rows(cfg)] == ["train-0", "train-1", "train-2"]
    assert data.training_file(cfg) is None and data.benchmark_files("t_echo_heldout", cfg) == []
    held = data.benchmark_rows("t_echo_heldout", cfg, limit=2)
    assert held == [{"id": "held-0", "problem": "w0", "answer": "w0", "source": "t_echo_heldout"},
                    {"id": "held-1", "problem": "w1", "answer": "w1", "source": "t_echo_heldout"}]
    assert task_of("t_echo").render("w7") == "Echo the word.\nWord: w7\nAnswer:"
    rules = answering(task_of("t_echo"), "baseline")
    assert rules.extract(" junk\n w7 ") == "w7" and rules.extract_reward is rules.extract
    assert rules.grade("w7", "w7") and not rules.grade("w7", "w8")
    math = answering(MATH, "baseline")  # MATH: the box (read-outs fall back to the last number; rewards do not)
    assert math.extract("so 12") == "12" and math.extract_reward("so 12") == "" and math.grade is grading.grade


def test_a_task_run_is_configured_checked_and_its_parameters_ranged():
    task = ["data=t_echo", "data.name=t_echo", "eval.benchmarks=[t_echo_heldout]"]  # smoke sets data.name after data=
    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", *task])
    assert cfg.data.name == "t_echo" and cfg.data.params == {"size": 5} and cfg.data.train_file is None

    def refused(extra):
        with pytest.raises(ConfigError) as err:
            compose_cfg(["+arm=ra_flat", "profile=smoke", *task, *extra])
        return str(err.value)

    assert "data.params.size=0: must be >= 1 (parameter 'size' of task 't_echo'" in refused(["data.params.size=0"])
    assert "data.params has ['sise']: not parameters of task 't_echo'" in refused(["+data.params.sise=3"])
    assert "grader.name='math_verify': task 't_echo' grades with its own rule" in refused(["grader=math_verify"])
    with pytest.raises(ConfigError, match=r"data.params=\{'size': 5\}: data.name='toy_arith' is not a task of one's own "
                                          r".*profile=smoke sets data.name=toy_arith after the data option"):
        compose_cfg(["+arm=ra_flat", "profile=smoke", "data=t_echo"])


@pytest.mark.parametrize("rows, message", [
    (None, "returned None, not a non-empty list of rows"),
    ([], "returned list, not a non-empty list of rows"),
    (["w0"], "row 0 is a str, not a dict"),
    ([{"id": "a", "problem": "w0"}], "row 0: field 'answer' missing or not a non-empty string"),
    ([{"id": "a", "problem": "w0", "answer": "x0"}], "row 0 ('a'): answer 'x0' is not a word starting with w"),
    ([{"id": "a", "problem": "w0", "answer": "w0"}, {"id": "a", "problem": "w1", "answer": "w1"}],
     "rows 0 and 1 share the id 'a'"),
])
def test_malformed_rows_of_a_task_are_named_before_any_run_uses_them(rows, message):
    with pytest.raises(DataError, match=r"task 't_echo' training rows \(tests\.data\.test_tasks\.t_echo\): "
                       + message.replace("(", r"\(").replace(")", r"\)")):
        checked_rows(rows, task_of("t_echo"), "training rows", t_echo)


def test_a_task_prompt_needs_a_place_for_the_problem_and_benchmark_names_are_one_task_s():
    with pytest.raises(ValueError, match="its prompt has no '\\{problem\\}'"):
        TASKS.register("t_bad", prompt="no placeholder")
    with pytest.raises(ValueError, match=r"benchmark name\(s\) \['t_echo_heldout'\] are taken by another task"):
        TASKS.register("t_other", benchmarks={"t_echo_heldout": lambda: []})(lambda: [])


def test_the_checksums_of_a_task_are_the_digests_its_runs_record():
    sets = task_checksums("t_echo", "data")
    train = _echo_rows("train", 5)
    held = [{**row, "source": "t_echo_heldout"} for row in _echo_rows("held", 3)]
    assert sets == [("train", 5, rows_digest(train), None), ("t_echo_heldout", 3, rows_digest(held), None)]


def test_data_check_task_compares_the_example_task_with_its_declared_checksums(tmp_path):
    env = {"RLVR_SWEEP_PLUGINS": str(REPO / "examples" / "countdown"), "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "rlvr_sweep.data", "check", "--task", "countdown"], env=env,
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "task countdown: 2/2 sets as declared or undeclared"
    assert "countdown train: 1000 rows, sha256 518c7a7c" in proc.stdout
    missing = subprocess.run([sys.executable, "-m", "rlvr_sweep.data", "check", "--task", "nope"], env=env,
                             capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert missing.returncode == 2 and missing.stderr.strip() == (
        "check: error: no task 'nope' (tasks: ['countdown']; name its plugin in RLVR_SWEEP_PLUGINS)")


def test_a_task_whose_rows_change_between_calls_is_refused_before_any_run(tmp_path):
    """An unseeded generator: two calls with the same parameters give other rows, so the run would train in a
    folder its preflight never planned; refused in one line naming the task, before any folder exists."""
    import random

    @TASKS.register("t_unseeded", prompt=PROMPT)
    def unseeded():
        rng = random.Random()
        return [{"id": f"u{i}", "problem": f"w{rng.randint(0, 10**9)}", "answer": "w"} for i in range(3)]

    with pytest.raises(DataError, match=r"task 't_unseeded': its training rows differ between two calls with the same "
                                        r"parameters \(an unseeded random generator\?\)"):
        data.training_rows(DataConfig(name="t_unseeded"))
    from rlvr_sweep.run import plan

    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "data.name=t_unseeded", "data.train_file=null",
                       f"run.out_root={tmp_path}"])
    with pytest.raises(DataError, match="t_unseeded"):
        plan(cfg)
    assert not any(tmp_path.iterdir())  # nothing started


def test_a_row_whose_text_is_not_valid_unicode_is_one_line_naming_task_set_and_row():
    with pytest.raises(DataError, match=r"task 't_echo' training rows \(.*\): row 1: field 'problem' is not valid text "
                                        r"\(surrogates not allowed at character 3"):
        checked_rows([{"id": "a", "problem": "w0", "answer": "w0"}, {"id": "b", "problem": "w1 \ud800", "answer": "w1"}],
                     task_of("t_echo"), "training rows", t_echo)


@pytest.mark.parametrize("name, benchmarks, says", [
    ("math", {}, r"task 'math': the name is the package's own \(data 'math'\)"),
    ("toy_arith", {}, r"the name is the package's own \(data 'toy_arith'\)"),
    ("math500", {}, r"the name is the package's own \(benchmark 'math500'\)"),
    ("t_alias", {"math_val210": lambda: []}, r"benchmark name\(s\) \['math_val210'\] are the package's own"),
    ("t_alias", {"toy_heldout": lambda: []}, r"benchmark name\(s\) \['toy_heldout'\] are the package's own"),
])
def test_a_plugin_task_cannot_stand_in_for_the_packages_data_or_benchmarks(name, benchmarks, says):
    """A task registered as `math`, or one replacing `math_val210` / `toy_heldout` with other rows, would make every
    run that reads them read the plugin's rows (a search's validation objective tuned on a test set, by name)."""
    with pytest.raises(ValueError, match=says):
        TASKS.register(name, prompt=PROMPT, benchmarks=benchmarks)(lambda: [])
    assert _packages_own_benchmarks_untouched() and TASKS.names().count(name) == 0


def _packages_own_benchmarks_untouched():
    from rlvr_sweep.data.tasks import BENCHMARKS

    return all(BENCHMARKS[b].task == "math" for b in ("math_val210", "toy_heldout", "math500"))


# ---------------------------------------------------------------- siblings of the guarantees (issue 47 item 10)
def test_test_sets_must_name_the_task_s_own_benchmarks():
    with pytest.raises(ValueError, match=r"task 't_bad_tests': test_sets names \['nope'\], not among its benchmarks "
                                         r"\['t_bad_tests_held'\]"):
        TASKS.register("t_bad_tests", benchmarks={"t_bad_tests_held": lambda: []}, test_sets=("nope",))
    with pytest.raises(ValueError, match="a tuple of their names"):
        TASKS.register("t_bad_tests", benchmarks={"t_bad_tests_held": lambda: []}, test_sets="t_bad_tests_held")


def test_only_the_declared_test_sets_are_refused_as_objectives():
    from rlvr_sweep.data.tasks import declared_test_sets
    from rlvr_sweep.sweep.search import objective_of

    @TASKS.register("t_two_sets", prompt=PROMPT, benchmarks={"t_two_val": lambda: _echo_rows("v", 2),
                                                             "t_two_test": lambda: _echo_rows("t", 2)},
                    test_sets=("t_two_test",))
    def two_sets():
        return _echo_rows("train", 4)

    assert declared_test_sets()["t_two_test"] == "t_two_sets" and "t_two_val" not in declared_test_sets()
    line = ["+arm=ra_flat", "profile=smoke", "data.name=t_two_sets", "data.train_file=null",
            "eval.benchmarks=[t_two_val,t_two_test]"]
    assert objective_of(compose_cfg([*line, "sweep.objective=trained.t_two_val"])) == "trained.t_two_val"
    with pytest.raises(ConfigError, match="t_two_test is a test set of task 't_two_sets'"):
        objective_of(compose_cfg([*line, "sweep.objective=trained.t_two_test"]))


def test_rows_found_fixed_at_one_setting_are_checked_again_at_another():
    """A generator seeded from a parameter is fixed at seed=1, unseeded at seed=0: the second setting is refused
    even after the first was found fixed in this process."""
    import random

    @TASKS.register("t_seed_param", prompt=PROMPT, params={"seed": param(1, at_least(0))})
    def seeded(*, seed):
        rng = random.Random(seed or None)
        return [{"id": f"s{i}", "problem": f"w{rng.randint(0, 10**9)}", "answer": "w"} for i in range(3)]

    assert len(data.training_rows(DataConfig(name="t_seed_param", params={"seed": 1}))) == 3
    with pytest.raises(DataError, match="'t_seed_param': its training rows differ between two calls"):
        data.training_rows(DataConfig(name="t_seed_param", params={"seed": 0}))


@pytest.mark.parametrize("field", ["id", "problem", "answer"])
def test_a_row_with_an_empty_field_is_named(field):
    row = {"id": "a", "problem": "w0", "answer": "w0", field: ""}
    with pytest.raises(DataError, match=rf"row 0: field '{field}' missing or not a non-empty string"):
        checked_rows([row], task_of("t_echo"), "training rows", t_echo)


def test_a_benchmark_of_another_task_is_read_with_that_task_s_own_parameters_and_a_kwargs_function_gets_them():
    seen = []

    @TASKS.register("t_kw", prompt=PROMPT, benchmarks={"t_kw_held": lambda **kw: seen.append(kw) or _echo_rows("k", 2)},
                    params={"size": param(7, at_least(1))})
    def t_kw(**kwargs):
        seen.append(kwargs)
        return _echo_rows("train", kwargs["size"])

    assert len(data.training_rows(DataConfig(name="t_kw", params={"size": 2}))) == 2
    assert seen[-1]["size"] == 2 and "root" in seen[-1]  # **kwargs: every parameter, and the data folder
    seen.clear()
    data.benchmark_rows("t_kw_held", DataConfig(name="t_echo", params={"size": 3}), None)  # a t_echo run reads it
    assert seen and all(kw["size"] == 7 for kw in seen)  # t_kw's own default, not t_echo's size

"""The Countdown example task: its grader and rows by hand, and a run of it asked and graded as Countdown."""

from __future__ import annotations

import pytest

from rlvr_sweep.plugins import import_plugins
from rlvr_sweep.data import TASKS, benchmark_task, task_of
from tests.conftest import REPO
from tests.helpers import compose_cfg

EXAMPLE = REPO / "examples" / "countdown"


@pytest.fixture(scope="module")
def countdown():
    import_plugins([str(EXAMPLE)])
    import sys

    return sys.modules["countdown"]


@pytest.mark.parametrize("pred, right", [
    ("3 + 5 * 8", True), ("(8 * 5) + 3", True), ("5*8+3", True), ("3 + 8 * 5", True),
    ("43", False),  # the target itself uses no number
    ("3 * 5 * 8", False),  # 120
    ("3 + 5 * 8 + 0", False),  # a number not given
    ("5 * 8 + 3 + 3", False),  # 3 used twice
    ("(8 + 8) * 3 - 5", False),  # 43, but 8 used twice (the numbers as a set would pass it)
    ("8 * 5 + 3 / 1", False),  # 1 not given
    ("2 ** 5 + 11", False), ("__import__('os')", False), ("", False), ("3 + 5 * 8" + " + 0" * 20, False),
])
def test_the_grader_checks_numbers_and_target(countdown, pred, right):
    assert countdown.reaches_target(pred, "43: 3 5 8") is right


def test_division_is_exact_and_garbage_golds_grade_false(countdown):
    assert countdown.reaches_target("(9 - 1) / 2", "4: 1 2 9") and not countdown.reaches_target("9 / (1 - 1)", "0: 1 1 9")
    assert not countdown.reaches_target("3 + 5 * 8", "forty-three") and not countdown.reaches_target(None, "43: 3 5 8")


def test_rows_are_reachable_disjoint_and_the_gold_rule_holds(countdown):
    train, held = countdown.split_rows("train", 200, 0), countdown.split_rows("heldout", 50, 0)
    assert not {r["problem"] for r in train} & {r["problem"] for r in held}
    for row in train + held:
        assert countdown.is_puzzle(row["answer"]) and countdown.reaches_target(row["solution"], row["answer"])
    assert train[:5] == countdown.split_rows("train", 5, 0) and train[0] != countdown.split_rows("train", 1, 1)[0]


def test_a_countdown_run_is_asked_and_graded_as_countdown(countdown, tmp_path):
    from rlvr_sweep.run import run
    from rlvr_sweep.store import read_table

    cfg = compose_cfg(["+arm=countdown_grpo", "profile=smoke", "train.steps=2", "eval.limit=4",
                       f"run.out_root={tmp_path}", f"plugins=[{EXAMPLE}]", f"hydra.searchpath=[file://{EXAMPLE}/conf]"])
    assert task_of(cfg.data.name) is TASKS["countdown"].task and benchmark_task("countdown_heldout").name == "countdown"
    info = run(cfg)
    assert info["status"] == "finished" and info["inputs"]["plugins"]["options"] == {
        "data.name": "countdown", "eval.benchmarks.countdown_heldout": "countdown"}
    assert info["inputs"]["plugins"]["readouts"] is True  # its benchmark's answers: part of the base identity too
    grades = read_table(info["run_dir"], "grades")
    assert set(grades["benchmark"]) == {"countdown_heldout"} and len(grades) == 8
    assert all(":" in g for g in grades["gold"])  # '<target>: <numbers>'
    expected = [countdown.reaches_target(countdown.expression(r), g) for r, g in zip(grades["response"], grades["gold"])]
    assert grades["correct"].tolist() == expected
    assert grades["extracted"].tolist() == [countdown.expression(r) for r in grades["response"]]
    rollouts = read_table(info["run_dir"], "rollouts")
    assert rollouts["gold"].str.contains(":").all() and len(rollouts) == 16


def test_its_held_out_benchmark_is_a_declared_test_set_a_search_cannot_tune_on(countdown):
    """Countdown declares `countdown_heldout` a test set (`test_sets`): a search's objective on it is refused as
    one on MATH-500 is, unless said so."""
    import pytest

    from rlvr_sweep.config import ConfigError
    from rlvr_sweep.sweep.search import objective_of

    line = ["+arm=countdown_grpo", "profile=smoke", f"plugins=[{EXAMPLE}]", f"hydra.searchpath=[file://{EXAMPLE}/conf]",
            "sweep.objective=trained.countdown_heldout"]
    assert TASKS["countdown"].task.test_sets == ("countdown_heldout",)
    with pytest.raises(ConfigError, match=r"sweep.objective=trained.countdown_heldout: countdown_heldout is a test set "
                                          r"of task 'countdown' \(its test_sets\); tuning on it selects on the test set"):
        objective_of(compose_cfg(line))
    assert objective_of(compose_cfg([*line, "sweep.allow_test_objective=true"])) == "trained.countdown_heldout"

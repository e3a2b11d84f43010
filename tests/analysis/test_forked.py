"""Tables built on several processes (`analysis.forked`) are the tables built in one."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from rlvr_sweep.analysis import build_tables
from rlvr_sweep.analysis.forked import Beside, built, groups
from tests.analysis import handmade
from tests.analysis.test_tables import CONTRASTS


def _same(a, b) -> None:
    assert a.why == b.why and a.notes == b.notes and a.title == b.title
    if not a.why:
        pd.testing.assert_frame_equal(a.frame, b.frame)
        pd.testing.assert_frame_equal(a.display, b.display)


def test_tables_built_on_two_processes_equal_those_built_in_one():
    here = build_tables(handmade.sweep(), CONTRASTS, n_resamples=400, seed=0)
    forked = build_tables(handmade.sweep(), CONTRASTS, n_resamples=400, seed=0, jobs=2)
    assert list(forked) == list(here)
    for name in here:
        _same(forked[name], here[name])
    assert here["table4"].frame.shape[0] > 0 and not here["table1"].why  # a real comparison, not of empties


def test_a_table_a_child_built_is_reused_by_this_process():
    sweep = handmade.sweep()
    tables = build_tables(sweep, only=["table1", "table2a"], reuse=True, jobs=2)
    again = build_tables(sweep, only=["table1"], reuse=True)["table1"]
    assert again is tables["table1"]


def test_groups_split_the_cost_evenly_and_keep_the_order():
    # costliest first, each to the lighter group: 3.9 | 2.9, then 2.5 -> the second, 2.5 -> the first, 0.1 -> the second
    cost = {"table4": 3.9, "baseline_runs": 2.9, "table1": 2.5, "audit": 2.5}  # given: COST follows the builders
    assert groups(["runs", "table1", "table4", "audit", "baseline_runs"], 2, cost) == [
        ["table4", "audit"], ["runs", "table1", "baseline_runs"]]
    assert groups(["table1"], 4) == [["table1"]]


def test_a_builder_error_surfaces_as_it_would_without_children():
    def build(name):
        if name == "b":
            raise ValueError("no table b")
        return name.upper()

    with pytest.raises(ValueError, match="no table b"):
        built(["a", "b", "c"], build, jobs=2)


def test_a_child_that_dies_has_its_tables_built_here():
    parent = os.getpid()

    def build(name):
        if os.getpid() != parent:
            os._exit(3)  # the child dies without a word
        return f"{name} built here"

    assert built(["a", "table4", "c"], build, jobs=3) == {
        "a": "a built here", "table4": "table4 built here", "c": "c built here"}


def test_steps_beside_run_in_a_child_and_come_back_in_order_as_each_ends():
    parent = os.getpid()
    beside = Beside([lambda: ("first", os.getpid()), lambda: ("second", os.getpid())])
    results = beside.results()
    first = next(results)  # the first result is there before the second is asked for
    assert first[0] == "first" and first[1] != parent
    assert next(results)[0] == "second"
    assert next(results, None) is None and beside.child is None  # the child was waited for


def test_a_step_that_fails_in_the_child_runs_here_with_those_after_it():
    parent = os.getpid()
    calls = []

    def second():
        calls.append(os.getpid())
        if os.getpid() != parent:
            raise RuntimeError("only in the child")
        return "second here"

    def third():
        return "third here" if os.getpid() == parent else "third in the child"

    assert list(Beside([lambda: "first", second, third]).results()) == ["first", "second here", "third here"]
    assert calls == [parent]  # the child's own call was in the child: this list is the parent's


def test_a_step_error_surfaces_here_as_it_would_without_a_child():
    def broken():
        raise ValueError("step two is broken")

    results = Beside([lambda: 1, broken]).results()
    assert next(results) == 1
    with pytest.raises(ValueError, match="step two is broken"):
        next(results)


def test_a_child_that_dies_has_its_steps_run_here():
    parent = os.getpid()

    def step():
        if os.getpid() != parent:
            os._exit(3)
        return "here"

    assert list(Beside([step, step]).results()) == ["here", "here"]

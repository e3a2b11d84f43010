"""Tables built on several processes (`analysis.forked`) are the tables built in one."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from rlvr_sweep.analysis import build_tables
from rlvr_sweep.analysis.forked import built, groups
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

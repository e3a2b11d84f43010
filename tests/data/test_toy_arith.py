"""Tests for the toy arithmetic task (the smoke profile's embedded training and held-out data)."""

from __future__ import annotations

import re

import pytest

from rlvr_sweep.data.toy_arith import MAX_OPERAND, load_split, problem_expression, split_of

_SAFE_EXPR = re.compile(r"^[0-9+\-*() ]+$")


def _eval(expr: str) -> int:
    assert _SAFE_EXPR.match(expr), f"unexpected characters in {expr!r}"
    return eval(expr, {"__builtins__": {}}, {})  # noqa: S307 - checked above


def _n_ops(expr: str) -> int:
    """Binary operators are written with spaces around them; a minus sign is not."""
    return sum(expr.count(f" {op} ") for op in "+-*")


# --------------------------------------------------------------------------- task
def test_load_split_is_deterministic_and_prefix_stable():
    a = load_split("train", 64, seed=3)
    assert a == load_split("train", 64, seed=3)
    assert load_split("train", 20, seed=3) == a[:20]
    assert load_split("heldout", 30, seed=3) == load_split("heldout", 30, seed=3)
    assert [r["problem"] for r in load_split("train", 64, seed=4)] != [r["problem"] for r in a]
    assert load_split("train", 0) == []


def test_rows_schema_and_ids():
    for split in ("train", "heldout"):
        rows = load_split(split, 50, seed=1)
        assert len(rows) == 50
        for r in rows:
            assert set(r) == {"id", "problem", "answer", "solution"}
            assert all(isinstance(v, str) for v in r.values())
        assert len({r["id"] for r in rows}) == 50


def test_unknown_split_raises_with_valid_names():
    with pytest.raises(ValueError, match="train.*heldout"):
        load_split("test", 5)


@pytest.mark.parametrize("seeds", [(0, 0), (0, 1), (7, 2)])
def test_splits_are_disjoint(seeds):
    train = {r["problem"] for r in load_split("train", 3000, seed=seeds[0])}
    heldout = {r["problem"] for r in load_split("heldout", 500, seed=seeds[1])}
    assert train.isdisjoint(heldout)
    assert all(split_of(p) == "heldout" for p in heldout)


def test_solutions_are_correct_worked_arithmetic():
    rows = load_split("train", 600, seed=0) + load_split("heldout", 300, seed=0)
    n_operands = set()
    for r in rows:
        expr = problem_expression(r["problem"])
        operands = [int(x) for x in re.findall(r"\d+", expr)]
        n_operands.add(len(operands))
        assert all(0 <= x <= MAX_OPERAND for x in operands)
        assert r["answer"] == str(_eval(expr))

        lines = r["solution"].split("\n")
        assert lines[-1] == f"\\boxed{{{r['answer']}}}"
        assert r["solution"].count("\\boxed") == 1
        worked = lines[:-1]
        assert len(worked) == len(operands) - 1  # one operation per line
        current = expr
        for line in worked:
            lhs, rhs = line.split(" = ")
            assert lhs == current, (r["problem"], line)
            assert _eval(lhs) == _eval(rhs), (r["problem"], line)
            assert _n_ops(lhs) - _n_ops(rhs) == 1, (r["problem"], line)
            current = rhs
        assert current == r["answer"] or _eval(current) == int(r["answer"])
        assert _n_ops(current) == 0
    assert n_operands == {2, 3, 4, 5, 6}

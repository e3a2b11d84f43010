"""Tests for rlvr_sweep.grading.

Behaviour tables are copied from baseline spec §2-§4 (shared/research/baseline_spec.md), the gate
from seed paper §4.1. The hardening tests check that hostile inputs return a bool within
SYMBOLIC_TIMEOUT_S + 3 s from the main thread, threads and pool workers, and that model text
cannot run code.
"""
from __future__ import annotations

import json
import functools
import multiprocessing
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rlvr_sweep.reward import grading
from rlvr_sweep.reward.grading import (GATE_CHARS, SYMBOLIC_TIMEOUT_S, equality_check, extract_answer,
                                grade, normalize, split_parts, training_reward)

FAST_TIMEOUT_S = 1.0  # for inputs that are meant to time out
MARGIN_S = 0.75  # what a call may take beyond its limit: a few statements, on a loaded 2-core machine
FAST_BOUND_S = FAST_TIMEOUT_S + MARGIN_S
BOUND_S = SYMBOLIC_TIMEOUT_S + MARGIN_S


@pytest.fixture(autouse=True, scope="module")
def warm_pool():
    """The bound holds once the pool has started (a run warms it up before its first step)."""
    assert grading.warm_up()

# §4 "Observed behaviour": (pred, gold, expected)
SPEC_GRADES = [
    ("0.5", r"\frac{1}{2}", True),
    ("1/2", r"\frac{1}{2}", True),
    (r"\frac12", r"\frac{1}{2}", False),
    ("(3,-1)", "(3, -1)", True),
    ("(0,3]", "[0,3)", True),
    ("3, -1", "(3,-1)", False),
    (r"10\frac{1}{12}", r"\frac{121}{12}", False),
    ("10 1/12", "121/12", True),
    ("42409", r"\$42409", False),
    ("2", r"2 \text{ euros}", False),
    (r"\text{2}", "2", True),
    (r"90^\circ", "90", True),
    (r"k = \frac{-33}{2}", "-33/2", False),
    ("x=5", "5", False),
    ("1,234", "1234", True),
    ("1{,}234", "1234", False),
    (r"11,\!880", "11880", True),
    (r"2\sqrt{3}", "sqrt(12)", True),
    (r"\pi/2", r"\frac{\pi}{2}", False),
    (r"50\%", "50", True),
    ("0.50", "1/2", True),
    ("2^{10}", "1024", True),
    ("2²", "4", True),
    ("A. 5", "5", True),
    (r"\mbox{four}", "4", False),
    ("x^2+2x+1", "(x+1)^2", True),
    ("1.0", "1", True),
    ("27", "27.0", True),
    (r"45^\circ, 135^\circ", "45, 135", True),
    ("", "0", False),
    # §2: near-verbatim predictions are the only ones rows 9, 11, 12, 16, 38 accept
    (r"\$42409", r"\$42409", True),
    ("8.75", "35/4", True),
]

# §3 and §4 extraction examples, plus the finder's rules: (text, fallback, expected)
SPEC_EXTRACTIONS = [
    (r"\boxed 5", "number_then_full", "5"),
    (r"\boxed 5", None, ""),
    (r"\boxed{}", "number_then_full", r"\boxed{}"),
    ("no box, so 12 and 3/4", "number_then_full", "3/4"),
    (r"\fbox{7}", "number_then_full", "7"),
    (r"\fbox{7}", None, ""),
    (r"\boxed{\$ 5 $}", "number_then_full", r"\$ 5"),
    (r"\boxed{1} so \boxed{2}", None, "2"),
    (r"\boxed{\frac{1}{2}}", None, r"\frac{1}{2}"),
    ("\\boxed \n {4}", None, "4"),
    (r"\boxed{1 and 7", "number_then_full", "7"),  # unbalanced: no box
    (r"\boxed{} then 12", "number_only", "12"),  # empty box falls through
    (r"\boxed{}", "number_only", ""),
    (r"\boxed{ $ }", "number_then_full", ""),  # non-empty box that strips to ""
    ("  no digits here ", "number_then_full", "  no digits here "),
    ("so x = -3.5e+2", "number_only", "-3.5e+2"),
    ("", "number_then_full", ""),
    (None, "number_then_full", ""),
]

SPEC_NORMALIZE = [
    (r"10\frac{1}{12}", "10(1)/(12)"),
    (r"\$42409", r"\42409"),
    (r"\frac12", r"\frac12"),
    (r"\frac{\frac{1}{2}}{3}", r"\frac(1)/(2)3"),  # outer level of a nested fraction stays
    (r"\frac 1 2", "(1)/(2)"),
    (r"\sqrt 2 + \sqrt{3}", "sqrt(2) + sqrt(3)"),
    ("1{,}234", "1,234"),
    ("b: 2", "2"),
    (r"90^{ \circ }", "90"),
    ("x⁻¹ + ²", "x**-1 + 2"),
    ("1 1/2", "1+1/2"),
    (r"\left( 3, \dfrac{\pi}{2} \right)", r"( 3, (\pi)/(2) )"),  # only space *after* \left goes
    (r"<|im_start|>\( 2 \cdot 3 \)<|endoftext|>", "2 * 3"),
    (r"\text{Evelyn}", "evelyn"),
]

SPEC_SPLITS = [
    ("(0,3]", ["0", "3"]),
    ("[a, b)", ["a", "b"]),
    ("3, -1", ["3, -1"]),
    ("(1,)", ["(1,)"]),
    ("(5)", ["(5)"]),
    ("", []),
]

# §2: gold answers of math_train rows 0-49 (the 50 steps of a baseline run)
TRAIN_GOLDS_0_49 = [
    "0", "98", "4", "17", "6", "(3, -1)", "[0,3)", "11", "-7", r"\$42409", "0",
    r"k = \frac{-33}{2}", r"2 \text{ euros}", "3", "41", "4", r"10\frac{1}{12}", r"\frac{1}{2}",
    "10", "45", "(0,5)", "2", "192", "9", r"\frac{20}{3}", "58", "8", "40", "71", "1",
    r"\sqrt{2}+1", "103", "-30", "0", "3", "8.75", "200", "12", r"2, 3, \text{ and } 4", "1", "95",
    "45", "5", r"\frac{1}{2}", "(4,4)", "14", "5", "4", "729", "-29x^5(7x^6-2)",
]


def _answers(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line)["answer"] for line in f]


def _timed_grade(pred, gold, **kwargs):
    start = time.monotonic()
    result = grade(pred, gold, **kwargs)
    return result, time.monotonic() - start


# ---------------------------------------------------------------- spec tables
@pytest.mark.parametrize("pred, gold, expected", SPEC_GRADES)
def test_spec_grades(pred, gold, expected):
    assert grade(pred, gold) is expected


def test_guard_rejects_no_spec_answer():
    before = grading.stats()["unsafe_rejected"]
    for pred, gold, _ in SPEC_GRADES:
        grade(pred, gold)
    assert grading.stats()["unsafe_rejected"] == before


@pytest.mark.parametrize("text, fallback, expected", SPEC_EXTRACTIONS)
def test_spec_extractions(text, fallback, expected):
    assert extract_answer(text, fallback=fallback) == expected


def test_unknown_fallback_names_valid_ones():
    with pytest.raises(ValueError, match="number_then_full"):
        extract_answer("5", fallback="number")


@pytest.mark.parametrize("text, expected", SPEC_NORMALIZE)
def test_normalize(text, expected):
    assert normalize(text) == expected


@pytest.mark.parametrize("text, expected", SPEC_SPLITS)
def test_split_parts(text, expected):
    assert split_parts(text) == expected


def test_equality_check():
    assert equality_check("sqrt(12)", "2sqrt(3)")
    assert equality_check(r"\pi", r"\pi")  # identical strings need no parse
    assert not equality_check("1,234", "1234")  # a tuple minus a number: TypeError -> False
    assert not equality_check("x" * 2001, "x" * 2000 + "*1")  # over 2000 chars: unparsable


def test_train_golds_0_49_grade_against_themselves():
    assert len(TRAIN_GOLDS_0_49) == 50
    assert [a for a in TRAIN_GOLDS_0_49 if not grade(a, a)] == []


def test_train_golds_0_49_match_data_file(shared_data):
    assert _answers(shared_data / "math_train.jsonl")[:50] == TRAIN_GOLDS_0_49


def test_math500_self_match_and_constant_box(shared_data):
    golds = _answers(shared_data / "math500.jsonl")
    assert len(golds) == 500
    constant = extract_answer(r"\boxed{123}")
    assert constant == "123"
    assert not [g for g in golds if normalize(g) == "123"]  # else the 0/500 check is wrong
    assert [g for g in golds if not grade(extract_answer("\\boxed{" + g + "}"), g)] == []
    assert [g for g in golds if grade(constant, g)] == []


# ---------------------------------------------------------------- reward and gate
def test_training_reward_needs_a_braced_box():
    text = "49 * 2 = 98, so the answer is 98"
    assert grade(extract_answer(text), "98")  # evaluation's default fallback finds it
    assert training_reward(text, "98") == 0.0
    assert training_reward(r"the answer is \boxed 98", "98") == 0.0
    assert training_reward(r"\boxed{}", "0") == 0.0
    assert training_reward(None, "98") == 0.0


def test_training_reward_gate():
    short = " \\boxed{98}<|endoftext|>"
    assert training_reward(short, "98") == 1.0
    assert training_reward(short, "98", gate_chars=GATE_CHARS) == 0.0
    worked = "Twice 49 is 49 + 49 = 98, so the answer is\n\\boxed{98}<|endoftext|>"
    assert worked.rfind("\\boxed") >= 30
    assert training_reward(worked, "98", gate_chars=GATE_CHARS) == 1.0
    assert training_reward(worked, "97", gate_chars=GATE_CHARS) == 0.0
    assert training_reward("x" * 30 + "\\boxed{98}", "98", gate_chars=30) == 1.0
    assert training_reward("x" * 29 + "\\boxed{98}", "98", gate_chars=30) == 0.0
    assert GATE_CHARS == 30
    with pytest.raises(TypeError):
        training_reward(short, "98", gate_chars="30")


# ---------------------------------------------------------------- hostile inputs
NESTED = "\\boxed{" + "{" * 100_000 + "1" + "}" * 100_000 + "}"
HOSTILE = [  # (pred, gold, expected); expected follows the spec's rules, not intuition
    (extract_answer(NESTED), "1", True),  # braces are deleted, leaving "1"
    ("7" * 10**6, "1", False),  # over 2000 chars: unparsable
    ("7" * 10**6, "7" * 10**6, True),  # identical strings match before any length rule
    ("9**9**9**9", "1", False),
    ("9^9^9^9", "1", False),
    ("2**2**2**2**2**2", "1", False),
    ("__import__('os').system('echo hi')", "0", False),
    ("().__class__.__bases__[0].__subclasses__()", "0", False),
    ("lambda: 1", "1", False),
    ("x.__class__", "x", False),
    ("(1).real", "1", False),
    ("1e5.real", "100000", False),
    (None, "1", False),
    (123, "123", False),
    (b"bytes", "bytes", False),
    ("1", None, False),
]


def _in_thread(fn, *args, **kwargs):
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("out", fn(*args, **kwargs)))
    thread.start()
    thread.join(timeout=60)
    return box["out"]


def _in_pool_thread(fn, *args, **kwargs):
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn, *args, **kwargs).result(timeout=60)


RUNNERS = {"main": lambda fn, *a, **k: fn(*a, **k), "thread": _in_thread, "executor": _in_pool_thread}


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("pred, gold, expected", HOSTILE, ids=lambda v: repr(v)[:24])
def test_hostile_inputs_return_a_bool_in_time(runner, pred, gold, expected):
    result, elapsed = RUNNERS[runner](_timed_grade, pred, gold, timeout_s=FAST_TIMEOUT_S)
    assert result is expected
    assert elapsed < FAST_BOUND_S


@pytest.mark.parametrize("runner", RUNNERS)
def test_timeout_is_counted_and_worker_restarts(runner):
    before = grading.stats()
    result, elapsed = RUNNERS[runner](_timed_grade, "9^9^9^9", "1", timeout_s=FAST_TIMEOUT_S)
    assert result is False and elapsed < FAST_BOUND_S
    assert grading.stats()["timeouts"] == before["timeouts"] + 1
    restarted = time.monotonic() + 30  # the replacement starts in the background, off the caller
    while grading.stats()["worker_restarts"] == before["worker_restarts"] and time.monotonic() < restarted:
        time.sleep(0.05)
    assert grading.stats()["worker_restarts"] == before["worker_restarts"] + 1
    result, elapsed = RUNNERS[runner](_timed_grade, "x^2+2x+1", "(x+1)^2")
    assert result is True and elapsed < BOUND_S


def test_dead_worker_is_replaced():
    assert grading.warm_up()
    next_child = grading._WORKER._idle[-1]  # the pool hands out its most recently idle child first
    next_child.proc.kill()  # stands in for an OOM kill or a crash
    next_child.proc.wait()
    before = grading.stats()["worker_deaths"]
    assert grade("0.5", "1/3") is False  # the call that finds it dead counts as not equal
    assert grading.stats()["worker_deaths"] == before + 1
    assert grade("0.5", "1/2") is True  # another child answers at once


@pytest.mark.slow
def test_every_call_is_bounded_by_its_own_limit_under_concurrent_hostile_load():
    """8 threads of hostile and ordinary answers against a pool of fewer workers: every call returns
    within its limit plus the margin, counted from the moment it was called, including calls that
    wait for a free worker (they count as timeouts) and calls made while workers restart."""
    hostile = ["9**9**9", "9^9^9^9", "2**2**2**2**2**2", "(x+1)**100000 - y"]
    ordinary = [(p, g) for p, g, _ in SPEC_GRADES]
    calls = [(hostile[i % 4], "1") if i % 3 == 0 else ordinary[i % len(ordinary)] for i in range(8 * 10)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        timed = list(pool.map(lambda c: _timed_grade(*c, timeout_s=FAST_TIMEOUT_S), calls))
    worst = max(elapsed for _, elapsed in timed)
    assert worst < FAST_BOUND_S, worst
    assert all(result is False for (pred, _), (result, _) in zip(calls, timed) if pred in hostile)
    simultaneous = [("9**9**9", "1")] * 8
    with ThreadPoolExecutor(max_workers=8) as pool:
        timed = list(pool.map(lambda c: _timed_grade(*c, timeout_s=FAST_TIMEOUT_S), simultaneous))
    assert [r for r, _ in timed] == [False] * 8 and max(e for _, e in timed) < FAST_BOUND_S


@pytest.mark.slow
def test_first_calls_on_a_cold_pool_are_bounded_by_their_limits_once_a_child_is_ready(monkeypatch):
    """8 hostile and 8 easy answers called at once on a pool that has not started (a new process's): a call may
    wait for the first child's imports (never charged to its limit), but once a child is ready each call
    returns within its own limit plus the margin, as a warm pool's do. (Calls that went on waiting for an idle
    child past their deadline took up to 3 times the limit here.)"""
    from rlvr_sweep.reward import sandbox

    cold = sandbox.SandboxWorker(grading.__file__, "_make_worker_handler", startup_timeout_s=grading.STARTUP_TIMEOUT_S,
                                 max_reply_bytes=16, unavailable="cold pool unavailable ({why})")
    monkeypatch.setattr(grading, "_WORKER", cold)
    ready_at = []

    def watch():
        deadline = time.monotonic() + grading.STARTUP_TIMEOUT_S
        while not cold._ready and time.monotonic() < deadline:
            time.sleep(0.005)
        ready_at.append(time.monotonic())

    calls = [("9**9**9**9", "1")] * 8 + [("2", "2"), (r"\frac{1}{2}", "0.5")] * 4
    barrier = threading.Barrier(len(calls))

    def timed(call):
        barrier.wait()
        start = time.monotonic()
        result = grade(*call, timeout_s=FAST_TIMEOUT_S)
        return result, start, time.monotonic()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(max_workers=len(calls)) as pool:
            timed_calls = list(pool.map(timed, calls))
    finally:
        watcher.join()
        cold.shutdown()
    charged = [end - max(start, ready_at[0]) for _, start, end in timed_calls]
    assert max(charged) < FAST_BOUND_S, sorted(charged)[-4:]
    assert [r for r, _, _ in timed_calls[:8]] == [False] * 8


def test_answers_are_values_not_programs():
    """Names outside sympy's mathematical functions are never run: `isprime(7)` is not True, `len`
    is not Python's; mathematical functions still evaluate."""
    assert grade("isprime(7)", "True") is False and grade("isprime(7)", "1") is False
    assert grade("len((1,2))", "2") is False and grade("sum((1,2))", "3") is False
    assert grade("isprime(7)+1", "1+isprime(7)") is True  # an undefined function is still an expression
    assert grade("binomial(5,2)", "10") is True and grade("3!", "6") is True
    assert grade("abs(-3)", "3") is True and grade("max(2,5)", "5") is True and grade("floor(2.5)", "2") is True


def _sympify_payload(target: str) -> str:
    """Quote-free, `__`-free, attribute-free text that makes sympy sympify `target`.

    Each character is sliced out of a printed expression (`sstr`, `srepr`); `sin(<str>)` then
    sympifies the string. In sympy's default namespace this runs arbitrary code.
    """
    punct = {"_": "sstr(a_)[1]", "(": "sstr(sin(x))[3]", ")": "sstr(sin(x))[5]",
             "'": "srepr(x)[7]", ".": "sstr(1.5)[1]", "/": "sstr(x/y)[1]", " ": "sstr(x+y)[1]",
             "-": "sstr(x-y)[2]"}
    return "sin(" + "+".join(punct.get(c, f"sstr({c})") for c in target) + ")"


def test_strings_built_inside_sympy_cannot_run_code():
    marker = Path(tempfile.gettempdir()) / f"rlvr_grading_pwned_{os.getpid()}"
    if str(marker) != str(marker).lower():
        pytest.skip("normalize lowercases the payload, so the marker path must be lowercase")
    marker.unlink(missing_ok=True)
    payload = _sympify_payload(f"__import__('os').system('touch {marker}')")
    before = grading.stats()["unsafe_rejected"]
    assert grade(payload, "0") is False
    assert grading.stats()["unsafe_rejected"] == before  # it did reach sympy in the worker
    assert not marker.exists()


def test_concurrent_threads_get_their_own_answers():
    cases = [(p, g, e) for p, g, e in SPEC_GRADES] * 4
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda c: grade(c[0], c[1]), cases))
    assert results == [e for _, _, e in cases]


@pytest.mark.slow
def test_works_inside_a_daemonic_pool_worker():
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        fast_grade = functools.partial(grade, timeout_s=FAST_TIMEOUT_S)
        assert pool.starmap(fast_grade, [("0.5", r"\frac{1}{2}"), ("9^9^9^9", "1")]) == [True, False]


def test_invalid_timeout_is_a_programming_error():
    with pytest.raises(ValueError):
        grade("1", "1", timeout_s=0)


def test_a_caller_grading_one_answer_at_a_time_starts_one_worker():
    grading.shutdown()
    settled = time.monotonic() + 30
    while grading._WORKER._live and time.monotonic() < settled:  # children still starting end as they start
        time.sleep(0.05)
    try:
        assert grading._WORKER._live == 0
        for _ in range(3):
            assert grade("x^2+2x+1", "(x+1)^2") is True  # symbolic: through a worker
        assert grading._WORKER._live == 1  # never two busy at once: the others are not started
        assert grading.warm_up() and grading._WORKER._live == grading._WORKER.size  # an explicit warm-up starts all
    finally:
        assert grading.warm_up()


INTEGER_PARTS = ["0", "-0", "7", "-7", "126", "128", "-18", "1024", "9" * 1999, "9" * 1998 + "8", "-" + "1" * 1999]


def test_canonical_integers_are_compared_in_process_as_sympy_compares_them(monkeypatch):
    """Every pair of canonical decimal integers grades as the worker's sympy answer, with no round trip."""
    asked = [grading._WORKER.request([[g, p]], BOUND_S) for g in INTEGER_PARTS for p in INTEGER_PARTS if g != p]
    assert asked.count(True) == 2  # only 0 and -0: the others are distinct integers
    round_trips = []
    monkeypatch.setattr(grading._WORKER, "request", lambda *a: round_trips.append(a))
    here = [equality_check(g, p) for g in INTEGER_PARTS for p in INTEGER_PARTS if g != p]
    assert here == asked and not round_trips
    assert grade("(126, 0)", "(126, -0)") is True and grade("(126, 5)", "(128, 5)") is False
    assert grade("(3, x)", "(4, x)") is False and not round_trips  # an unequal integer part decides the pair


@pytest.mark.parametrize("pred, gold, expected", [
    ("007", "7", False), ("+5", "5", True), ("1_000", "1000", True), ("\u0663", "3", False), ("2", "2.0", True),
    ("(3, x+x)", "(3, 2x)", True),
])
def test_other_numbers_still_reach_sympy(monkeypatch, pred, gold, expected):
    """Leading zeros, signs, underscores, non-ASCII digits and decimals are sympy's to decide (the
    in-process rule covers canonical integers only), and so is a non-integer part beside equal integers."""
    round_trips, request = [], grading._WORKER.request
    monkeypatch.setattr(grading._WORKER, "request", lambda *a: round_trips.append(a) or request(*a))
    assert grade(pred, gold) is expected and len(round_trips) == 1


@pytest.mark.parametrize("pred, gold, expected", [
    ("126", "128", False), ("5", "5", True), (r"\frac{1}{2}", r"\frac{1}{2}", True), ("(1, 2)", "(1, 2, 3)", False),
    (None, "1", False), (b"1", "1", False), ("__import__", "1", False), ("(5, 7)", "(5, 8)", False),
    ("1/2", "0.5", None), ("(5, x)", "(5, y)", None), ("007", "7", None),
])
def test_settled_is_the_grade_where_no_worker_is_needed(monkeypatch, pred, gold, expected):
    round_trips, request = [], grading._WORKER.request
    monkeypatch.setattr(grading._WORKER, "request", lambda *a: round_trips.append(a) or request(*a))
    assert grading.settled(pred, gold) is expected and not round_trips
    if expected is not None:
        assert grade(pred, gold) is expected and not round_trips

"""Tests for rlvr_sweep.reward.graders and rlvr_sweep.verify.

Run folders are built for real (pandas parquet files, run.json, DONE) with known content; one
stored grade is deliberately wrong, and `regrade` must report exactly that one. Math-Verify tests
skip only when the package is not installed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from rlvr_sweep import verify
from rlvr_sweep.verify.cli import main as verify_main
from rlvr_sweep.reward import graders, grading
from tests.conftest import REPO

needs_math_verify = pytest.mark.skipif(not graders.math_verify_available(),
                                       reason="math-verify not installed (pip install math-verify)")
GATE = 30
LONG = "We compute step by step and find that " * 2  # > GATE characters before the box
WRONG_ITEM = "test/x/3.json"

# (item_id, response, gold); extracted/correct are stored as the baseline gives them
GRADE_ROWS = [
    ("test/x/0.json", r"so the answer is \boxed{0.5}", r"\frac{1}{2}"),  # needs the sympy worker
    ("test/x/1.json", "I think it is 7", "8"),  # no box: number fallback
    ("test/x/2.json", r"\boxed{(3, -1)}", "(3,-1)"),
    (WRONG_ITEM, r"\boxed{12}", "12"),  # stored as wrong below
]
EXPECTED_GRADES = {"test/x/0.json": ("0.5", True), "test/x/1.json": ("7", False),
                   "test/x/2.json": ("(3, -1)", True), WRONG_ITEM: ("12", True)}
# (text, gold, ungated correct, gated reward with GATE)
ROLLOUT_ROWS = [
    (LONG + r"\boxed{4}<|endoftext|>", "4", 1.0, 1.0),
    (r" \boxed{4}<|endoftext|>", "4", 1.0, 0.0),  # box before the gate
    ("no box, just 4<|endoftext|>", "4", 0.0, 0.0),  # the reward needs a box
    (LONG + r"\boxed{1/2}<|endoftext|>", r"\frac{1}{2}", 1.0, 1.0),
]


def write_run(run_dir: Path, *, wrong: bool = True, finished: bool = True, gold_column: bool = True,
              gate_chars=GATE, grader: str | None = "baseline", extra_grades=()) -> Path:
    run_dir.mkdir(parents=True)
    grades = []
    expected = {**EXPECTED_GRADES, **{r[0]: (r[3], r[4]) for r in extra_grades}}
    for i, (item_id, response, gold, *_) in enumerate([*GRADE_ROWS, *extra_grades]):
        extracted, correct = expected[item_id]
        if wrong and item_id == WRONG_ITEM:
            correct = not correct
        grades.append({"phase": "trained", "benchmark": "math500", "item_id": item_id, "index": i,
                       "length": 10, "finished": True, "capped": False, "has_box": "boxed" in response,
                       "extracted": extracted, "gold": gold, "correct": correct, "response": response})
    rollouts = []
    for i, (text, gold, correct, reward) in enumerate(ROLLOUT_ROWS):
        row = {"step": 0, "index": i, "question_id": "train/0", "length": 12, "reward": reward,
               "correct": correct, "finished": True, "capped": False, "text": text}
        if gold_column:
            row["gold"] = gold
        rollouts.append(row)
    pd.DataFrame(grades).to_parquet(run_dir / "grades.parquet", index=False)
    pd.DataFrame(rollouts).to_parquet(run_dir / "rollouts.parquet", index=False)
    (run_dir / "run.json").write_text(json.dumps(
        {"arm": "ra_flat", "seed": 1, "horizon": 512, "run_hash": "abcd1234",
         "status": "finished" if finished else "running", "gate_chars": gate_chars}))
    if grader is not None:  # as store.prepare_run_dir writes it (abridged)
        (run_dir / "config.yaml").write_text(f"arm: ra_flat\nseed: 1\ngrader:\n  name: {grader}\n")
    if finished:
        (run_dir / "DONE").write_bytes(b"")
    return run_dir


@pytest.fixture
def sweep(tmp_path) -> Path:
    root = tmp_path / "runs"
    write_run(root / "smoke" / "ra_flat" / "h512_s1_abcd1234")
    write_run(root / "smoke" / "ra_flat" / "h512_s2_unfinish", finished=False)  # also wrong
    return root


def cli(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "rlvr_sweep.verify", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=env)


# ---------------------------------------------------------------- regrade
def test_fixture_matches_the_verifier():
    for item_id, response, gold in GRADE_ROWS:
        extracted = grading.extract_answer(response)
        assert (extracted, grading.grade(extracted, gold)) == EXPECTED_GRADES[item_id]
    for text, gold, correct, reward in ROLLOUT_ROWS:
        assert grading.training_reward(text, gold) == correct
        assert grading.training_reward(text, gold, GATE) == reward


def test_regrade_reports_exactly_the_wrong_grade(sweep):
    out = verify.regrade(sweep)
    assert [r["run"] for r in out["runs"]] == [str(Path("smoke/ra_flat/h512_s1_abcd1234"))]
    assert (out["checked"], out["agree"], out["ok"]) == (8, 7, False)
    run = out["runs"][0]
    assert run["tables"]["grades"]["checked"] == 4 and run["tables"]["rollouts"]["checked"] == 4
    assert run["gate_chars"] == GATE
    [d] = out["disagreements"]
    assert d["table"] == "grades"
    assert d["key"] == {"phase": "trained", "benchmark": "math500", "item_id": WRONG_ITEM, "index": 3}
    assert d["diffs"] == {"correct": {"stored": False, "recomputed": True}}


def test_regrade_all_includes_unfinished_runs(sweep):
    out = verify.regrade(sweep, finished_only=False)
    assert len(out["runs"]) == 2 and out["checked"] == 16
    assert [d["key"]["item_id"] for d in out["disagreements"]] == [WRONG_ITEM, WRONG_ITEM]


def test_regrade_checks_the_gated_reward_and_needs_gold(tmp_path):
    run = write_run(tmp_path / "r", wrong=False)
    frame = pd.read_parquet(run / "rollouts.parquet")
    frame.loc[1, "reward"] = 1.0  # as if the gate had not been applied
    frame.to_parquet(run / "rollouts.parquet", index=False)
    [d] = verify.regrade(run)["disagreements"]
    assert d["table"] == "rollouts" and d["key"] == {"step": 0, "index": 1, "question_id": "train/0"}
    assert d["diffs"] == {"reward": {"stored": 1.0, "recomputed": 0.0}}

    no_gold = verify.regrade(write_run(tmp_path / "n", wrong=False, gold_column=False))
    assert no_gold["ok"] and no_gold["checked"] == 4  # grades only
    assert "no 'gold' column" in no_gold["runs"][0]["tables"]["rollouts"]["note"]

    ungated = verify.regrade(write_run(tmp_path / "u", wrong=False, gate_chars=None))
    assert len(ungated["disagreements"]) == 1  # row 1: reward 0.0 stored, no gate -> 1.0


@pytest.mark.slow
@needs_math_verify
def test_regrade_uses_the_runs_grader(tmp_path):
    # the baseline cannot parse `\frac12`; math-verify can: (item_id, response, gold, extracted, correct)
    mv_row = ("test/x/4.json", r"\boxed{0.5}", r"\frac12", "0.5", True)
    run = write_run(tmp_path / "mv", wrong=False, grader="math_verify", extra_grades=[mv_row])
    out = verify.regrade(run)
    assert out["runs"][0]["grader"] == "math_verify" and out["ok"] and out["checked"] == 9
    [d] = verify.regrade(run, grader="baseline")["disagreements"]
    assert d["key"]["item_id"] == "test/x/4.json"
    assert d["diffs"] == {"correct": {"stored": True, "recomputed": False}}
    no_config = verify.regrade(write_run(tmp_path / "old", wrong=False, grader=None))
    assert no_config["ok"] and no_config["runs"][0]["grader"] == "baseline"


def test_regrade_bad_input(tmp_path, sweep):
    with pytest.raises(verify.BadInput, match="no such folder"):
        verify.regrade(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(verify.BadInput, match="no run folder"):
        verify.regrade(tmp_path / "empty")
    (sweep / "smoke" / "ra_flat" / "h512_s1_abcd1234" / "DONE").unlink()
    with pytest.raises(verify.BadInput, match="--all"):
        verify.regrade(sweep)
    (sweep / "smoke" / "ra_flat" / "h512_s2_unfinish" / "grades.parquet").write_bytes(b"not parquet")
    with pytest.raises(verify.BadInput, match="cannot read"):
        verify.regrade(sweep, finished_only=False)


@pytest.mark.slow
def test_regrade_cli_exit_codes(sweep, tmp_path):
    wrong = cli("regrade", sweep)
    assert wrong.returncode == 1, wrong.stderr
    lines = [line for line in wrong.stdout.splitlines() if "DISAGREE" in line]
    assert len(lines) == 1 and WRONG_ITEM in lines[0] and "correct stored=False recomputed=True" in lines[0]
    assert "8 checked, 7 agree (87.50%), 1 disagreement" in wrong.stdout

    run = sweep / "smoke" / "ra_flat" / "h512_s1_abcd1234"
    frame = pd.read_parquet(run / "grades.parquet")
    frame.loc[frame.item_id == WRONG_ITEM, "correct"] = True
    frame.to_parquet(run / "grades.parquet", index=False)
    fixed = cli("regrade", run)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "8 checked, 8 agree (100.00%), 0 disagreement" in fixed.stdout

    missing = cli("regrade", tmp_path / "nowhere")
    assert missing.returncode == 2 and "no such folder" in missing.stderr


# ---------------------------------------------------------------- graders
def test_registry():
    assert set(graders.GRADERS) == {"baseline", "math_verify"}
    assert graders.get_grader() is graders.get_grader("baseline") is grading.grade
    with pytest.raises(ValueError, match=r"unknown grader 'sympy'.*baseline.*math_verify"):
        graders.get_grader("sympy")


@pytest.mark.parametrize("pred, gold, expected", [
    ("0.5", r"\frac{1}{2}", True), (r"\frac12", r"\frac{1}{2}", False), ("(0,3]", "[0,3)", True),
    ("x=5", "5", False), ("1,234", "1234", True), ("1{,}234", "1234", False), (r"50\%", "50", True),
    ("", "0", False), (None, "1", False)])
def test_the_baseline_grader_gives_the_spec_results(pred, gold, expected):
    """The grader the registry hands out by name gives the baseline spec's observed grades (§4),
    including its quirks (`\\frac12` and `1{,}234` do not match)."""
    assert graders.get_grader("baseline")(pred, gold) is expected


def test_missing_math_verify_says_how_to_install(monkeypatch, sweep):
    monkeypatch.setattr(graders, "math_verify_available", lambda: False)
    with pytest.raises(ImportError, match="pip install math-verify"):
        graders.get_grader("math_verify")
    with pytest.raises(ImportError, match="pip install math-verify"):
        graders.math_verify_grade("1", "1")
    assert verify_main(["compare-run", str(sweep)]) == 2


@needs_math_verify
def test_math_verify_grades():
    grade = graders.get_grader("math_verify")
    assert grade("0.5", r"\frac{1}{2}") is True
    assert grade("1", "2") is False
    assert grade("(3, -1)", "(3,-1)") is True
    assert grade(r"\$42409", "42409") is True
    assert grade("", "0") is False and grade(None, "0") is False and grade(5, "5") is False
    assert graders.math_verify_normal_form(r"\frac{1}{2}") == "1/2"
    assert graders.math_verify_normal_form("") == ""
    assert graders.baseline_normal_form(r"\frac{1}{2}") == "(1)/(2)"


@needs_math_verify
@pytest.mark.parametrize("pred", [r"9^{9^{9^{9}}}", "9^9^9^9" * 14_286],  # the 2nd: 10^5 chars
                         ids=["power_tower", "100k_chars"])
def test_math_verify_is_bounded_in_a_thread(pred):
    assert graders.warm_up()  # the worker start is not charged to the grade
    before = graders.stats()["timeouts"]
    box = {}
    start = time.monotonic()
    thread = threading.Thread(target=lambda: box.setdefault(
        "out", graders.math_verify_grade(pred, "2", timeout_s=1.0)))
    thread.start()
    thread.join(timeout=30)
    elapsed = time.monotonic() - start
    assert box.get("out") is False and elapsed < 1.0 + 3.0
    assert graders.stats()["timeouts"] == before + 1
    assert graders.warm_up()  # the replacement starts (its start is not charged to the grade) ...
    assert graders.math_verify_grade("0.5", r"\frac{1}{2}") is True  # ... and works


# ---------------------------------------------------------------- compare
@needs_math_verify
def test_compare_golds_and_data_root(tmp_path):
    rows = [{"problem": "p", "answer": a} for a in (r"\frac{1}{2}", "12", r"\pi")]
    (tmp_path / "math500.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = verify.compare(tmp_path, ["math500"])["math500"]
    assert out["items"] == 3
    # `pi` (Math-Verify's form of \pi) is not LaTeX, so the baseline cannot parse it
    assert out["failures"] == {"baseline:self": 0, "math_verify:self": 0,
                               "baseline:math_verify_form": 1, "math_verify:baseline_form": 0}
    [item] = out["listed"]
    assert item["gold"] == r"\pi" and item["math_verify_form"] == "pi"
    from rlvr_sweep.verify.compare import compare_verdict

    ok, line = compare_verdict({"math500": out})
    assert ok and line.startswith("== verdict: ok: both graders accept each of the 3 golds as equal to itself; "
                                  "on the other grader's normal form of a gold, baseline differs for 1 and math_verify for 0")
    empty = verify.compare_golds([{"id": "e", "gold": ""}])
    assert empty["failures"] == dict.fromkeys(verify.GOLD_CHECKS, 1)
    ok, line = compare_verdict({"math500": out, "empty": empty})
    assert not ok and line == "== verdict: FAILED: a grader rejects 2 gold(s) as equal to itself (of 4; listed above under :self)"
    with pytest.raises(verify.BadInput, match="data file not found"):
        verify.compare(tmp_path, ["gsm8k"])
    with pytest.raises(verify.BadInput, match="unknown benchmark"):
        verify.compare(tmp_path, ["mmlu"])


@needs_math_verify
def test_compare_run(sweep):
    out = verify.compare_run(sweep)
    [run] = out["runs"]
    assert run["items"] == 4 and run["disagreeing"] == 0
    assert run["counts"] == {"both_correct": 3, "both_wrong": 1, "baseline_only": 0,
                             "math_verify_only": 0}
    assert run["groups"] == {"trained/math500": {"items": 4, "baseline": 3, "math_verify": 3}}


def test_regrade_that_checked_nothing_fails(tmp_path, capsys):
    """A finished run without grades or rollouts: nothing to regrade, so `regrade` says so and exits 3,
    never 0 (a check that checked nothing fails); with something checked it exits 0."""
    from rlvr_sweep.verify.cli import main

    run = write_run(tmp_path / "runs" / "smoke" / "ra_flat" / "h512_s1_abcd1234", wrong=False)
    assert main(["regrade", str(run)]) == 0
    for table in ("grades.parquet", "rollouts.parquet"):
        (run / table).unlink()
    assert main(["regrade", str(run)]) == 3
    out = capsys.readouterr().out
    assert "0 checked" in out and "nothing was checked" in out

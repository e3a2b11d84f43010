"""How `verify all` saves time without checking less: PASS 2 in its own process beside PASS 1, and the
regrade of a sweep grading what is new concurrently and remembering outcomes across runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from rlvr_sweep.verify import beside, passes, regrade_run
from tests.verify.test_verify import WRONG_ITEM, write_run


def test_pass2_beside_gives_what_pass2_gives_here():
    child = passes.Pass2Beside()
    here = passes.pass2()
    result = child.result()
    assert result.ok and result.summary == here.summary
    assert "(0.50, 0.50) vs root restart (0.50, 0.25)" in result.summary and 0 < result.seconds < 60


def test_a_pass2_process_that_fails_fails_the_pass_with_its_last_line(monkeypatch):
    monkeypatch.setattr(beside, "PASS2_MODULE", "rlvr_sweep.verify.no_such_module")
    result = passes.Pass2Beside().result()
    assert not result.ok and result.summary == "the analytic checks did not run"
    assert result.problems[0].startswith("PASS 2 process: ") and "no_such_module" in result.problems[0]
    monkeypatch.setattr(beside.sys, "executable", "/nonexistent/python")
    result = passes.Pass2Beside().result()
    assert not result.ok and "cannot start the PASS 2 process" in result.problems[0]


def test_an_early_pass2_is_the_one_run_all_takes():
    beside.Pass2Beside.early()
    early = beside._EARLY
    taken, fresh = beside.Pass2Beside.taken(), beside.Pass2Beside.taken()
    try:
        assert taken is early and fresh is not early  # taken once: a later `verify all` starts its own
        assert taken.result().ok and fresh.result().ok
    finally:
        taken.close()
        fresh.close()


def _pass2_processes(marker: str) -> set[int]:
    """Live PASS 2 processes whose environment holds `marker`."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if beside.PASS2_MODULE.encode() in cmdline and marker.encode() in environ:
            found.add(int(pid))
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_verify_all_starts_pass2_first_and_stops_it_on_bad_input(tmp_path):
    """`python -m rlvr_sweep.verify all` starts PASS 2's process before its own imports, so before it
    checks its arguments: a missing --tables folder is bad input (exit 2, before `run_all`), and the
    early process is stopped, not left running."""
    from tests.conftest import REPO

    marker = f"RLVR_SWEEP_TEST_MARKER={os.getpid()}_{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), marker.split("=")[0]: marker.split("=")[1]}
    proc = subprocess.Popen([sys.executable, "-m", "rlvr_sweep.verify", "all", str(tmp_path), "--tables",
                             str(tmp_path / "no_tables")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = set()
    while proc.poll() is None:
        seen |= _pass2_processes(marker)
        time.sleep(0.01)
    _, err = proc.communicate()
    assert proc.returncode == 2 and "no_tables: no such folder" in err
    assert seen, "no PASS 2 process was started"
    assert not _pass2_processes(marker)


def test_the_remembering_regrade_finds_what_the_plain_one_finds(tmp_path):
    root = tmp_path / "runs"
    runs = [write_run(root / f"smoke/ra_flat/h512_s{i}_abcd123{i}") for i in (1, 2)]
    rollouts = pd.read_parquet(runs[1] / "rollouts.parquet")
    rollouts.loc[3, "correct"] = 0.0  # the 1/2 = \frac{1}{2} rollout, which needs the sympy worker
    rollouts.to_parquet(runs[1] / "rollouts.parquet", index=False)
    cache: dict = {}
    for run in runs:
        plain, remembering = regrade_run(run), regrade_run(run, cache=cache)
        assert remembering["tables"] == plain["tables"]
        assert remembering["disagreements"] == plain["disagreements"]
    assert [d["key"].get("item_id", d["key"].get("index")) for d in remembering["disagreements"]] == [WRONG_ITEM, 3]
    assert remembering["disagreements"][1]["diffs"]["correct"] == {"stored": 0.0, "recomputed": 1.0}
    assert cache["baseline"][("1/2", r"\frac{1}{2}")] is True  # graded once, for both runs


def test_verify_imports_no_torch_until_a_pass_needs_it():
    from tests.conftest import REPO

    code = ("import sys, rlvr_sweep.verify, rlvr_sweep.verify.cli; "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert proc.stdout.strip() == "[]", proc.stderr  # PASS 2 runs torch in its own process


def test_pass1_hashing_the_folders_beside_the_regrade_reports_what_it_reports_alone(tmp_path):
    root = tmp_path / "runs"
    for i in (1, 2, 3):
        write_run(root / f"smoke/ra_flat/h512_s{i}_abcd123{i}")  # no manifest: each folder is damaged
    alone, forked = passes.pass1(root, jobs=1), passes.pass1(root, jobs=2)
    assert forked.summary == alone.summary and forked.problems == alone.problems
    assert "0/3 run folders intact" in alone.summary
    assert sum("manifest.json: missing" in p for p in alone.problems) == 3
    assert sum(WRONG_ITEM in p for p in alone.problems) == 3  # interleaved per run, in run order


def test_pass3_checking_the_ledgers_beside_the_table_builds_reports_what_it_reports_alone():
    from tests.analysis import handmade

    def tampered():
        sweep = handmade.sweep()
        sweep.pairs.loc[0, "category"] = "no_such_category"  # a ledger law broken
        return sweep

    alone = passes.pass3(None, None, load=tampered, jobs=1)
    beside = passes.pass3(None, None, load=tampered, jobs=2)
    assert beside.summary == alone.summary and beside.problems == alone.problems
    assert "28 pairs" in alone.summary and any("no_such_category" in p for p in alone.problems)


def test_pass1_split_between_two_processes_reports_what_one_reports(tmp_path):
    root = tmp_path / "runs"
    for i in range(1, 6):
        write_run(root / f"smoke/ra_flat/h512_s{i}_abcd123{i}")
    alone, split = passes.pass1(root, jobs=1), passes.pass1(root, jobs=2)  # 3 runs here, 2 in the child
    assert split.summary == alone.summary and split.problems == alone.problems
    assert "5 finished runs; 20 grades and 20 rollout rewards regraded; 0 step stds re-derived (grad_norm, loss, " \
           "seconds: the update's own measurements, not re-derivable); 0/5" in alone.summary
    assert [p.split()[1] for p in alone.problems if p.startswith("DISAGREE")] == [
        f"smoke/ra_flat/h512_s{i}_abcd123{i}" for i in range(1, 6)]  # in run order


def test_a_regrade_with_few_symbolic_answers_starts_one_worker(tmp_path):
    """Fewer than `CONCURRENT_FROM` answers for sympy are asked one at a time: one worker starts, not
    the pool (each start is some 0.6 s of imports)."""
    from rlvr_sweep.reward import grading
    from rlvr_sweep.verify.regrade import CONCURRENT_FROM

    run = write_run(tmp_path / "runs/smoke/ra_flat/h512_s1_abcd1231")  # one rollout needs sympy: 1/2 = \frac{1}{2}
    grading.shutdown()
    settled = time.monotonic() + 30
    while grading._WORKER._live and time.monotonic() < settled:
        time.sleep(0.05)
    try:
        assert grading._WORKER._live == 0 and CONCURRENT_FROM > 1
        result = regrade_run(run, cache={})
        assert result["tables"]["rollouts"]["checked"] == 4 and grading._WORKER._live == 1
    finally:
        assert grading.warm_up()

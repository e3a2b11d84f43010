"""PASS 4 on the test-time smoke sweep: passes when intact, and each of its checks catches a tampered row."""

from __future__ import annotations

import pytest

from rlvr_sweep.analysis import load_sweep
from rlvr_sweep.analysis.checkpoints import readouts_of
from rlvr_sweep.verify.margins import Loader, fork_margin_problems, probe_margin_problems
from rlvr_sweep.verify import testtime
from rlvr_sweep.verify.testtime import recount_problems, regrade_problems, run_pass4, structure_problems
from tests.sweeps import cli


@pytest.fixture(scope="module")
def sweep(testtime_sweep):
    return load_sweep(testtime_sweep)


def test_verify_all_runs_pass4(testtime_sweep, tmp_path):
    """Tables built from the root as typed relative to one folder verify from the root's absolute path
    (seen: PASS 4 failed on the probe's `path` column): saved paths are relative to the root."""
    tables = tmp_path / "tables"
    assert cli("rlvr_sweep.analysis", "tables", testtime_sweep.name, "--out", str(tables),
               "--resamples", "200", cwd=testtime_sweep.parent).returncode == 0
    proc = cli("rlvr_sweep.verify", "all", str(testtime_sweep.resolve()), "--tables", str(tables), "--margin-items", "2")
    lines = {line.split(":")[0]: line for line in proc.stdout.splitlines() if line.startswith("PASS")}
    assert lines.get("PASS 3 ok") and lines.get("PASS 4 ok"), proc.stdout[-4000:]
    p4 = lines["PASS 4 ok"]
    assert "regraded" in p4 and "3 saved tables (5A/5B) rebuilt" in p4 and "not checked" not in p4
    assert "5 read-outs and probe checkpoints credited by their model digests" in p4  # 3 read-outs, donor, recipient
    # two items of each of the 5 fork read-outs (3 runs: gate_flat base + trained, the evaluate run) and the probe
    assert "margins of 8 items match" in p4


def test_pass4_is_clean_on_the_stored_rows(sweep):
    summary, problems = run_pass4(sweep, margin_items=1)
    assert problems == [], problems[:5]
    assert "fork items" in summary and "probe items" in summary


def test_regrade_catches_a_flipped_grade(sweep):
    rows = sweep.readouts.copy()
    i = rows.index[rows["readout"] == "fork3"][3]
    rows.loc[i, "correct"] = not rows.loc[i, "correct"]
    checked, problems = regrade_problems(_with(sweep, readouts=rows), {})
    assert checked > 0 and len(problems) == 1 and "DISAGREE" in problems[0]
    probe = sweep.probes[0]
    bad = probe.rows.copy()
    bad.loc[0, "extracted"] = "12345"
    _, problems = regrade_problems(_with(sweep, probes=[_probe_with(probe, rows=bad)]), {})
    assert any("probe rows" in p for p in problems)


def test_structure_catches_moved_forks_caps_and_cuts(sweep):
    rows = sweep.readouts.copy()
    fork = rows.index[(rows["readout"] == "fork3") & (rows["branch"] == 1)][0]
    rows.loc[fork, "eff_cap"] += 1
    _, problems = structure_problems(_with(sweep, readouts=rows))
    assert any("eff_cap" in p for p in problems)
    rows = sweep.readouts.copy()
    draw = rows.index[rows["readout"] == "sampled_k3"][0]
    rows.loc[draw, "draw"] = 2  # item 0 now has draws 2, 1, 2
    _, problems = structure_problems(_with(sweep, readouts=rows))
    assert any("draws" in p for p in problems)
    probe = sweep.probes[0]
    bad = probe.rows.copy()
    cut = bad.index[bad["condition"] == "MismatchPrefix_1_donor"][0]
    bad.loc[cut, "prefix_len"] += 1
    _, problems = structure_problems(_with(sweep, probes=[_probe_with(probe, rows=bad)]))
    assert any("MismatchPrefix_1_donor" in p for p in problems)
    items = probe.items.copy()
    items.at[0, "mismatches"] = list(items.at[0, "mismatches"]) + [0]
    _, problems = structure_problems(_with(sweep, probes=[_probe_with(probe, items=items)]))
    assert any("mismatches" in p for p in problems)


def test_margins_catch_a_changed_margin(sweep, testtime_sweep):
    readout = next(r for r in readouts_of(sweep, "fork3") if r.phase == "eval")
    run = sweep.eval_runs[sweep.eval_runs["run_dir"] == readout.run_dir].iloc[0]
    loader = Loader("cpu")
    assert fork_margin_problems(readout, run, loader, 2)[::2] == (2, [])
    root = readout.rows.index[readout.rows["branch"] == 0][0]
    readout.rows = readout.rows.copy()
    readout.rows.at[root, "tf_margins"] = [m + 0.01 for m in readout.rows.at[root, "tf_margins"]]
    n, notes, problems = fork_margin_problems(readout, run, loader, 2)
    assert n == 2 and any("margins differ" in p for p in problems)
    probe = sweep.probes[0]
    items = probe.items.copy()
    items.at[0, "tf_top1"] = [t + 1 for t in items.at[0, "tf_top1"]]
    items.at[0, "tf_margins"] = [m + 1.0 for m in items.at[0, "tf_margins"]]
    _, _, problems = probe_margin_problems(_probe_with(probe, items=items), loader, 3)
    assert any("top-1 ids differ" in p for p in problems) and any("margins differ" in p for p in problems)


def test_recount_catches_a_changed_table(sweep, monkeypatch):
    assert recount_problems(sweep)[1] == []
    real = testtime.build_table5b

    def off_by_one(*args, **kwargs):
        table = real(*args, **kwargs)
        table.frame["tiegated.ties"] += 1
        return table

    monkeypatch.setattr(testtime, "build_table5b", off_by_one)
    assert any("ties" in p for p in recount_problems(sweep)[1])


def _with(sweep, **changes):
    import dataclasses

    return dataclasses.replace(sweep, **changes)


def _probe_with(probe, **changes):
    import dataclasses

    return dataclasses.replace(probe, **changes)

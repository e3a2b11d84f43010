"""Table 2B contrasts every arm row a sweep ran against its baseline arm (issue 35, item 1), on the hand-made
sweep of `handmade.py` (A = Arm 1 baseline, B = Arm 5 stopped_tree, C = ablate_skip, seed 101 only), with the
expected differences worked out from its grades; and the paper's rows it cannot build fold into one line."""

from __future__ import annotations

from html import escape, unescape

import pandas as pd
import pytest

from rlvr_sweep.analysis import Sweep, bootstrap_ci, build_tables, cli, item_matrix, parse_contrasts, save_tables
from rlvr_sweep.analysis.contrasts import (BASELINE_TITLE, CONTRASTS_FILE, baseline_contrasts, baseline_units,
                                           load_contrasts)
from rlvr_sweep.analysis.html_report import _table
from rlvr_sweep.verify.rebuild import markdown_problems, saved_problems
from tests.analysis import handmade
from tests.analysis.test_tables import CONTRASTS

A, B, C = "smoke/baseline/h512", "smoke/stopped_tree/h512", "smoke/ablate_skip/h512"


def table2b(sweep: Sweep, contrasts=None, baseline=None):
    return build_tables(sweep, contrasts, n_resamples=400, seed=0, only=["table2b"], baseline=baseline)["table2b"]


def without(arm: str) -> Sweep:
    t = handmade.tables()
    return Sweep.from_tables({name: frame[frame["arm"] != arm] for name, frame in t.items()})


def test_every_arm_row_against_arm_1_on_accuracy():
    sweep = handmade.sweep()
    t = table2b(sweep)
    # the smoke list's 15 rows need Arms 2-4, 6-13 or ablate_selective: none is built
    frame = t.frame.set_index("row")
    assert list(frame.index) == [101, 102] and set(frame["title"]) == {BASELINE_TITLE}
    assert list(frame["contrast"]) == ["5 - 1", "ablate_skip - 1"] and set(frame["metric"]) == {"correct"}
    assert set(frame["benchmark"]) == {"toy_heldout"}
    # B - A per seed: B answers (1,1,0,1) / (1,1,1,1) / (0,1,0,1), A (1,0,0,1) / (1,1,0,1) / (0,0,0,1):
    # one more item each, +25 pp
    assert frame.loc[101, "per_seed"] == [25.0, 25.0, 25.0] and frame.loc[101, "mean"] == 25.0
    assert frame.loc[101, "seeds"] == [42, 101, 7] and frame.loc[101, "n_items"] == 4
    _, _, ya = item_matrix(sweep, A, "toy_heldout")
    _, _, yb = item_matrix(sweep, B, "toy_heldout")
    for method in ("two_level", "question", "flat"):  # the same bootstrap as the declared rows
        _, lo, hi = bootstrap_ci(yb - ya, method, 400, 0)
        assert (frame.loc[101, f"{method}_lo"], frame.loc[101, f"{method}_hi"]) == pytest.approx((100 * lo, 100 * hi))
    # C ran seed 101 only: (1,1,0,0) against A's (1,1,0,1): one loss, -25 pp, no two-level interval
    assert frame.loc[102, "seeds"] == [101] and frame.loc[102, "mean"] == -25.0
    assert (frame.loc[102, "gains"], frame.loc[102, "losses"]) == (0, 1) and pd.isna(frame.loc[102, "two_level_lo"])
    shown = t.display.set_index("Row")
    assert shown.loc[101, "Contrast"] == "vs baseline: 5 - 1 (acc)" and shown.loc[101, "Mean diff (pp)"] == "+25.00"
    assert shown.loc[102, "Two-level 95% CI"] == "— (0 gains / 1 losses)"
    assert t.notes[1] == ("rows 101-102: each arm row against the baseline arm, 1. baseline, in accuracy on each "
                          "benchmark both read out (--baseline chooses it; a pair a row above contrasts is not repeated)")


def test_a_declared_row_is_not_repeated_and_row_numbers_never_collide():
    sweep = handmade.sweep()
    # CONTRASTS row 1 is 5 - 1 on accuracy; row 4 is ablate_skip - 1 on seed 101, every seed the two share
    assert baseline_contrasts(sweep, CONTRASTS) == []
    assert list(table2b(sweep, CONTRASTS).frame["row"]) == [1, 2, 3, 4]
    # either way round is the same contrast; another metric or a narrower seed filter is not
    reversed_ = parse_contrasts([{"row": 7, "a": "1", "b": "stopped_tree", "benchmark": "toy_heldout"}])
    assert [c.arms for c in baseline_contrasts(sweep, reversed_)] == [("ablate_skip", "1")]
    other = parse_contrasts([{"row": 250, "a": "5", "b": "1", "benchmark": "toy_heldout", "metric": "capped"},
                             {"row": 3, "a": "5", "b": "1", "benchmark": "toy_heldout", "seeds": [42]}])
    added = baseline_contrasts(sweep, other)
    assert [(c.row, c.arms, c.profile) for c in added] == [(301, ("5", "1"), "smoke"), (302, ("ablate_skip", "1"), "smoke")]
    assert list(table2b(sweep, other).frame["row"]) == [250, 3, 301, 302]


def test_the_baseline_arm_and_the_baseline_option():
    sweep = handmade.sweep()
    assert baseline_units(sweep) == {"smoke": A}
    assert baseline_units(sweep, "stopped_tree") == baseline_units(sweep, "5") == {"smoke": B}
    t = table2b(sweep, baseline="5").frame.set_index("row")
    assert list(t["contrast"]) == ["1 - 5", "ablate_skip - 5"]
    assert t.loc[101, "per_seed"] == [-25.0, -25.0, -25.0]
    # C (1,1,0,0) against B's seed 101 (1,1,1,1): two losses
    assert (t.loc[102, "mean"], t.loc[102, "losses"]) == (-50.0, 2)
    # without Arm 1: the lowest paper arm number (5) before an unnumbered row (ablate_skip)
    assert baseline_units(without("baseline")) == {"smoke": B}
    assert list(table2b(without("baseline")).frame["contrast"]) == ["ablate_skip - 5"]
    # an arm named baseline that is not the paper's Arm 1 still comes before Arm 5
    t = handmade.tables()
    t["runs"].loc[t["runs"]["arm"] == "baseline", "paper_arm"] = ""
    assert baseline_units(Sweep.from_tables(t)) == {"smoke": A}
    assert list(table2b(Sweep.from_tables(t)).frame["contrast"]) == ["5 - baseline", "ablate_skip - baseline"]


def test_an_unknown_baseline_names_the_close_arms():
    sweep = handmade.sweep()
    with pytest.raises(ValueError, match=r"--baseline 'basline': no arm row of the sweep is named so; did you mean baseline\?"):
        baseline_units(sweep, "basline")
    with pytest.raises(ValueError, match=r"'12': no arm row of the sweep is named so; did you mean 1\?$"):
        baseline_units(sweep, "12")
    with pytest.raises(ValueError, match=r"'xyz': no arm row of the sweep is named so; its arms: 1, 5, ablate_skip, "
                                         r"baseline, stopped_tree, baseline@h512, stopped_tree@h512, ablate_skip@h512$"):
        baseline_units(sweep, "xyz")


@pytest.mark.parametrize("command", ["tables", "report"])
def test_the_commands_refuse_an_unknown_baseline_in_one_line(command, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "load_sweep", lambda root, profile=None, where=(), **_: handmade.sweep())
    out = tmp_path / ("t" if command == "tables" else "r.html")
    assert cli.main([command, "sweep", "--out", str(out), "--baseline", "stoped_tree"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["analysis: error: --baseline 'stoped_tree': no arm row of the sweep is named so; did you mean "
                   "stopped_tree?"]
    assert not out.exists()


def test_report_takes_contrasts_and_baseline(tmp_path, monkeypatch):
    from rlvr_sweep.analysis import html_report

    seen = {}
    monkeypatch.setattr(cli, "load_sweep", lambda root, profile=None, where=(), **_: handmade.sweep())

    def write_report(sweep, root, out, **kwargs):
        seen.update(kwargs)
        out = tmp_path / "r.html"
        out.write_text("x")
        return out

    monkeypatch.setattr(html_report, "write_report", write_report)
    mine = tmp_path / "mine.yaml"
    mine.write_text("- {row: 1, a: '5', b: '1', benchmark: toy_heldout, metric: capped}\n")
    assert cli.main(["report", "sweep", "--out", str(tmp_path / "r.html"), "--contrasts", str(mine),
                     "--baseline", "stopped_tree"]) == 0
    assert seen["baseline"] == "stopped_tree" and seen["contrasts"] == load_contrasts(str(mine))


def test_the_rows_that_cannot_be_built_are_one_note_and_one_folded_line():
    t = table2b(handmade.sweep())
    absent = [n for n in t.notes if n.startswith("absent")]
    assert len(absent) == 1 and absent[0].startswith("absent: row 1 (6 - 5, toy_heldout): arm 6 not in the sweep; "
                                                     "row 3 (8 - 7, toy_heldout): arm 8, 7 not in the sweep; ")
    assert absent[0].count("; row ") == 14  # the smoke list's 15 rows
    md = t.markdown().splitlines()
    assert sum(line.startswith("- absent") for line in md) == 1
    page = _table(t)
    assert page.count("<details>") == 1 and page.count("<summary>") == 1
    assert escape("<details><summary>15 of the paper's contrasts cannot be built on this sweep</summary><ul><li>row 1 "
                  "(6 - 5, toy_heldout): arm 6 not in the sweep</li>") in escape(unescape(page))
    folded = page.split("<details>")[1].split("</details>")[0]  # the folded list, not the notes after it
    assert folded.count("<li>") == 15
    # a list of one's own is "the listed" contrasts
    mine = parse_contrasts([{"row": 1, "a": "13", "b": "12", "benchmark": "toy_heldout"}])
    assert "<summary>1 of the listed contrasts cannot be built on this sweep</summary>" in _table(table2b(handmade.sweep(),
                                                                                                       mine))


def test_saved_tables_rebuild_with_their_contrast_list(tmp_path):
    """verify rebuilds Table 2B from the list saved beside it, so tables.md's notes (the rows it could not
    build, the baseline) are checked too."""
    sweep = handmade.sweep()
    tables = build_tables(sweep, n_resamples=200, seed=3, only=["table1", "table2b"], baseline="5")
    save_tables(tables, tmp_path)
    listed = load_contrasts(str(tmp_path / CONTRASTS_FILE))
    assert [c.row for c in listed] == [*(c.row for c in load_contrasts("smoke")), 101, 102]
    assert listed[-1].arms == ("ablate_skip", "5") and listed[-1].profile == "smoke"
    rendered = {}
    assert saved_problems(sweep, tmp_path, names=["table1", "table2b"], rendered=rendered) == (2, [])
    assert markdown_problems(sweep, "x", tmp_path, rendered, notes=False) == (2, [])
    # a row dropped from the saved list: the rebuild's notes no longer say what tables.md says
    text = (tmp_path / CONTRASTS_FILE).read_text()
    (tmp_path / CONTRASTS_FILE).write_text("".join(text.splitlines(keepends=True)[1:]))
    rendered = {}
    saved_problems(sweep, tmp_path, names=["table1", "table2b"], rendered=rendered)
    problems = markdown_problems(sweep, "x", tmp_path, rendered, notes=False)[1]
    assert len(problems) == 1 and "differs from table2b's rebuild" in problems[0]
    # a table 2B that is not built leaves no list behind
    alone = Sweep.from_tables({name: frame[frame["arm"] == "baseline"] for name, frame in handmade.tables().items()})
    save_tables(build_tables(alone, only=["table2b"], n_resamples=10), tmp_path)
    assert not (tmp_path / CONTRASTS_FILE).exists() and not (tmp_path / "table2b.parquet").exists()


def test_each_profile_has_its_own_baseline_rows():
    """Two profiles: each one's rows against its own baseline arm, built in that profile only."""
    t = handmade.tables()
    paper = {name: frame.assign(run_hash=frame["run_hash"] + "p") for name, frame in t.items()}
    paper["runs"] = paper["runs"].assign(profile="paper", group_hash="paper/" + paper["runs"]["group_hash"])
    keep = paper["runs"]["arm"] != "baseline"  # the paper profile has no Arm 1: its baseline is Arm 5
    paper = {name: frame[keep] if name == "runs" else frame[frame["arm"] != "baseline"] for name, frame in paper.items()}
    sweep = Sweep.from_tables({name: pd.concat([t[name], paper[name]], ignore_index=True) for name in t})
    assert baseline_units(sweep) == {"paper": "paper/smoke/stopped_tree/h512", "smoke": A}
    frame = table2b(sweep).frame
    assert list(zip(frame["row"], frame["profile"], frame["contrast"])) == [
        (101, "paper", "ablate_skip - 5"), (102, "smoke", "5 - 1"), (103, "smoke", "ablate_skip - 1")]
    assert frame.set_index("row").loc[101, "mean"] == -50.0  # as with --baseline 5 on one profile

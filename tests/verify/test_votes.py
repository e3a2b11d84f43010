"""PASS 4 recounts the votes of Tables 4 and 5B with the paper's k = 3 rule written out again, so a
fault in the voting code that made the tables cannot vouch for itself."""

from __future__ import annotations

import pytest

from rlvr_sweep.analysis import build_tables
from rlvr_sweep.analysis import voting
from rlvr_sweep.verify.votes import plain_vote, table4_vote_problems, table5b_vote_problems
from tests.analysis import testtime_handmade as hm

CAP, MIN_LEN = 16, 2


@pytest.mark.parametrize("cands,rule,expected", [
    ([("5", 4, 1, None), ("5", 6, 1, None), ("6", 3, 0, None)], "mdl", (1.0, False)),  # e0 = e1: candidate 0
    ([("3", 4, 0, None), ("5", 6, 1, None), ("5", 3, 1, None)], "maxlen", (1.0, False)),  # e1 = e2: candidate 1
    ([("3", 10, 0, None), ("4", 5, 1, None), ("2", 1, 0, None)], "mdl", (1.0, False)),  # 1-1-1: shortest completed (L=1 < 2)
    ([("3", 10, 0, None), ("4", 5, 1, None), ("2", 1, 0, None)], "maxlen", (0.0, False)),  # longest: L=10
    ([("3", 10, 0, None), ("4", 5, 1, None), ("2", 1, 0, None)], "rand", (1 / 3, False)),
    ([("3", 10, 0, None), ("4", 5, 1, None), ("2", 1, 0, None)], "cr", (0.0, False)),  # root completed: keep it
    ([("", 16, 0, None), ("8", 1, 0, None), ("", 16, 1, None)], "mdl", (0.0, True)),  # none completed: shortest, fb
    ([("", 16, 0, None), ("4", 5, 1, None), ("9", 9, 0, None)], "cr", (1.0, False)),  # root capped: MDL
    ([("2", 4, 0, 4), ("1", 9, 1, None), ("7", 3, 0, None)], "mdl", (0.0, False)),  # 4 >= own cap 4: not completed
])
def test_the_written_out_rule_by_hand(cands, rule, expected):
    value, fallback = plain_vote(cands, rule, CAP, MIN_LEN)
    assert (pytest.approx(value), fallback) == expected


def test_tables_4_and_5b_recount_clean_and_a_fault_in_the_voting_code_is_caught(monkeypatch):
    """The hand-made test-time sweep recounts clean; with the voting code broken (MDL breaking ties by
    the longest candidate instead of the shortest) the tables change and the recount names them."""
    sweep = hm.sweep()
    tables = build_tables(sweep, n_resamples=50, only=["table4", "table5b"])
    assert table4_vote_problems(sweep, tables["table4"].frame)[1] == []
    assert table5b_vote_problems(sweep, tables["table5b"].frame)[1] == []
    real = voting._shortest
    monkeypatch.setattr(voting, "_shortest", lambda pool, ok, cands: (max(pool, key=lambda i: cands[i].length),
                                                                      real(pool, ok, cands)[1]))
    broken = build_tables(sweep, n_resamples=50, only=["table4", "table5b"])
    n4, problems4 = table4_vote_problems(sweep, broken["table4"].frame)
    n5, problems5 = table5b_vote_problems(sweep, broken["table5b"].frame)
    assert any("mdl-Maj@3" in p for p in problems4) and any("CR-Maj@3 count" in p for p in problems5)
    assert n4 > 0 and n5 > 0

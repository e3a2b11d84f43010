"""The one majority rule of every vote and of the tie-gated forks, by hand."""

import pytest

from rlvr_sweep.reward import answer_of, no_majority, plurality


@pytest.mark.parametrize("answers,leader", [
    (["7", "7", "8"], "7"),
    (["\\text{7}", "7", "8"], "7"),  # the grader's normalisation: \text{7} is 7
    (["7", "8", "9"], None),  # 1-1-1
    (["7", "7", "8", "8"], None),  # 2-2: no unique leader
    (["", "", "8"], None),  # an empty answer never forms a majority
    (["8"], None),  # one answer is no majority
])
def test_plurality_by_hand(answers, leader):
    assert plurality(answers) == leader


def test_a_capped_unboxed_response_answers_nothing():
    assert answer_of("12", True) == "" and answer_of("12", False) == "12" and answer_of(None, False) == ""
    rows = [{"extracted": "5", "capped_unboxed": False}, {"extracted": "5", "capped_unboxed": True},
            {"extracted": "6", "capped_unboxed": False}]
    assert no_majority(rows)  # the capped "5" is no vote for 5
    assert not no_majority(rows[:1] * 2)

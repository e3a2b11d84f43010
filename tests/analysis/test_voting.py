"""Voting rules, case by case as paper §5.5 (k = 3) and §5.6 item 3 (plurality for M = 3, 4, 5) write them.

A candidate is (answer, length, correct[, eff_cap]); cap 2048 and min_len 15 unless a test says otherwise.
"""

import pytest

from rlvr_sweep.analysis import Candidate, vote, vote_detail

RULES = ("rand", "maxlen", "mdl", "cr")


def pick(cands, rule, **kw):
    v = vote_detail(cands, rule, **kw)
    return v.index, v.value, v.fallback


# ---------------------------------------------------------------- §5.5 item 1: majorities, empties


@pytest.mark.parametrize("rule", RULES)
def test_e0_matching_e1_selects_candidate_0(rule):
    cands = [("7", 900, 1), ("7", 20, 0), ("3", 30, 0)]  # correctness may differ within an answer
    assert pick(cands, rule) == (0, 1.0, False)


@pytest.mark.parametrize("rule", RULES)
def test_e0_matching_e2_selects_candidate_0(rule):
    assert pick([("7", 900, 1), ("3", 20, 0), ("7", 30, 0)], rule) == (0, 1.0, False)


@pytest.mark.parametrize("rule", RULES)
def test_e1_matching_e2_selects_candidate_1(rule):
    assert pick([("3", 20, 0), ("7", 900, 1), ("7", 30, 0)], rule) == (1, 1.0, False)


@pytest.mark.parametrize("rule", RULES)
def test_answers_are_compared_after_the_baselines_normalisation(rule):
    # \dfrac -> \frac -> (1)/(2); \text{..} unwrapped; "A. 5" -> "5"
    assert pick([("\\dfrac{1}{2}", 40, 1), ("9", 20, 0), ("\\frac{1}{2}", 30, 1)], rule)[0] == 0
    assert pick([("4", 40, 0), ("\\text{5}", 20, 1), ("A. 5", 30, 1)], rule)[0] == 1


@pytest.mark.parametrize("rule", RULES)
def test_two_empty_answers_never_form_a_majority(rule):
    # e0 = e1 = "": a 1-1-1 tie, decided by the rule, not a majority for candidate 0
    v = vote_detail([("", 2048, 0), ("", 2048, 0), ("5", 300, 1)], rule)
    assert v.tie
    assert v.value == (pytest.approx(1 / 3) if rule == "rand" else 1.0)


# ---------------------------------------------------------------- §5.5 item 2: 1-1-1 ties


def test_rand_is_the_exact_expectation_on_a_1_1_1_tie():
    assert vote([("1", 10, 1), ("2", 20, 0), ("3", 30, 0)], "rand") == pytest.approx(1 / 3)
    assert vote([("1", 10, 1), ("2", 20, 1), ("3", 30, 0)], "rand") == pytest.approx(2 / 3)
    assert vote_detail([("1", 10, 1), ("2", 20, 0), ("3", 30, 0)], "rand").index is None


def test_maxlen_takes_the_longest_non_empty_answer():
    assert pick([("1", 100, 0), ("2", 300, 1), ("3", 200, 0)], "maxlen")[:2] == (1, 1.0)
    # an empty answer is never chosen over a non-empty one, however long
    assert pick([("", 2048, 0), ("2", 30, 1), ("3", 20, 0)], "maxlen")[:2] == (1, 1.0)
    # equal lengths: the lowest index
    assert pick([("1", 50, 0), ("2", 300, 1), ("3", 300, 0)], "maxlen")[:2] == (1, 1.0)
    # every answer empty: the longest overall, lowest index on ties
    assert pick([("", 900, 0), ("", 2048, 1), ("", 2048, 0)], "maxlen")[:2] == (1, 1.0)


def test_mdl_takes_the_shortest_eligible_candidate():
    # eligible: non-empty and 15 <= L < 2048; the 10-token guess is not, the 40-token one is
    assert pick([("1", 10, 0), ("2", 40, 1), ("3", 300, 0)], "mdl") == (1, 1.0, False)
    # the window's edges: L = 15 is in, L = 2047 is in, L = 2048 (the cap) is out
    assert pick([("1", 2048, 0), ("2", 2047, 1), ("3", 14, 0)], "mdl") == (1, 1.0, False)
    assert pick([("1", 15, 1), ("2", 16, 0), ("3", 2048, 0)], "mdl") == (0, 1.0, False)
    # an empty answer is never eligible, however short
    assert pick([("", 20, 0), ("2", 500, 1), ("3", 600, 0)], "mdl") == (1, 1.0, False)
    # equal lengths: the lowest index
    assert pick([("1", 90, 0), ("2", 40, 1), ("3", 40, 0)], "mdl") == (1, 1.0, False)


def test_mdl_falls_back_to_the_shortest_overall_and_says_so():
    # none eligible (too short, capped, empty): argmin L over all candidates, the `fb` of Table 4
    assert pick([("1", 2048, 0), ("2", 9, 1), ("", 12, 0)], "mdl") == (1, 1.0, True)
    # fallback ties: the lowest index
    assert pick([("", 2048, 0), ("", 2048, 1), ("", 2048, 0)], "mdl") == (0, 0.0, True)
    # a majority never falls back
    assert pick([("1", 2048, 1), ("1", 2048, 1), ("", 5, 0)], "mdl") == (0, 1.0, False)


def test_mdl_window_follows_the_cap_and_min_len_given():
    cands = [("1", 300, 0), ("2", 200, 1), ("3", 100, 0)]
    assert pick(cands, "mdl", cap=256, min_len=2)[0] == 2
    assert pick(cands, "mdl", cap=150, min_len=2)[0] == 2
    assert pick(cands, "mdl", cap=100, min_len=2) == (2, 0.0, True)  # 100 is at the cap: fallback
    assert pick(cands, "mdl", cap=2048, min_len=150)[0] == 1


def test_mdl_eff_cap_replaces_the_cap_per_candidate():
    # §5.6: a forked continuation stops at eff_cap_i = 2048 - max_j K_j + K_i; L >= eff_cap is a cap hit
    cands = [Candidate("1", 1500, 0), Candidate("2", 1400, 1, eff_cap=1400), Candidate("3", 1600, 0, eff_cap=1700)]
    assert pick(cands, "mdl")[0] == 0  # candidate 1 hit its own cap: not eligible
    assert pick([c._replace(eff_cap=None) for c in cands], "mdl")[0] == 1  # with the common 2048 it is


# ---------------------------------------------------------------- §5.6: CompletedRoot


def test_cr_keeps_a_completed_root_on_a_tie():
    assert pick([("1", 900, 1), ("2", 40, 0), ("3", 20, 0)], "cr") == (0, 1.0, False)  # MDL would take 2
    assert pick([("1", 900, 1), ("2", 40, 0), ("3", 20, 0)], "mdl")[0] == 2


def test_cr_falls_back_to_mdl_when_the_root_did_not_complete():
    assert pick([("1", 2048, 1), ("2", 40, 0), ("3", 20, 1)], "cr") == (2, 1.0, False)  # root capped
    assert pick([("1", 10, 1), ("2", 40, 1), ("3", 60, 0)], "cr") == (1, 1.0, False)  # root too short
    assert pick([("", 300, 0), ("2", 40, 0), ("3", 30, 1)], "cr") == (2, 1.0, False)  # root without an answer
    assert pick([("1", 2048, 0), ("2", 9, 1), ("", 30, 0)], "cr") == (1, 1.0, True)  # and MDL's own fallback


# ---------------------------------------------------------------- §5.6: plurality for M = 4, 5


@pytest.mark.parametrize("rule", RULES)
def test_unique_plurality_wins_for_m_4_and_5(rule):
    # 2-1-1: the pair wins, even over a shorter completed root or a longer other answer
    assert pick([("9", 30, 0), ("5", 900, 1), ("7", 20, 0), ("5", 800, 1)], rule)[:2] == (1, 1.0)
    # 3-2: the three win
    five = [("2", 30, 0), ("4", 500, 1), ("2", 20, 0), ("4", 700, 1), ("4", 600, 1)]
    assert pick(five, rule)[:2] == (1, 1.0)
    # 2-1-1-1 with M = 5
    assert pick([("1", 30, 0), ("2", 40, 0), ("3", 50, 0), ("4", 900, 1), ("4", 800, 1)], rule)[:2] == (3, 1.0)


@pytest.mark.parametrize("rule", ["mdl", "cr"])
def test_2_2_1_tie_takes_the_tied_answer_with_the_shortest_completed_branch(rule):
    # answers 5 (branches 0, 3) and 7 (1, 2) tie at 2; the lone 9 is shortest but not tied
    cands = [("5", 400, 1), ("7", 300, 0), ("7", 600, 0), ("5", 200, 1), ("9", 20, 0)]
    assert pick(cands, rule) == (3, 1.0, False)  # CR does not keep the root on a 2-2 tie
    # the shortest tied branch hit its cap: the shortest *completed* tied branch wins
    capped = [("5", 400, 0), ("7", 2048, 1), ("7", 600, 1), ("5", 900, 0), ("9", 20, 0)]
    assert pick(capped, rule) == (0, 0.0, False)
    capped[1] = ("7", 100, 1)
    assert pick(capped, rule) == (1, 1.0, False)
    # no tied branch completed: the shortest tied branch, flagged as a fallback
    none = [("5", 2048, 0), ("7", 2048, 1), ("7", 2048, 1), ("5", 10, 0), ("9", 300, 0)]
    assert pick(none, rule) == (3, 0.0, True)


def test_2_2_tie_for_m_4_under_rand_and_maxlen():
    cands = [("5", 400, 1), ("7", 300, 0), ("7", 600, 0), ("5", 200, 1)]
    assert vote(cands, "rand") == pytest.approx(0.5)  # uniform over the four tied branches
    assert pick(cands, "maxlen")[:2] == (2, 0.0)  # the longest tied branch
    assert pick(cands, "mdl")[:2] == (3, 1.0)


@pytest.mark.parametrize("m", [4, 5])
def test_no_repeated_answer_for_m_4_and_5(m):
    cands = [("1", 900, 0), ("2", 40, 1), ("3", 2048, 0), ("4", 10, 0), ("5", 45, 0)][:m]
    assert pick(cands, "mdl") == (1, 1.0, False)  # shortest completed branch overall
    assert pick(cands, "cr") == (0, 0.0, False)  # the root completed (15 <= 900 < 2048)
    assert vote(cands, "rand") == pytest.approx(1 / m)
    assert pick(cands, "maxlen")[0] == 2  # the longest non-empty, capped or not


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="maxlen"):
        vote([("1", 1, 1)], "majority")
    with pytest.raises(ValueError, match="at least one"):
        vote([], "mdl")

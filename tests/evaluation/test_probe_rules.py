"""Prefix-splice probe cuts on hand-made token lists (paper §5.6 items 1-2, Table 5A)."""

from __future__ import annotations

from rlvr_sweep.evaluation.probe import ProbeSettings
from rlvr_sweep.evaluation.probe_rules import (
    CONDITIONS, mismatch_cut, mismatch_positions, newline_cut, newline_positions, plan_cuts,
)

EOS, NL = 99, 0


def test_mismatches_are_where_the_recipient_argmax_leaves_the_donor():
    assert mismatch_positions([5, 6, 9, 8, 1], [5, 6, 7, 8, 2]) == [2, 4]
    assert mismatch_positions([1, 2, 3], [1, 2, 3]) == []


def test_mismatch_cuts_through_the_m_th_and_reuse_the_earlier_cut():
    assert [mismatch_cut([2, 9, 15], m, 20) for m in (1, 2, 3)] == [3, 10, 16]  # K = t*_m + 1
    assert [mismatch_cut([2, 9], m, 20) for m in (1, 2, 3)] == [3, 10, 10]  # fewer than 3: reuse the 2nd
    assert [mismatch_cut([7], m, 20) for m in (1, 2, 3)] == [8, 8, 8]
    assert mismatch_cut([], 1, 20) == 20  # no mismatch at all: the whole teacher-forced span (our choice)


def test_newline_cuts_count_from_the_minimum_position():
    tokens = [NL, 1, 2, NL, 4, 5, NL, 7, NL]
    lines = newline_positions(tokens, lambda t: t == NL, 5)
    assert lines == [6, 8]  # the newlines at 0 and 3 are before position 5
    assert (newline_cut(lines, 1, 9), newline_cut(lines, 2, 9)) == (7, 9)
    assert (newline_cut([6], 1, 9), newline_cut([6], 2, 9)) == (7, 7)  # one newline: the 2nd reuses the 1st
    assert newline_cut([], 1, 9) == 9


def plan(donor, recipient, mismatches, newlines, span, forks=(None, None), top1=None, top2=None, cuts=(3, 5)):
    n = len(recipient)
    return plan_cuts(donor=donor, recipient=recipient, mismatches=mismatches, newlines=newlines, span=span,
                     self_forks=forks, self_top1=top1 or list(recipient), self_top2=top2 or [50 + t for t in range(n)],
                     self_cuts=cuts, donor_cuts=cuts)


def test_every_condition_by_hand():
    donor = [10, 11, 12, NL, 14, 15, NL, 17, EOS]
    recipient = [10, 11, 20, 21, 22, 23, 24, EOS]
    cuts = plan(donor, recipient, mismatches=[2, 5], newlines=[3, 6], span=8, forks=(4, 2),
                top1=[10, 11, 20, 21, 30, 23, 24, EOS])
    assert list(cuts) == list(CONDITIONS)
    prefix = {name: p for name, (p, _) in cuts.items()}
    assert prefix["K0_none"] == []
    assert prefix["K96_self_ctrl"] == recipient[:3] and prefix["K160_self_ctrl"] == recipient[:5]
    assert prefix["MismatchPrefix_1_donor"] == donor[:3]  # through the mismatch at 2: A's token there kept
    assert prefix["MismatchPrefix_2_donor"] == donor[:6] and prefix["MismatchPrefix_3_donor"] == donor[:6]
    assert prefix["K_nl1_donor"] == donor[:4] and prefix["K_nl2_donor"] == donor[:7]
    assert prefix["K96_donor_full"] == donor[:3] and prefix["K160_donor_full"] == donor[:5]
    # self forks: B's tokens before t, then its teacher-forced top-2 at t; the identity control keeps B's token
    assert prefix["Self_MinMargin_Top2_Rank1"] == recipient[:4] + [54]
    assert prefix["Self_Identity_Ctrl_Rank1"] == recipient[:5]
    assert prefix["Self_MinMargin_Top2_Rank2"] == recipient[:2] + [52]
    assert prefix["Self_Identity_Ctrl_Rank2"] == recipient[:3]
    fork = cuts["Self_MinMargin_Top2_Rank1"][1]
    assert fork == {"fork_pos": 4, "orig_token": 22, "inserted_token": 54, "top1_token": 30}  # TF top-1 != recorded
    assert cuts["Self_Identity_Ctrl_Rank1"][1]["inserted_token"] == 22
    assert cuts["MismatchPrefix_2_donor"][1] == {"fork_pos": 5}


def test_short_responses():
    donor, recipient = [7, EOS], [8, EOS]
    cuts = plan(donor, recipient, mismatches=[0], newlines=[], span=2)
    # a cut through A's final EOS is A's complete response; no self fork position: no self rows
    assert cuts["K96_donor_full"][0] == [7, EOS] and cuts["K96_self_ctrl"][0] == [8, EOS]
    assert cuts["K_nl1_donor"][0] == [7, EOS]  # no newline: the span
    assert not any(name.startswith("Self_") for name in cuts)
    one = plan(donor, recipient, mismatches=[0], newlines=[], span=2, forks=(1, None))
    assert "Self_MinMargin_Top2_Rank1" in one and "Self_MinMargin_Top2_Rank2" not in one


def test_probe_settings_scale_the_paper_lengths():
    paper = ProbeSettings.scaled(1.0)
    assert (paper.cap, paper.tf_tokens, paper.self_cuts, paper.newline_min_pos, paper.margin_tokens,
            paper.fork_start, paper.fork_end, paper.min_continuation) == (2048, 160, (96, 160), 5, 72, 4, 64, 64)
    smoke = ProbeSettings.scaled(0.125, {"cap": 2048}, batch_size=32)
    assert (smoke.cap, smoke.tf_tokens, smoke.self_cuts, smoke.newline_min_pos, smoke.margin_tokens,
            smoke.fork_start, smoke.fork_end, smoke.min_continuation) == (256, 20, (12, 20), 1, 9, 1, 8, 8)
    assert smoke.fork_separation == 2 and smoke.continuation_batch_size == 64  # not lengths: never scaled

"""Fork positions on hand-made margin sequences (paper §5.6 items 2-3): every window edge, separation,
tie, threshold and fallback case the paper states, plus the choices it leaves open."""

from __future__ import annotations

import math
import random

import pytest

from rlvr_sweep.evaluation.fork_rules import (
    Slot, extra_first_gap_slots, first_gap_chain, first_gap_slots, hybrid_positions, min_margin_positions,
    smallest_margin, window,
)

W = dict(start=4, end=64)  # the paper's window, zero-based
HI = 9.0  # a confident position


def seq(n: int, **at: float) -> list[float]:
    """n confident margins with the given ones set: seq(8, t5=0.3) -> margin 0.3 at position 5."""
    margins = [HI] * n
    for key, value in at.items():
        margins[int(key[1:])] = value
    return margins


# ------------------------------------------------------------------ MinMargin (t_min1, t_min2)

def test_min_margin_picks_the_smallest_then_the_smallest_two_away():
    # 0.1 at 5 is t_min1; 0.2 at 6 is the unrestricted second smallest but adjacent: t_min2 is 0.4 at 9
    assert min_margin_positions(seq(12, t5=0.1, t6=0.2, t9=0.4), **W) == (5, 9)


def test_min_margin_second_fork_may_come_first_in_time():
    assert min_margin_positions(seq(12, t10=0.1, t4=0.3), **W) == (10, 4)


def test_min_margin_ignores_positions_outside_the_window():
    margins = seq(70, t1=0.0, t3=0.0, t64=0.0, t65=0.0, t20=2.0, t40=3.0)
    assert min_margin_positions(margins, **W) == (20, 40)  # 0.0 at 1, 3 (< 4) and at 64, 65 (>= 64) never count


def test_min_margin_separation_counts_both_sides_and_exactly_two_is_enough():
    # t_min1 = 7; 6 and 8 are adjacent (excluded), 5 and 9 are two away (allowed): 5 is smaller
    assert min_margin_positions(seq(12, t7=0.1, t6=0.2, t8=0.2, t5=0.5, t9=0.6), **W) == (7, 5)


def test_min_margin_equal_margins_go_to_the_earliest_position():
    assert min_margin_positions(seq(12, t6=0.3, t9=0.3, t11=0.3), **W) == (6, 9)
    assert smallest_margin([1.0, 1.0, 1.0], range(3)) == 0


def test_min_margin_on_a_root_shorter_than_the_window():
    assert min_margin_positions(seq(4), **W) == (None, None)  # ends before position 4: no fork at all
    assert min_margin_positions(seq(5, t4=0.2), **W) == (4, None)  # one position: no second fork
    assert min_margin_positions(seq(6, t4=0.2, t5=0.1), **W) == (5, None)  # 4 is adjacent to 5
    assert min_margin_positions(seq(7, t4=0.2, t5=0.1), **W) == (5, None)  # 6 too


def test_min_margin_skips_non_finite_margins():
    margins = seq(10, t5=math.nan, t6=0.4, t8=math.inf)
    t1, t2 = min_margin_positions(margins, **W)
    assert t1 == 6 and t2 not in (5, 8, 7)


def test_window_is_cut_at_the_margins():
    assert window([0.0] * 10, 4, 64) == range(4, 10)
    assert window([0.0] * 3, 4, 64) == range(4, 3)  # empty


# ------------------------------------------------------------------ FirstGap05

def test_first_gap_takes_the_first_two_non_adjacent_gaps_in_time():
    margins = seq(20, t5=0.45, t6=0.2, t9=0.5, t12=0.01)  # 6 adjacent to 5; 0.5 counts (<=); 12 is third
    assert first_gap_slots(margins, **W, threshold=0.5) == (Slot(5, "first_gap"), Slot(9, "first_gap"))
    assert first_gap_chain(margins, **W, threshold=0.5) == [5, 9, 12]


def test_first_gap_threshold_is_inclusive_and_strict_above():
    assert first_gap_slots(seq(10, t4=0.5, t7=0.5000001), **W, threshold=0.5)[0] == Slot(4, "first_gap")
    assert first_gap_slots(seq(10, t4=0.5, t7=0.5000001), **W, threshold=0.5)[1] == Slot(7, "fallback")


def test_first_gap_slot_two_falls_back_to_t_min2_with_one_gap():
    # one gap at 5 (0.4): slot 1 = 5; slot 2 = t_min2 = the smallest margin two away from t_min1 = 5
    margins = seq(12, t5=0.4, t8=1.5, t10=0.9)
    assert first_gap_slots(margins, **W, threshold=0.5) == (Slot(5, "first_gap"), Slot(10, "fallback"))


def test_first_gap_slot_two_falls_back_when_every_gap_is_adjacent():
    # gaps at 5 and 6 only (adjacent): slot 1 = 5; t_min1 = 6, so t_min2 is two away from 6 (not from 5):
    # 4 (0.8) is two away from 6 and smaller than 9 (0.9). The fallback lands next to slot 1, as the rule says.
    margins = seq(12, t5=0.4, t6=0.3, t4=0.8, t9=0.9)
    assert min_margin_positions(margins, **W) == (6, 4)
    assert first_gap_slots(margins, **W, threshold=0.5) == (Slot(5, "first_gap"), Slot(4, "fallback"))


def test_first_gap_both_slots_fall_back_without_any_gap():
    margins = seq(12, t7=0.7, t8=0.6, t11=0.9)
    assert first_gap_slots(margins, **W, threshold=0.5) == (Slot(8, "fallback"), Slot(11, "fallback"))


def test_first_gap_ignores_gaps_before_the_window():
    margins = seq(12, t2=0.0, t3=0.1, t6=0.3, t10=0.2)
    assert first_gap_slots(margins, **W, threshold=0.5) == (Slot(6, "first_gap"), Slot(10, "first_gap"))


def test_first_gap_on_short_roots():
    assert first_gap_slots(seq(3), **W, threshold=0.5) == (Slot(None, "fallback"), Slot(None, "fallback"))
    assert first_gap_slots(seq(5, t4=0.1), **W, threshold=0.5) == (Slot(4, "first_gap"), Slot(None, "fallback"))


def test_first_gap_separation_parameter():
    margins = seq(12, t4=0.1, t6=0.1, t7=0.1)
    assert first_gap_chain(margins, **W, threshold=0.5, sep=2) == [4, 6]
    assert first_gap_chain(margins, **W, threshold=0.5, sep=3) == [4, 7]


# ------------------------------------------------------------------ TieGated extras (FG3, FG4)

def test_tie_extras_continue_the_chain_of_gaps():
    margins = seq(20, t4=0.1, t7=0.2, t10=0.3, t13=0.4)
    fg = [s.position for s in first_gap_slots(margins, **W, threshold=0.5)]
    assert fg == [4, 7]
    assert extra_first_gap_slots(margins, **W, threshold=0.5, taken=fg, n=2) == [Slot(10, "first_gap"),
                                                                                 Slot(13, "first_gap")]


def test_tie_extra_falls_back_two_away_from_every_fork():
    # gaps at 4, 7, 10; FG4 falls back to the smallest margin two away from 4, 7 and 10: 3 is outside the
    # window, 5/6/8/9/11 are adjacent, so 13 (1.0) beats 15 (2.0)
    margins = seq(16, t4=0.1, t7=0.2, t10=0.3, t3=0.0, t5=0.6, t13=1.0, t15=2.0)
    assert extra_first_gap_slots(margins, **W, threshold=0.5, taken=[4, 7], n=2) == [Slot(10, "first_gap"),
                                                                                     Slot(13, "fallback")]


def test_tie_extras_after_fallback_slots_and_running_out():
    # no gap: FG1, FG2 fell back to t_min1 = 5, t_min2 = 8; FG3 = smallest two away from both: 11 (0.9);
    # FG4: nothing left two away from 5, 8 and 11 in [4, 12)
    margins = seq(12, t5=0.6, t8=0.7, t11=0.9, t6=0.65)
    fg = [s.position for s in first_gap_slots(margins, **W, threshold=0.5)]
    assert fg == [5, 8]
    assert extra_first_gap_slots(margins, **W, threshold=0.5, taken=fg, n=2) == [Slot(11, "fallback"),
                                                                                 Slot(None, "fallback")]


# ------------------------------------------------------------------ Hybrid

def test_hybrid_is_the_union_in_slot_order():
    assert hybrid_positions([12, 30], [5, 12]) == [12, 30, 5]
    assert hybrid_positions([12, 30], [12, 30]) == [12, 30]  # FirstGap05 fell back to MinMargin's forks
    assert hybrid_positions([6, None], [6, None]) == [6]
    assert hybrid_positions([None, None], [None, None]) == []


# ------------------------------------------------------------------ invariants on random sequences

@pytest.mark.parametrize("seed", range(40))
def test_rules_against_brute_force(seed):
    rng = random.Random(seed)
    n = rng.randint(0, 30)
    margins = [round(rng.choice([rng.uniform(0, 1), rng.uniform(0, 12)]), 1) for _ in range(n)]
    start, end, thr = 4, 20, 0.5
    pos = list(range(start, min(end, n)))
    t1, t2 = min_margin_positions(margins, start, end)
    if not pos:
        assert (t1, t2) == (None, None)
        return
    assert t1 == min(pos, key=lambda t: (margins[t], t))
    far = [t for t in pos if abs(t - t1) >= 2]
    assert t2 == (min(far, key=lambda t: (margins[t], t)) if far else None)
    s1, s2 = first_gap_slots(margins, start, end, thr)
    gaps = [t for t in pos if margins[t] <= thr]
    assert s1 == (Slot(gaps[0], "first_gap") if gaps else Slot(t1, "fallback"))
    later = [t for t in gaps if gaps and t >= gaps[0] + 2]
    assert s2 == (Slot(later[0], "first_gap") if later else Slot(t2, "fallback"))
    for s in (s1, s2):  # the paper: no fallback slot is below the threshold
        if s.source == "fallback" and s.position is not None:
            assert margins[s.position] > thr
    if s1.position is not None and s2.position is not None:
        assert s1.position != s2.position
    extras = extra_first_gap_slots(margins, start, end, thr, [s1.position, s2.position], 2)
    chosen = [p for p in (s1.position, s2.position, *(e.position for e in extras)) if p is not None]
    assert len(chosen) == len(set(chosen))

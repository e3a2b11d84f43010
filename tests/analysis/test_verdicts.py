"""Table 2B's verdicts (`analysis.verdicts`): detected, powered null, or inconclusive with the seeds it needs,
on rows made by hand, on Table 2B built from synthetic grids of known effect, and from the command line."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from rlvr_sweep.analysis import cli
from rlvr_sweep.analysis.contrasts import Contrast, build_table2b
from rlvr_sweep.analysis.verdicts import VerdictSettings, verdict

from tests.analysis import handmade


def row(lo, hi, holm, *, seeds=3, items=200, mean=0.0, var=(1e-4, 0.0, 0.0), family=1) -> dict:
    return {"two_level_lo": lo, "two_level_hi": hi, "holm_excludes_0": holm, "seeds": list(range(seeds)),
            "n_items": items, "mean": mean, "var_seed": var[0], "var_item": var[1], "var_interaction": var[2],
            "holm_family": family}


def seeds_by_hand(sd_seed: float, delta: float, power: float, family: int) -> int:
    """Only a seed component: the bootstrap's sd is sd_seed sqrt(S-1)/S, a rerun's sd_seed / sqrt(S); the first S
    whose chance of an interval at 1 - 0.05/family excluding 0 reaches `power` (the far tail counted too)."""
    z = norm.ppf(1 - 0.05 / (2 * family))
    for s in range(2, 201):
        boot, rerun = sd_seed * math.sqrt(s - 1) / s, sd_seed / math.sqrt(s)
        if norm.cdf((delta - z * boot) / rerun) + norm.cdf((-delta - z * boot) / rerun) >= power:
            return s
    raise AssertionError("not within 200 seeds")


def test_each_verdict_on_rows_made_by_hand():
    two = VerdictSettings(2.0, 0.8)
    assert verdict(row(np.nan, np.nan, None, seeds=1), two) == ("— (one seed)", None)
    assert verdict(row(-5.0, -0.5, True), two) == ("detected", None)
    assert verdict(row(0.2, 4.0, False), two)[0].startswith("inconclusive")  # excludes 0 unadjusted only
    assert verdict(row(-1.5, 1.2, False), two) == ("powered null (inside ±2)", None)
    assert verdict(row(-2.0, 2.0, False), two) == ("powered null (inside ±2)", None)  # the margin itself counts
    assert verdict(row(-1.5, 1.2, False), VerdictSettings(1.0))[0].startswith("inconclusive")


@pytest.mark.parametrize("family", [1, 4])
def test_an_inconclusive_row_needs_the_seeds_computed_by_hand(family):
    sd = 0.03  # 3 pp between seeds, nothing else
    need = seeds_by_hand(sd, 0.02, 0.8, family)
    text, seeds = verdict(row(-4.0, 4.0, False, var=(sd ** 2, 0.0, 0.0), family=family), VerdictSettings(2.0, 0.8))
    assert (text, seeds) == (f"inconclusive: needs about {need} seeds", need)
    assert need > seeds_by_hand(sd, 0.02, 0.8, 1) or family == 1  # a larger family needs more seeds


def test_inconclusive_rows_that_more_seeds_cannot_decide_say_why():
    settings = VerdictSettings(2.0, 0.8)
    # the items' own spread alone keeps the interval wider than any 2 pp test on 50 items
    text, seeds = verdict(row(-9.0, 9.0, False, items=50, var=(0.0, 0.3, 0.0)), settings)
    assert (text, seeds) == ("inconclusive: not within 200 seeds on these 50 items", None)
    # already at (more than) the seeds a 2 pp effect needs, yet neither decided: an effect near the margin
    text, seeds = verdict(row(0.5, 3.5, False, seeds=40, var=(1e-5, 0.0, 0.0)), settings)
    assert (text, seeds) == ("inconclusive: a difference near ±2 at 40 seeds", None)


@pytest.mark.parametrize("delta, power", [(0, 0.8), (-1, 0.8), (float("nan"), 0.8), (2, 0), (2, 1), (2, 1.5)])
def test_settings_out_of_range_are_refused_naming_the_option(delta, power):
    with pytest.raises(ValueError, match="--delta" if not (delta > 0) else "--power"):
        VerdictSettings(delta, power)


def test_table2b_gives_each_built_row_its_verdict():
    sweep = handmade.sweep()
    table = build_table2b(sweep, [Contrast(101, "", ("5", "1"), "toy_heldout"), Contrast(102, "", ("ablate_skip", "1"), "toy_heldout")], 400, 0)
    assert len(table.frame) == 2
    frame = table.frame
    assert list(table.display["Verdict"]) == list(frame["verdict"])
    assert list(frame["verdict"])[1] == "— (one seed)"  # ablate_skip ran one seed
    for _, r in frame.iloc[:1].iterrows():
        if r["holm_excludes_0"]:
            assert r["verdict"] == "detected"
        elif -2 <= r["two_level_lo"] and r["two_level_hi"] <= 2:
            assert r["verdict"].startswith("powered null")
        else:
            assert r["verdict"].startswith("inconclusive")
    assert set(frame["delta_pp"]) == {2.0} and set(frame["power_target"]) == {0.8}
    assert any(n.startswith("Verdict: ") for n in table.notes)


def test_tables_refuse_a_bad_delta_before_reading_anything(tmp_path, capsys):
    code = cli.main(["tables", str(tmp_path / "absent"), "--out", str(tmp_path / "out"), "--delta", "0"])
    assert code == 2
    assert "analysis: error: --delta 0.0: the smallest difference that matters" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_saved_table_is_rebuilt_with_its_own_settings():
    from rlvr_sweep.analysis.verdicts import saved_settings

    assert saved_settings(pd.DataFrame({"delta_pp": [1.5], "power_target": [0.9]})) == VerdictSettings(1.5, 0.9)
    assert saved_settings(pd.DataFrame({"row": [1]})) == VerdictSettings()  # saved before verdicts

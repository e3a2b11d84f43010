"""What each contrast of Table 2B could see (docs/planning.md): detected, a powered null, or inconclusive with
the seeds it would need.

A contrast is

- **detected** when Holm's decision over its benchmark's family excludes 0 (`contrasts.HOLM_ALPHA`, family-wise);
- a **powered null** when its two-level 95 % interval lies inside [-delta, +delta], delta the smallest difference
  the user calls meaningful (`--delta`, in pp): an equivalence statement, the interval-inclusion form of two
  one-sided tests (Schuirmann 1987), here at the 95 % interval, the stricter of the usual 90 % and 95 % forms;
- **inconclusive** otherwise, with the seeds that would decide it: the fewest at which an effect of delta is
  detected with the chosen power at the family's Bonferroni level (`power.seeds_for_effect`, the same number
  `analysis plan --effect delta` prints), from this contrast's own variance components.

One seed has no two-level interval, so no verdict ("one seed"). Nothing here changes a printed interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from rlvr_sweep.analysis.power import MAX_SEEDS, Components, seeds_for_effect

COMPONENT_COLUMNS = ("var_seed", "var_item", "var_interaction")  # Table 2B's columns (fractions squared)


@dataclass(frozen=True)
class VerdictSettings:
    """The difference that matters (`delta_pp`, percentage points) and the power a plan aims at."""

    delta_pp: float = 2.0
    power: float = 0.8

    def __post_init__(self):
        if not (isinstance(self.delta_pp, (int, float)) and math.isfinite(self.delta_pp) and self.delta_pp > 0):
            raise ValueError(f"--delta {self.delta_pp!r}: the smallest difference that matters must be a number of "
                             "percentage points above 0, e.g. 2")
        if not (isinstance(self.power, (int, float)) and 0 < self.power < 1):
            raise ValueError(f"--power {self.power!r}: a power is a probability strictly between 0 and 1, e.g. 0.8")


def verdict(row, settings: VerdictSettings) -> tuple[str, int | None]:
    """(the verdict's text, the seeds an inconclusive contrast needs or None) of one Table 2B row."""
    if pd.isna(row["two_level_lo"]) or row["holm_excludes_0"] is None:
        return "— (one seed)", None
    if bool(row["holm_excludes_0"]):
        return "detected", None
    delta = settings.delta_pp
    if -delta <= row["two_level_lo"] and row["two_level_hi"] <= delta:
        return f"powered null (inside ±{delta:g})", None
    if any(pd.isna(row.get(c)) for c in COMPONENT_COLUMNS):
        return "inconclusive", None
    c = Components(row["var_seed"], row["var_item"], row["var_interaction"], len(row["seeds"]), int(row["n_items"]),
                   row["mean"] / 100)
    need = seeds_for_effect(c, delta / 100, settings.power, family=max(int(row["holm_family"]), 1))
    if need is None:
        return f"inconclusive: not within {MAX_SEEDS} seeds on these {int(row['n_items'])} items", None
    if need <= c.seeds:
        return f"inconclusive: a difference near ±{delta:g} at {c.seeds} seeds", None
    return f"inconclusive: needs about {need} seeds", need


def with_verdicts(frame: pd.DataFrame, settings: VerdictSettings) -> pd.DataFrame:
    """`frame` (Table 2B's, with the Holm columns) with `verdict`, `verdict_seeds`, `delta_pp` and `power_target`."""
    frame = frame.copy()
    got = [verdict(r, settings) for _, r in frame.iterrows()]
    frame["verdict"] = [text for text, _ in got]
    frame["verdict_seeds"] = pd.array([need for _, need in got], dtype="Int64")
    frame["delta_pp"], frame["power_target"] = float(settings.delta_pp), float(settings.power)
    return frame


def verdict_note(settings: VerdictSettings) -> str:
    """The verdict column, said once under the table."""
    return (f"Verdict: detected = Holm's decision excludes 0; powered null = the two-level interval lies inside "
            f"±{settings.delta_pp:g} pp (--delta: the smallest difference that matters); inconclusive = neither, "
            f"with the seeds at which a {settings.delta_pp:g} pp effect is detected with power {settings.power:g} at "
            "the family's Bonferroni level, from the contrast's own variance components (`analysis plan`)")


def saved_settings(saved: pd.DataFrame) -> VerdictSettings:
    """The settings a saved Table 2B was built with (the defaults for one saved before verdicts)."""
    if "delta_pp" in saved.columns and len(saved):
        return VerdictSettings(float(saved["delta_pp"].iloc[0]), float(saved["power_target"].iloc[0]))
    return VerdictSettings()

"""PASS 1, the steps ledger's derived column: each step's `std` re-derived from its stored rewards.

A step row stores its rollouts' rewards and their std (unbiased, as `run.train.step_row` takes it of the
float32 rewards); the std is recomputed here and compared. The other measured columns of a step are the
update's own and cannot be re-derived from stored rows: `grad_norm` (the pre-clip norm of a backward
pass), `loss` and `seconds` (`NOT_REDERIVED`, named in the pass's summary). PASS 3's ledger laws check the
rest: token totals, the rewards against the rollouts, activity against the rewards.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

NOT_REDERIVED = ("grad_norm", "loss", "seconds")
STEPS_COLUMNS = ("step", "rewards", "std")


def std_of(rewards) -> float:
    """The unbiased std of a step's rewards, as float32 values (nan for a single reward)."""
    values = np.asarray(list(rewards), dtype=np.float32).astype(np.float64)
    return float(values.std(ddof=1)) if len(values) > 1 else math.nan


def std_problems(steps: pd.DataFrame | None) -> tuple[int, list[dict]]:
    """(steps checked, disagreements as `regrade` lists them) of a run's steps table."""
    if steps is None or not {"rewards", "std"} <= set(steps.columns):
        return 0, []
    found = []
    for step, rewards, stored in zip(steps["step"].tolist(), steps["rewards"].tolist(), steps["std"].tolist()):
        again = std_of(rewards) if rewards is not None else math.nan
        same = (math.isnan(again) and (stored is None or math.isnan(stored))) or (
            stored is not None and not math.isnan(again) and math.isclose(float(stored), again, rel_tol=1e-5,
                                                                          abs_tol=1e-6))
        if not same:
            found.append({"key": {"step": int(step)}, "diffs": {"std": {"stored": stored, "recomputed": again}}})
    return len(steps), found

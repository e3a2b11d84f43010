"""PASS 4: stored logit margins of bfloat16 models are exact multiples of 1/128 (seed paper §7, "k/128
dyadic margins").

A bfloat16 number of magnitude at least 1 carries 8 significant bits, so it is a multiple of 2^-7; the
difference of two such logits (top-1 minus top-2, computed exactly in float32) is then k/128 for an
integer k. A stored margin that is not, in a read-out or training run that ran in bfloat16, was not
computed from that model's logits, or was changed since. Checked: the fork read-outs' margin passes
(`tf_margins`) and branch margins, the probes' teacher-forced margins, and the fork pairs of Arms 14-19
(`fork_margin`, `min_margin`, `window_margins`). Margins of float32 runs (the smoke profile's tiny
model) are not dyadic and are not checked. Where the paper is silent: a logit of magnitude below 1 is
a finer multiple (bfloat16's spacing halves with each binade below 1), so a margin between two such
logits may fail this test legitimately; real models' top logits are far above 1.
"""

from __future__ import annotations

import math

import pandas as pd

from rlvr_sweep.analysis import Sweep

STEP = 1 / 128


def _dyadic(value) -> bool:
    return not math.isfinite(value) or abs(value / STEP - round(value / STEP)) < 1e-6


def _values(cell) -> list[float]:
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return []
    if isinstance(cell, (list, tuple)) or hasattr(cell, "tolist"):
        return [float(x) for x in (cell.tolist() if hasattr(cell, "tolist") else cell)]
    return [float(cell)]


def _frame_problems(frame: pd.DataFrame, columns, where) -> tuple[int, list[str]]:
    checked, problems = 0, []
    for column in columns:
        if column not in frame.columns:
            continue
        for i, cell in frame[column].items():
            values = _values(cell)
            checked += len(values)
            bad = [v for v in values if not _dyadic(v)]
            if bad:
                problems.append(f"{where(i)} {column}: {bad[0]!r} is not k/128, as a bfloat16 logit margin is")
    return checked, problems


def dyadic_problems(sweep: Sweep) -> tuple[int, list[str]]:
    """(margins checked, problems) over every bfloat16 read-out, probe and fork-pair ledger of the sweep."""
    checked, problems = 0, []
    runs = pd.concat([sweep.runs, sweep.eval_runs], ignore_index=True) if len(sweep.eval_runs) else sweep.runs
    bf16 = {d for d, c in zip(runs["run_dir"], runs["config"]) if isinstance(c, dict) and c.get("model.dtype") == "bfloat16"}
    rows = sweep.readouts
    if len(rows) and "readout" in rows.columns:
        forks = rows[(rows["readout"] == "fork3") & rows["run_dir"].isin(bf16)]
        n, more = _frame_problems(forks, ("tf_margins", "margin"),
                                  lambda i: f"{forks.at[i, 'run_dir']} item {forks.at[i, 'item_id']}")
        checked, problems = checked + n, problems + more
    for probe in sweep.probes:
        if probe.info.get("model_dtype") == "bfloat16":
            n, more = _frame_problems(probe.items, ("tf_margins", "self_tf_margins"),
                                      lambda i, p=probe: f"probe {p.path} item {p.items.at[i, 'index']}")
            checked, problems = checked + n, problems + more
    pairs = sweep.pairs
    if len(pairs) and "fork_margin" in pairs.columns:
        dirs = dict(zip(sweep.runs["run_hash"], sweep.runs["run_dir"]))
        mine = pairs[pairs["run_hash"].map(dirs).isin(bf16) & pairs["category"].isin(["cf_first_gap", "cf_min_margin"])]
        n, more = _frame_problems(mine, ("fork_margin", "min_margin", "window_margins"),
                                  lambda i: f"{mine.at[i, 'arm']} seed {mine.at[i, 'seed']} step {mine.at[i, 'step']} "
                                            f"pair {mine.at[i, 'k']}")
        checked, problems = checked + n, problems + more
    return checked, problems

"""Whether a search's best trial is told apart from the others, or within noise of them (docs/search.md).

An accuracy objective (`trained.<benchmark>`, `base.<benchmark>`, `eval.<benchmark>`) is read item by item
from the trials' runs (`grades.parquet`): the best trial and each other one are paired on the items they both
read out with the same seed, and McNemar's exact test (the binomial test of the discordant items,
`scipy.stats.binomtest`) asks whether their difference could be chance. A trial not told apart at 5 % (two-sided,
unadjusted: the generous side for the best) is *within noise* of the best, and the summary says so instead of
naming a winner alone. One seed per trial says nothing of seed-to-seed spread, which only widens the noise: the
line says how many seeds the comparison had. Another objective, or runs whose grades cannot be read, add nothing.
"""

from __future__ import annotations

from pathlib import Path

ACCURACY_PHASES = ("base", "trained", "eval")
ALPHA = 0.05


def outcomes(root: Path, trial: dict, objective: str) -> dict | None:
    """{(seed, item_id): correct} of a finished trial's runs on the objective's benchmark; None when it is not an
    accuracy objective or a run's grades cannot be read."""
    import pandas as pd

    phase, _, benchmark = objective.partition(".")
    if phase not in ACCURACY_PHASES or not benchmark or not isinstance(trial.get("runs"), list):
        return None
    out = {}
    for run in trial["runs"]:
        try:
            grades = pd.read_parquet(Path(root) / str(run["run_dir"]) / "grades.parquet",
                                     columns=["phase", "benchmark", "seed", "item_id", "correct"])
        except (OSError, ValueError, KeyError, TypeError, ImportError):
            return None
        mine = grades[(grades["phase"] == phase) & (grades["benchmark"] == benchmark)]
        out.update({(s, i): bool(c) for s, i, c in zip(mine["seed"], mine["item_id"], mine["correct"])})
    return out or None


def compared(root: Path, trials: list[dict], best: dict, objective: str) -> dict | None:
    """{"tied": [...], "apart": [...], "seeds": n}: each other finished trial against the best (module docstring),
    said as `trial 1: +2 of 200 items, p = 0.75`; None when it cannot be said."""
    from scipy.stats import binomtest

    others = [t for t in trials if t["status"] == "ok" and t["number"] != best["number"]]
    mine = outcomes(root, best, objective) if others else None
    if mine is None:
        return None
    tied, apart = [], []
    for trial in others:
        theirs = outcomes(root, trial, objective)
        if theirs is None:
            return None
        shared = [k for k in mine if k in theirs]
        wins = sum(mine[k] and not theirs[k] for k in shared)
        losses = sum(theirs[k] and not mine[k] for k in shared)
        p = binomtest(wins, wins + losses, 0.5).pvalue if wins + losses else 1.0
        said = f"trial {trial['number']}: {wins - losses:+d} of {len(shared)} items, p = {p:.2f}"
        (tied if p >= ALPHA else apart).append(said)
    return {"tied": tied, "apart": apart, "seeds": len({s for s, _ in mine})}


def noise_line(found: dict) -> str:
    """The summary's line for `compared`'s answer."""
    seeds = found["seeds"]
    over = f"{seeds} seed{'s' if seeds != 1 else ''} per trial, McNemar's exact test on paired items"
    if found["tied"]:
        others = len(found["tied"]) + len(found["apart"])
        return (f"within noise: the best is not told apart from {len(found['tied'])} of {others} other trial(s) at "
                f"{100 * ALPHA:g}% ({'; '.join(found['tied'])}; {over}): more seeds or items are needed to name a "
                "winner")
    return f"told apart: the best differs from every other trial at {100 * ALPHA:g}% ({'; '.join(found['apart'])}; {over})"

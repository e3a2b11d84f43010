"""Table 2B (seed paper §5.3): matched contrasts between arms, declared as data.

A contrast row (YAML, see `contrasts_paper.yaml`, the paper's 26 rows, and `contrasts_smoke.yaml`) names
arms a, b (and c, d for a 2x2 interaction) and a benchmark and metric (`correct` or `capped`). For each
seed the arms share and each item they all read out, d[seed, item] = y_a - y_b, or
(y_a - y_b) - (y_c - y_d); the table prints the per-seed differences, their mean and three bootstrap
intervals of it (`stats.bootstrap_ci`: two-level, question-clustered, flat), all in percentage
points. With one seed (row 12) the two-level interval is undefined and the gains / losses are shown.
A row whose arms or benchmark the sweep lacks is left out, with a note saying which.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from rlvr_sweep.analysis.render import Table, ci_text, num, per_seed
from rlvr_sweep.analysis.source import BENCHMARK_NAMES, Sweep, grade_rows, item_matrix, seed_order
from rlvr_sweep.analysis.stats import bootstrap_ci

SHIPPED = {"paper": "contrasts_paper.yaml", "smoke": "contrasts_smoke.yaml", "cf": "contrasts_cf.yaml",
           "smoke_cf": "contrasts_smoke_cf.yaml"}
METRICS = ("correct", "capped")
_KEYS = {"row", "title", "a", "b", "c", "d", "benchmark", "metric", "seeds"}


@dataclass(frozen=True)
class Contrast:
    row: int
    title: str
    arms: tuple[str, ...]  # (a, b) or (a, b, c, d)
    benchmark: str
    metric: str = "correct"
    seeds: tuple[int, ...] | None = None

    @property
    def name(self) -> str:
        a = self.arms
        return f"{a[0]} - {a[1]}" if len(a) == 2 else f"({a[0]} - {a[1]}) - ({a[2]} - {a[3]})"


def parse_contrasts(items, where: str = "contrasts") -> list[Contrast]:
    """Contrasts from a YAML list; an unknown key, metric or a half-given interaction names the row."""
    if not isinstance(items, list):
        raise ValueError(f"{where}: expected a YAML list of contrast rows")
    out = []
    for i, item in enumerate(items, start=1):
        at = f"{where} row {item.get('row', i) if isinstance(item, dict) else i}"
        if not isinstance(item, dict):
            raise ValueError(f"{at}: expected a mapping, got {item!r}")
        unknown = set(item) - _KEYS
        if unknown:
            raise ValueError(f"{at}: unknown keys {sorted(unknown)}; valid: {sorted(_KEYS)}")
        missing = [k for k in ("a", "b", "benchmark") if k not in item]
        if missing:
            raise ValueError(f"{at}: missing {missing}")
        if ("c" in item) != ("d" in item):
            raise ValueError(f"{at}: an interaction needs both c and d")
        metric = item.get("metric", "correct")
        if metric not in METRICS:
            raise ValueError(f"{at}: metric {metric!r}; valid: {list(METRICS)}")
        arms = tuple(str(item[k]) for k in ("a", "b", "c", "d") if k in item)
        seeds = tuple(int(s) for s in item["seeds"]) if item.get("seeds") is not None else None
        out.append(Contrast(int(item.get("row", i)), str(item.get("title", "")), arms, str(item["benchmark"]),
                            metric, seeds))
    return out


def load_contrasts(source: str = "paper") -> list[Contrast]:
    """A shipped list ("paper", "smoke") or a YAML file path."""
    if source in SHIPPED:
        text = resources.files("rlvr_sweep.analysis").joinpath(SHIPPED[source]).read_text()
        where = SHIPPED[source]
    else:
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"no contrast file {source!r} (shipped lists: {sorted(SHIPPED)})")
        text, where = path.read_text(), str(path)
    return parse_contrasts(yaml.safe_load(text), where)


def contrast_grid(sweep: Sweep, c: Contrast, profile: str | None = None) -> tuple[list, np.ndarray] | str:
    """(seeds, d (seeds, items)) of one contrast in one profile, or why it cannot be computed."""
    found = {}
    for ref in dict.fromkeys(c.arms):
        rows = sweep.candidates(ref, profile)
        if len(rows) > 1:  # several rows of one arm: the ones that read this benchmark out
            rows = [u for u in rows if len(grade_rows(sweep, u, c.benchmark, columns=("seed",)))] or rows
        found[ref] = rows
    absent = [ref for ref, rows in found.items() if not rows]
    if absent:
        return f"arm {', '.join(absent)} not in the sweep"
    for ref, rows in found.items():
        if len(rows) > 1:
            return (f"arm {ref} names {len(rows)} rows ({'; '.join(sweep.label(u) for u in rows)}): choose the "
                    "runs with --where or --profile")
    units = [found[ref][0] for ref in c.arms]
    mats = [item_matrix(sweep, u, c.benchmark, c.metric, seeds=c.seeds) for u in units]
    if any(not seeds for seeds, _, _ in mats):
        return f"no {c.benchmark} read-out for arm {', '.join(r for r, m in zip(c.arms, mats) if not m[0])}"
    seeds = sorted(set.intersection(*(set(m[0]) for m in mats)), key=seed_order)
    items = set.intersection(*(set(m[1]) for m in mats))
    if not seeds or not items:
        return "the arms share no seed" if not seeds else "the arms share no item"
    order = [i for i in mats[0][1] if i in items]
    y = [m[2][np.ix_([m[0].index(s) for s in seeds], [m[1].index(i) for i in order])] for m in mats]
    d = y[0] - y[1] if len(y) == 2 else (y[0] - y[1]) - (y[2] - y[3])
    return seeds, d


def contrast_row(c: Contrast, seeds: list, d: np.ndarray, n_resamples: int, seed: int) -> dict:
    """All the printed numbers of one contrast, in percentage points."""
    ci = {m: bootstrap_ci(d, m, n_resamples, seed) for m in ("question", "flat")}
    ci["two_level"] = bootstrap_ci(d, "two_level", n_resamples, seed) if len(seeds) > 1 else (np.nan,) * 3
    row = {"row": c.row, "title": c.title, "contrast": c.name, "arms": list(c.arms),
           "seed_filter": list(c.seeds) if c.seeds else None, "benchmark": c.benchmark, "metric": c.metric,
           "n_items": d.shape[1], "seeds": list(seeds), "per_seed": list(100 * d.mean(axis=1)),
           "mean": 100 * float(d.mean()), "gains": int((d > 0).sum()), "losses": int((d < 0).sum()),
           "n_resamples": n_resamples, "boot_seed": seed}  # kept so that verify can rebuild the intervals
    for m, (_, lo, hi) in ci.items():
        row.update({f"{m}_lo": 100 * lo, f"{m}_hi": 100 * hi})
    return row


def build_table2b(sweep: Sweep, contrasts: list[Contrast], n_resamples: int = 4000, seed: int = 0) -> Table:
    title = "Table 2B: matched two-level (seed x question) bootstrap contrasts (§5.3)"
    profiles = sorted(sweep.runs["profile"].unique()) if len(sweep.runs) else []
    rows, absent = [], []
    for c in contrasts:
        for profile in profiles:
            got = contrast_grid(sweep, c, profile)
            where = f" [{profile}]" if len(profiles) > 1 else ""
            if isinstance(got, str):
                absent.append(f"row {c.row}{where} ({c.name}, {c.benchmark}): {got}")
                continue
            rows.append({"profile": profile, **contrast_row(c, *got, n_resamples, seed)})
    notes = [f"{len(rows)} of {len(contrasts) * max(len(profiles), 1)} contrasts built; "
             f"{n_resamples} resamples, bootstrap seed {seed}"] + [f"absent: {a}" for a in absent]
    if not rows:
        why = "none of the contrasts' arms and benchmarks are in the sweep" if profiles else "the sweep has no runs"
        table = Table.unbuilt("table2b", title, why)
        table.notes = notes
        return table
    frame = pd.DataFrame(rows)
    return Table("table2b", title, frame, _display(frame, len(profiles) > 1), notes=notes)


def _display(frame: pd.DataFrame, with_profile: bool) -> pd.DataFrame:
    seed_sets = {tuple(x) for x in frame["seeds"]}
    shared = "/".join(str(x) for x in next(iter(seed_sets))) if len(seed_sets) == 1 else None
    seed_header = f"Per-seed diffs ({shared}, pp)" if shared else "Per-seed diffs (pp, seeds)"
    out = []
    for _, r in frame.iterrows():
        what = "AllCap" if r["metric"] == "capped" else "acc"
        diffs = per_seed(r["per_seed"], 2, True)
        d = {"Row": r["row"], "Contrast": f"{r['title'] + ': ' if r['title'] else ''}{r['contrast']} ({what})",
             "Benchmark (N)": f"{BENCHMARK_NAMES.get(r['benchmark'], r['benchmark'])} ({r['n_items']})",
             seed_header: diffs if shared else f"{diffs} ({'/'.join(str(x) for x in r['seeds'])})",
             "Mean diff (pp)": num(r["mean"], 2, True)}
        d["Two-level 95% CI"] = (ci_text(r["two_level_lo"], r["two_level_hi"]) if pd.notna(r["two_level_lo"])
                                 else f"— ({r['gains']} gains / {r['losses']} losses)")
        d["Q-clustered / Flat 95% CI"] = (f"{ci_text(r['question_lo'], r['question_hi'])} / "
                                          f"{ci_text(r['flat_lo'], r['flat_hi'])}")
        out.append({"Profile": r["profile"], **d} if with_profile else d)
    return pd.DataFrame(out)

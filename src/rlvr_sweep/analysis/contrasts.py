"""Table 2B (seed paper §5.3): matched contrasts between arms, declared as data.

A contrast row (YAML, see `contrasts_paper.yaml`, the paper's 26 rows, and `contrasts_smoke.yaml`) names
arms a, b (and c, d for a 2x2 interaction) and a benchmark and metric (`correct` or `capped`). For each
seed the arms share and each item they all read out, d[seed, item] = y_a - y_b, or
(y_a - y_b) - (y_c - y_d); the table prints the per-seed differences, their mean and three bootstrap
intervals of it (`stats.bootstrap_ci`: two-level, question-clustered, flat), all in percentage
points. With one seed (row 12) the two-level interval is undefined and the gains / losses are shown.
A row whose arms or benchmark the sweep lacks is left out; one note lists them all.

Besides the declared rows, `baseline_contrasts` contrasts every arm row a sweep ran against its baseline
arm (`baseline_units`: the paper's Arm 1, else an arm named `baseline`, else the row with the lowest paper
arm number, then by name; or the one chosen) on accuracy, on each benchmark both read out: rows titled
"vs baseline", numbered from the next hundred above the declared rows (101, ... beside the paper's 1-39),
leaving out a pair a declared row already contrasts. The table's full list is saved beside it
(`CONTRASTS_FILE`), so that `verify all --tables` rebuilds it, notes included, from the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from rlvr_sweep.analysis.multiplicity import bootstrap_p, holm
from rlvr_sweep.analysis.power import components
from rlvr_sweep.analysis.render import Table, ci_text, num, per_seed
from rlvr_sweep.analysis.source import BENCHMARK_NAMES, Sweep, grade_rows, is_paper_number, item_matrix, seed_order
from rlvr_sweep.analysis.stats import bootstrap_ci
from rlvr_sweep.analysis.verdicts import COMPONENT_COLUMNS, VerdictSettings, verdict_note, with_verdicts
from rlvr_sweep.config import did_you_mean

SHIPPED = {"paper": "contrasts_paper.yaml", "smoke": "contrasts_smoke.yaml", "cf": "contrasts_cf.yaml",
           "smoke_cf": "contrasts_smoke_cf.yaml"}
METRICS = ("correct", "capped")
_KEYS = {"row", "title", "a", "b", "c", "d", "benchmark", "metric", "seeds", "profile"}
BASELINE_TITLE = "vs baseline"  # the title of the rows `baseline_contrasts` adds
CONTRASTS_FILE = "table2b_contrasts.yaml"  # beside the saved tables: every row Table 2B was built from


@dataclass(frozen=True)
class Contrast:
    row: int
    title: str
    arms: tuple[str, ...]  # (a, b) or (a, b, c, d)
    benchmark: str
    metric: str = "correct"
    seeds: tuple[int, ...] | None = None
    profile: str | None = None  # only this profile's runs (the rows `baseline_contrasts` adds); None: each profile

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
        profile = str(item["profile"]) if item.get("profile") is not None else None
        out.append(Contrast(int(item.get("row", i)), str(item.get("title", "")), arms, str(item["benchmark"]),
                            metric, seeds, profile))
    return out


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's, where built: the same text, 3x sooner


def dump_contrasts(contrasts: list[Contrast]) -> str:
    """The YAML list `parse_contrasts` reads back as `contrasts`, one flow mapping a row (as the shipped lists)."""
    items = []
    for c in contrasts:
        item = {"row": c.row, "title": c.title, **dict(zip("abcd", c.arms)), "benchmark": c.benchmark, "metric": c.metric}
        item.update({k: v for k, v in (("seeds", list(c.seeds) if c.seeds else None), ("profile", c.profile)) if v})
        items.append("- " + yaml.dump(item, Dumper=_DUMPER, default_flow_style=True, sort_keys=False, width=10**6,
                                      allow_unicode=True))
    return "".join(items)


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


def _rows(sweep: Sweep, ref: str, benchmark: str, profile: str | None) -> list[str]:
    """The arm rows `ref` names in `profile` (`Sweep.candidates`, or an arm row's own id, as `baseline_contrasts`
    names a row no label singles out); of several, the ones that read `benchmark` out. Worked out once per
    sweep (`Sweep.once`): Table 2B asks it for every declared row against every arm row."""
    return list(sweep.once(("contrast_rows", ref, benchmark, profile),
                           lambda: tuple(_rows_now(sweep, ref, benchmark, profile))))


def _rows_now(sweep: Sweep, ref: str, benchmark: str, profile: str | None) -> list[str]:
    rows = sweep.candidates(ref, profile)
    if not rows and ref in sweep.units() and profile in (None, _profile_of(sweep, ref)):
        rows = [ref]
    if len(rows) > 1:  # several rows of one arm: the ones that read this benchmark out
        rows = [u for u in rows if len(grade_rows(sweep, u, benchmark, columns=("seed",)))] or rows
    if len(rows) > 1:  # of those, the arm's own preset, where one is (a search's trials beside it are not the arm)
        preset = [u for u in rows if sweep.at_preset(u)]
        rows = preset if len(preset) == 1 else rows
    return rows


def _profile_of(sweep: Sweep, unit: str) -> str:
    return str(sweep.names_of(unit)[0])


def contrast_grid(sweep: Sweep, c: Contrast, profile: str | None = None) -> tuple[list, np.ndarray] | str:
    """(seeds, d (seeds, items)) of one contrast in one profile, or why it cannot be computed."""
    found = {ref: _rows(sweep, ref, c.benchmark, profile) for ref in dict.fromkeys(c.arms)}
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
    at = [{i: k for k, i in enumerate(m[1])} for m in mats]  # each matrix's items are distinct
    y = [m[2][np.ix_([m[0].index(s) for s in seeds], [a[i] for i in order])] for m, a in zip(mats, at)]
    d = y[0] - y[1] if len(y) == 2 else (y[0] - y[1]) - (y[2] - y[3])
    return seeds, d


def _shown_name(sweep: Sweep, c: Contrast) -> str:
    """The contrast's name with each arm row named by its label where its reference is the row's own id (a row
    that no paper number, arm name or horizon singles out, `baseline_contrasts`): never a hash alone."""
    units = set(sweep.units())
    names = [sweep.label(ref) if ref in units else ref for ref in c.arms]
    return Contrast(c.row, c.title, tuple(names), c.benchmark).name


def contrast_row(c: Contrast, seeds: list, d: np.ndarray, n_resamples: int, seed: int) -> dict:
    """All the printed numbers of one contrast, in percentage points."""
    ci = {m: bootstrap_ci(d, m, n_resamples, seed) for m in ("question", "flat")}
    ci["two_level"] = bootstrap_ci(d, "two_level", n_resamples, seed) if len(seeds) > 1 else (np.nan,) * 3
    row = {"row": c.row, "title": c.title, "contrast": c.name, "arms": list(c.arms),
           "seed_filter": list(c.seeds) if c.seeds else None, "benchmark": c.benchmark, "metric": c.metric,
           "n_items": d.shape[1], "seeds": list(seeds), "per_seed": list(100 * d.mean(axis=1)),
           "mean": 100 * float(d.mean()), "gains": int((d > 0).sum()), "losses": int((d < 0).sum()),
           "n_resamples": n_resamples, "boot_seed": seed,  # kept so that verify can rebuild the intervals
           "p_two_level": bootstrap_p(d, n_resamples, seed) if len(seeds) > 1 else np.nan}
    for m, (_, lo, hi) in ci.items():
        row.update({f"{m}_lo": 100 * lo, f"{m}_hi": 100 * hi})
    parts = components(d) if len(seeds) > 1 and d.shape[1] > 1 else None  # what a verdict's seeds are planned from
    row.update(dict(zip(COMPONENT_COLUMNS, (parts.seed, parts.item, parts.interaction) if parts else (np.nan,) * 3)))
    return row


def build_table2b(sweep: Sweep, contrasts: list[Contrast], n_resamples: int = 4000, seed: int = 0,
                  listed: str = "the listed", verdicts: VerdictSettings = VerdictSettings()) -> Table:
    """Table 2B of `contrasts` (a declared list, with `baseline_contrasts` added by `build_tables`). The rows
    that cannot be built are one note; `listed` names whose they are in the report's folded summary of them
    ("the paper's" for a shipped list); `verdicts`: the difference that matters and the power of the verdict
    column (`analysis.verdicts`)."""
    title = "Table 2B: matched two-level (seed x question) bootstrap contrasts (§5.3)"
    profiles = sorted(sweep.runs["profile"].unique()) if len(sweep.runs) else []
    rows, absent, tried = [], [], 0
    for c in contrasts:
        for profile in profiles if c.profile is None else [p for p in profiles if p == c.profile]:
            tried += 1
            got = contrast_grid(sweep, c, profile)
            where = f" [{profile}]" if len(profiles) > 1 else ""
            if isinstance(got, str):
                absent.append(f"row {c.row}{where} ({c.name}, {c.benchmark}): {got}")
                continue
            rows.append({"profile": profile, **contrast_row(c, *got, n_resamples, seed),
                         "contrast": _shown_name(sweep, c)})
    planned = tried if profiles else len(contrasts)
    notes = [f"{len(rows)} of {planned} contrasts built; {n_resamples} resamples, bootstrap seed {seed}"]
    notes += _baseline_notes(sweep, contrasts, len(profiles) > 1)
    folded = {}
    if absent:  # one line however many: a sweep of two arms cannot build most of the paper's 26 rows
        notes.append("absent: " + "; ".join(absent))
        folded[notes[-1]] = (f"{len(absent)} of {listed} contrasts cannot be built on this sweep", absent)
    if not rows:
        why = "none of the contrasts' arms and benchmarks are in the sweep" if profiles else "the sweep has no runs"
        table = Table.unbuilt("table2b", title, why)
        table.notes, table.folded, table.side_files = notes, folded, {CONTRASTS_FILE: None}
        return table
    frame = with_verdicts(_with_holm(pd.DataFrame(rows)), verdicts)
    notes += [_holm_note(frame, len(profiles) > 1), verdict_note(verdicts)]
    return Table("table2b", title, frame, _display(frame, len(profiles) > 1), notes=notes, folded=folded,
                 side_files={CONTRASTS_FILE: dump_contrasts(contrasts)})


HOLM_ALPHA = 0.05  # the family-wise error rate of the Holm column


def _with_holm(frame: pd.DataFrame) -> pd.DataFrame:
    """`holm_family` (the contrasts reported on the row's benchmark, in its profile, with a two-level interval)
    and `holm_excludes_0` (Holm's decision at HOLM_ALPHA over that family; None without a two-level interval)."""
    frame = frame.copy()
    frame["holm_family"], frame["holm_excludes_0"] = 0, None
    frame["holm_excludes_0"] = frame["holm_excludes_0"].astype(object)
    tested = frame["p_two_level"].notna()
    for _, family in frame[tested].groupby(["profile", "benchmark"], sort=False):
        frame.loc[family.index, "holm_family"] = len(family)
        for index, rejected in zip(family.index, holm(family["p_two_level"].tolist(), HOLM_ALPHA)):
            frame.at[index, "holm_excludes_0"] = rejected
    return frame


def _holm_note(frame: pd.DataFrame, several_profiles: bool) -> str:
    """The families the Holm column adjusts over, said once."""
    sizes = frame[frame["holm_family"] > 0].groupby(["profile", "benchmark"], sort=False)["holm_family"].first()
    listed = ", ".join(f"{BENCHMARK_NAMES.get(b, b)}{f' [{p}]' if several_profiles else ''} {m}"
                       for (p, b), m in sizes.items()) or "none (no row has two seeds)"
    return (f"Holm {100 * HOLM_ALPHA:g}%: whether the two-level interval still excludes 0 when each benchmark's "
            f"contrasts reported here are one family (family-wise error {100 * HOLM_ALPHA:g}%; the two-level "
            f"bootstrap p-value, analysis/multiplicity.py); families: {listed}. The unadjusted interval stays the "
            "primary figure")


def _baseline_notes(sweep: Sweep, contrasts: list[Contrast], several_profiles: bool) -> list[str]:
    """What the "vs baseline" rows are, said once (from the rows, so that a rebuild from the saved list says it too)."""
    ours = [c for c in contrasts if c.title == BASELINE_TITLE]
    out = []
    for profile in dict.fromkeys(c.profile for c in ours):
        mine = [c for c in ours if c.profile == profile]
        ref = mine[0].arms[1]
        unit = next(iter(_rows(sweep, ref, mine[0].benchmark, profile)), None)
        rows = f"row {mine[0].row}" if len(mine) == 1 else f"rows {mine[0].row}-{mine[-1].row}"
        out.append(f"{rows}{f' [{profile}]' if several_profiles and profile else ''}: each arm row against the "
                   f"baseline arm, {sweep.label(unit) if unit else ref}, in accuracy on each benchmark both read out "
                   "(--baseline chooses it; a pair a row above contrasts is not repeated)")
    return out


# ---------------------------------------------------------------------------------------------
# the sweep's own rows: every arm row against its baseline arm


def _baseline_rank(sweep: Sweep, unit: str) -> tuple:
    """Which row of a profile is its baseline arm, smallest first: the paper's Arm 1, an arm named `baseline`
    (the shortest horizon first), the lowest paper arm number, then by name; of one arm's several rows, the
    one with the most runs."""
    _, paper_arm, arm, horizon = sweep.names_of(unit)
    pa, arm = str(paper_arm or ""), str(arm)
    tier = 0 if pa == "1" else 1 if arm == "baseline" else 2 if is_paper_number(pa) else 3
    return tier, int(pa) if is_paper_number(pa) else 0, pa or arm, int(horizon), -len(sweep.seeds_of(unit))


def arm_names(sweep: Sweep) -> list[str]:
    """Every name an arm row answers to: paper labels, arm names, `arm@h<horizon>`."""
    runs = sweep.runs
    if not len(runs):
        return []
    names = [*runs["paper_arm"], *runs["arm"], *(f"{a}@h{h}" for a, h in zip(runs["arm"], runs["horizon"]))]
    return list(dict.fromkeys(str(n) for n in names if n))


def baseline_units(sweep: Sweep, baseline: str | None = None) -> dict[str, str]:
    """{profile: its baseline arm row}: `_baseline_rank`'s first, or of the rows `baseline` names (a paper
    number or an arm name, as a contrast names arms). A name no row answers to is a ValueError that gives the
    close names; a profile without the named arm has no baseline."""
    units = sweep.units()
    if baseline is not None:
        named = sweep.candidates(str(baseline)) or ([baseline] if baseline in units else [])
        if not named:
            names = arm_names(sweep)
            hint = did_you_mean(str(baseline), names)
            raise ValueError(f"--baseline {baseline!r}: no arm row of the sweep is named so; "
                             + (hint or f"its arms: {', '.join(names[:12])}"))
        units = [u for u in units if u in named]
    out: dict[str, str] = {}
    for unit in sorted(units, key=lambda u: _baseline_rank(sweep, u)):
        out.setdefault(_profile_of(sweep, unit), unit)
    return dict(sorted(out.items()))


def _ref(sweep: Sweep, unit: str, profile: str) -> str:
    """The shortest name that singles `unit` out in its profile: its paper label, arm name, `arm@h<horizon>`,
    else the row's own id."""
    _, paper_arm, arm, horizon = sweep.names_of(unit)
    for ref in (paper_arm, arm, f"{arm}@h{horizon}"):
        if ref and sweep.candidates(str(ref), profile) == [unit]:
            return str(ref)
    return unit


def baseline_contrasts(sweep: Sweep, declared: list[Contrast], baseline: str | None = None) -> list[Contrast]:
    """Each arm row against its profile's baseline arm (`baseline_units`) on accuracy, on each benchmark both
    read out for a seed they share, unless a row of `declared` is that contrast (either way round, on every
    shared seed). Numbered from the next hundred above `declared`'s rows, so no row number is used twice."""
    start = 100 * (max((c.row for c in declared), default=0) // 100 + 1)
    out: list[Contrast] = []
    for profile, base in baseline_units(sweep, baseline).items():
        for unit in [u for u in sweep.units() if u != base and _profile_of(sweep, u) == profile]:
            for benchmark in sweep.benchmarks():
                seeds = [set(grade_rows(sweep, u, benchmark, columns=("seed",))["seed"]) for u in (unit, base)]
                shared = seeds[0] & seeds[1]
                if not shared or _declared(sweep, declared, {unit, base}, benchmark, profile, shared):
                    continue
                out.append(Contrast(start + len(out) + 1, BASELINE_TITLE,
                                    (_ref(sweep, unit, profile), _ref(sweep, base, profile)), benchmark, "correct",
                                    None, profile))
    return out


def _declared(sweep: Sweep, declared: list[Contrast], pair: set, benchmark: str, profile: str, seeds: set) -> bool:
    """Whether a declared row is the accuracy contrast of `pair` on `benchmark` over every seed in `seeds`."""
    for c in declared:
        if (len(c.arms) != 2 or c.metric != "correct" or c.benchmark != benchmark or c.profile not in (None, profile)
                or (c.seeds is not None and not seeds <= set(c.seeds))):
            continue
        rows = [_rows(sweep, ref, benchmark, profile) for ref in c.arms]
        if all(len(r) == 1 for r in rows) and {rows[0][0], rows[1][0]} == pair:
            return True
    return False


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
        d["Holm 5% (family)"] = ("—" if r["holm_excludes_0"] is None else
                                 f"{'excludes 0' if r['holm_excludes_0'] else 'includes 0'} (of {r['holm_family']})")
        d["Verdict"] = r["verdict"]
        out.append({"Profile": r["profile"], **d} if with_profile else d)
    return pd.DataFrame(out)

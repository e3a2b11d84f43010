"""PASS 3, tables: Tables 1-3 rebuild from the stored rows and agree with what the runs recorded.

- Table 1: every per-seed accuracy, rebuilt from the grade rows, equals the run's own `run.json`
  accuracy (trained and base read-outs, per source for Ext240); its token means (run.json totals)
  equal the means of the steps ledger's sums.
- Table 2A: the census rebuilt from the pair ledger (l_b, r_b of each pair in active steps) gives the
  same CapAssocActive and CapR0 counts as the rollout table it is built from.
- Table 3: steps and active steps equal run.json `totals`, each accuracy its run.json accuracy.
- With a folder of saved tables (`analysis tables --out DIR`), each saved table equals its rebuild
  (Table 2B and Table 4 with the resamples and bootstrap seed stored in them; Table 2B on the contrast rows
  saved beside it, `table2b_contrasts.yaml`, else on those its rows name), and
  `tables.md`, the copy a person reads, says what the rebuilds say: each of its tables' text equals its
  rebuild's rendering (`markdown_problems`), a block that holds numbers but no saved table to check them
  against is named, and its notes are the sweep's (the root's path aside). A "Not built" block holds no
  number and is only counted.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from rlvr_sweep.analysis import Sweep
from rlvr_sweep.analysis.contrasts import CONTRASTS_FILE, Contrast, build_table2b, load_contrasts
from rlvr_sweep.analysis.verdicts import saved_settings
from rlvr_sweep.analysis.report import TABLES, build_tables, parquet_safe, read_saved, table_notes
from rlvr_sweep.store import RUN_KEYS

_TOTALS = {"tok.gen": "gen_tokens", "tok.pref": "prefill_tokens", "tok.pad_pref": "padded_prefill_tokens",
           "tok.untrim_gen": "untrimmed_steps", "tok.bwd_out": "bwd_out_tokens", "tok.bwd_full": "bwd_full_tokens"}


def _close(a, b) -> bool:
    return a is not None and b is not None and bool(np.isclose(float(a), float(b), rtol=1e-9, atol=1e-9))


def table1_problems(sweep: Sweep) -> tuple[int, list[str]]:
    t1, problems, checked = build_tables(sweep, only=["table1"], reuse=True)["table1"], [], 0
    if t1.why:
        return 0, []
    ledger = sweep.steps.groupby(list(RUN_KEYS))[list(_TOTALS.values())].sum() if len(sweep.steps) else None
    for _, row in t1.frame.iterrows():
        if row.get("is_base") is True:
            continue
        runs = sweep.runs_of(row["unit"]).set_index("seed")
        for column in t1.frame.columns:
            bench = column[: -len(".per_seed")]
            if not column.endswith(".per_seed") or f"{bench}.seeds" not in row or not isinstance(row[column], list):
                continue  # accuracy columns only (allcap.per_seed counts cap hits)
            for seed, value in zip(row[f"{bench}.seeds"], row[column]):
                stored = runs.at[seed, f"accuracy.trained.{bench}"] if f"accuracy.trained.{bench}" in runs else None
                checked += 1
                if not _close(None if stored is None else 100 * stored, value):
                    problems.append(f"Table 1 {row['label']} seed {seed} {bench}: grades give {value:.4f}%, "
                                    f"run.json says {stored}")
        if ledger is not None:
            keyed = ledger.reindex(pd.MultiIndex.from_frame(sweep.runs_of(row["unit"])[list(RUN_KEYS)]))
            for column, ledger_column in _TOTALS.items():
                checked += 1
                if not _close(row.get(column), keyed[ledger_column].mean()):
                    problems.append(f"Table 1 {row['label']} {column}: run.json mean {row.get(column)}, "
                                    f"steps ledger mean {keyed[ledger_column].mean()}")
    base = sweep.grades[sweep.grades["phase"] == "base"] if len(sweep.grades) else sweep.grades
    run_rows = sweep.runs.groupby(list(RUN_KEYS), sort=False).indices if len(base) else {}
    for (*keys, bench), rows in (base.groupby([*RUN_KEYS, "benchmark"]) if len(base) else []):
        mine = sweep.runs.iloc[run_rows.get(tuple(keys), [])]
        stored = mine[f"accuracy.base.{bench}"] if f"accuracy.base.{bench}" in sweep.runs else []
        checked += 1
        if len(stored) != 1 or not _close(stored.iloc[0], rows["correct"].mean()):
            problems.append(f"Table 1 base row: run {keys} {bench}: grades give {rows['correct'].mean()}, "
                            f"run.json says {list(stored)}")
    return checked, problems


def census_from_pairs(steps: pd.DataFrame, pairs: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per run (indexed by run_hash): CapAssocActive, CapR0 and R = 0 leaves of active steps, from the
    pair ledger's (l_b, r_b), in one pass over the sweep's ledgers (an arm's numbers are its runs' sums)."""
    out = pd.DataFrame(0, index=pd.Index(runs["run_hash"].unique(), name="run_hash"),
                       columns=["cap_assoc_active", "capr0_leaves", "r0_leaves"])
    if not len(steps) or not len(pairs):
        return out
    active = steps.loc[steps["active"].astype(bool), ["run_hash", "step"]]
    p = pairs[pd.MultiIndex.from_frame(pairs[["run_hash", "step"]]).isin(pd.MultiIndex.from_frame(active))]
    cap = runs.drop_duplicates("run_hash").set_index("run_hash")["horizon_tokens"]
    p = p[p["run_hash"].isin(cap.index)]
    leaves = pd.DataFrame({"run_hash": np.concatenate([p["run_hash"].to_numpy()] * 2),
                           "step": np.concatenate([p["step"].to_numpy()] * 2),
                           "l": np.concatenate([p["l0"].to_numpy(), p["l1"].to_numpy()]),
                           "r": np.concatenate([p["r0"].to_numpy(), p["r1"].to_numpy()])})
    r0 = leaves[leaves["r"] == 0]
    r0 = r0.assign(capped=r0["l"].to_numpy() == cap.reindex(r0["run_hash"].to_numpy()).to_numpy())
    fill = lambda counts: counts.reindex(out.index, fill_value=0).astype(int)  # noqa: E731
    out["r0_leaves"] = fill(r0.groupby("run_hash").size())
    out["capr0_leaves"] = fill(r0.groupby("run_hash")["capped"].sum())
    per_step = r0.groupby(["run_hash", "step"])["capped"].all()  # every R = 0 leaf of the step at the cap
    out["cap_assoc_active"] = fill(per_step.groupby(level="run_hash").sum())
    return out


def table2a_problems(sweep: Sweep) -> tuple[int, list[str]]:
    t2a, problems, checked = build_tables(sweep, only=["table2a"], reuse=True)["table2a"], [], 0
    if t2a.why or not len(sweep.pairs):
        return 0, []
    per_run = census_from_pairs(sweep.steps, sweep.pairs, sweep.runs)
    for _, row in t2a.frame.iterrows():
        again = per_run.loc[list(sweep.runs_of(row["unit"])["run_hash"])].sum()
        for name in ("cap_assoc_active", "capr0_leaves", "r0_leaves"):
            checked += 1
            if int(again[name]) != row[name]:
                problems.append(f"Table 2A {row['label']} {name}: {row[name]} from the rollouts, {int(again[name])} "
                                "from the pairs")
    return checked, problems


def table3_problems(sweep: Sweep) -> tuple[int, list[str]]:
    t3, problems, checked = build_tables(sweep, only=["table3"], reuse=True)["table3"], [], 0
    if t3.why:
        return 0, []
    for _, row in t3.frame.iterrows():
        run = sweep.rows("runs", unit=row["unit"], seed=row["seed"]).iloc[0]
        pairs = [("steps", row["steps"], run.get("totals.steps")), ("active", row["active"], run.get("totals.active_steps"))]
        pairs += [(c, row[c], 100 * run.get(f"accuracy.trained.{c[:-4]}", np.nan))
                  for c in t3.frame.columns if c.endswith(".acc") and pd.notna(row[c])]
        for name, rebuilt, stored in pairs:
            checked += 1
            if not _close(rebuilt, stored):
                problems.append(f"Table 3 {row['label']} seed {row['seed']} {name}: rebuilt {rebuilt}, run.json {stored}")
    return checked, problems


def _comparable(frame: pd.DataFrame) -> pd.DataFrame:
    """Round-trip through parquet (as the saved table was), list cells as tuples for exact comparison."""
    buf = io.BytesIO()
    parquet_safe(frame).to_parquet(buf, index=False)
    return _tuples(pd.read_parquet(io.BytesIO(buf.getvalue())))


def _tuples(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object:
            out[column] = out[column].map(lambda v: tuple(v) if isinstance(v, (list, np.ndarray)) else v)
    return out


def rebuild_settings(name: str, saved: pd.DataFrame) -> dict | None:
    """The `build_tables` settings that rebuild a saved table as it was built (the bootstrap of Tables 4 and
    5B, the reference set of the strata); None for Table 2B, rebuilt on the contrasts it lists."""
    if name == "table2b":
        return None
    if name in ("table4", "table5b"):
        return {"n_resamples": int(saved["n_resamples"].iloc[0]), "seed": int(saved["boot_seed"].iloc[0])}
    if name == "strata":
        return {"strata_reference": tuple(saved["reference"].iloc[0].split(","))}
    return {}


class ContrastListError(ValueError):
    """The contrast list saved beside Table 2B cannot be read: a problem of the saved tables, said in one line."""


def _saved_contrasts(path: Path) -> list[Contrast]:
    """The rows Table 2B was built from (`CONTRASTS_FILE`); a file that is not such a list (edited, garbled,
    not text) is a ContrastListError naming it, never a traceback."""
    try:
        return load_contrasts(str(path))
    except (OSError, ValueError, TypeError, AttributeError, yaml.YAMLError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ContrastListError(f"its contrast list {path} cannot be read ({type(err).__name__}: {first}); "
                                "write the tables again with `python -m rlvr_sweep.analysis tables`") from None


def _rebuild(sweep: Sweep, name: str, saved: pd.DataFrame, tables_dir=None):
    settings = rebuild_settings(name, saved)
    if settings is None:  # Table 2B: every row it was built from (its notes name those it could not build)
        listed = Path(tables_dir) / CONTRASTS_FILE if tables_dir is not None else None
        contrasts = _saved_contrasts(listed) if listed is not None and listed.is_file() else \
            [Contrast(int(r["row"]), r["title"], tuple(r["arms"]), r["benchmark"], r["metric"],
                      None if r["seed_filter"] is None else tuple(int(s) for s in r["seed_filter"]))
             for _, r in saved.drop_duplicates("row").iterrows()]
        return build_table2b(sweep, contrasts, int(saved["n_resamples"].iloc[0]), int(saved["boot_seed"].iloc[0]),
                             verdicts=saved_settings(saved))
    return build_tables(sweep, only=[name], reuse=True, **settings)[name]


def saved_problems(sweep: Sweep, tables_dir, names=TABLES, rendered: dict | None = None) -> tuple[int, list[str]]:
    """Each table of `names` saved under `tables_dir` against its rebuild from the sweep's rows; `rendered`
    receives each rebuild's markdown, for `markdown_problems`."""
    checked, problems = 0, []
    for name in names:
        saved = read_saved(tables_dir, name)
        if saved is None:
            continue
        checked += 1
        try:
            rebuilt = _rebuild(sweep, name, saved, tables_dir)
        except ContrastListError as err:
            problems.append(f"{name}: {err}")
            continue
        if rebuilt.why:
            problems.append(f"{name}: saved, but it no longer rebuilds ({rebuilt.why})")
            continue
        if rendered is not None:
            rendered[name] = rebuilt.markdown()
        try:
            pd.testing.assert_frame_equal(_tuples(saved), _comparable(rebuilt.frame), check_exact=False, rtol=1e-9,
                                          check_dtype=False)
        except AssertionError as err:
            problems.append(f"{name}: the saved table differs from its rebuild: {str(err).splitlines()[0:3]}")
    return checked, problems


TABLES_MD = "tables.md"
_ROOT_NOTE = re.compile(r"^- sweep .*?: (?=\d+ of \d+ run folders used)")  # the root's path: where, not what


def markdown_problems(sweep: Sweep, root, tables_dir, rendered: dict[str, str], *, notes: bool = True,
                      elsewhere: int = 0) -> tuple[int, list[str]]:
    """(blocks and notes compared, problems) of `tables_dir/tables.md` against the rebuilds' renderings
    (`rendered`: {table: markdown}) and, with `notes`, the sweep's notes; (0, []) when the folder holds no
    tables.md. Up to `elsewhere` blocks with numbers that `rendered` lacks are left to the pass that rebuilds
    their tables (PASS 4's test-time tables); any more are named."""
    path = Path(tables_dir) / TABLES_MD
    if not path.is_file():
        return 0, []
    text = path.read_text(encoding="utf-8", errors="replace")
    head, *blocks = re.split(r"(?m)^(?=## )", text)
    expected = {md.split("\n", 1)[0]: (name, md) for name, md in rendered.items()}
    checked, problems, seen, unknown = 0, [], set(), []
    for block in blocks:
        title = block.split("\n", 1)[0]
        found = expected.get(title)
        if found is None:
            if re.search(r"(?m)^\|", block):
                unknown.append(title)
            continue  # "Not built: ...": no number to check
        name, md = found
        seen.add(title)
        checked += 1
        if block.strip() != md.strip():
            problems.append(f"{path}: '{title}' differs from {name}'s rebuild: {_first_difference(block, md)}")
    if len(unknown) > elsewhere:
        problems += [f"{path}: '{title}' holds a table with no saved parquet to check it against" for title in unknown]
    problems += [f"{path}: {rendered_title!r} ({name}) is saved but missing from it"
                 for rendered_title, (name, _) in expected.items() if rendered_title not in seen]
    if notes:
        wanted = [f"- {n}" for n in table_notes(sweep, root)]
        stored = [line for line in head.splitlines() if line.strip()]
        checked += len(stored)
        if [_ROOT_NOTE.sub("- ", n) for n in stored] != [_ROOT_NOTE.sub("- ", n) for n in wanted]:
            problems.append(f"{path}: its notes differ from the sweep's: "
                            f"{_first_difference(chr(10).join(stored), chr(10).join(wanted))}")
    return checked, problems


def _first_difference(saved: str, rebuilt: str) -> str:
    a, b = saved.strip().splitlines(), rebuilt.strip().splitlines()
    for x, y in zip(a, b):
        if x != y:
            return f"it says {x[:160]!r} where the rebuild says {y[:160]!r}"
    return f"{len(a)} lines where the rebuild has {len(b)}"

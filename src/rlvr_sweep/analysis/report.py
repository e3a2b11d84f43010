"""Every table of a sweep at once, and how they are saved: `<name>.parquet` (the numbers) and
`tables.md` (what `python -m rlvr_sweep.analysis tables` prints).

Table 2B's contrast list defaults to the shipped list of the sweep's profile (`smoke` for smoke
runs, the paper's 26 rows otherwise); any YAML list can be given instead. Either way, every arm row is
also contrasted with the sweep's baseline arm (`contrasts.baseline_contrasts`; `baseline` chooses it).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from rlvr_sweep.analysis.audit import build_audit
from rlvr_sweep.analysis.census import build_table2a
from rlvr_sweep.analysis.contrasts import Contrast, baseline_contrasts, build_table2b, load_contrasts
from rlvr_sweep.analysis.diagnostics import build_baseline_readouts, build_baseline_runs
from rlvr_sweep.analysis.ensembles import REFERENCE_ARMS, build_strata
from rlvr_sweep.analysis.forked import built
from rlvr_sweep.analysis.render import Table
from rlvr_sweep.analysis.source import Sweep
from rlvr_sweep.analysis.table1 import build_table1
from rlvr_sweep.analysis.table3 import build_table3
from rlvr_sweep.analysis.table4 import build_table4
from rlvr_sweep.analysis.table5a import build_table5a, build_table5a_tf
from rlvr_sweep.analysis.table5b import build_table5b
from rlvr_sweep.analysis.table5c import build_table5c
from rlvr_sweep.analysis.verdicts import VerdictSettings

TABLES = ("runs", "table1", "table2a", "table2b", "table3", "table4", "table5c", "audit", "baseline_readouts",
          "baseline_runs", "strata")  # PASS 3 rebuilds these
TEST_TIME_TABLES = ("table5a_tf", "table5a", "table5b")  # from probes and fork read-outs; PASS 4 rebuilds these
ALL_TABLES = (*TABLES, *TEST_TIME_TABLES)
# left out of a default build (not asked for by name) when the sweep has nothing for them
OPTIONAL_TABLES = ("table5c", "strata", *TEST_TIME_TABLES)
SELECTION = "selection.json"  # beside the saved tables: the --profile / --where they were built with


def default_contrasts(sweep: Sweep) -> list[Contrast]:
    """The shipped lists of the sweep's profiles (`smoke` for smoke runs, `paper` otherwise), each with
    its counterfactual rows (`cf`, `smoke_cf`) when the sweep holds a counterfactual arm (14-19)."""
    profiles = sorted(sweep.runs["profile"].unique()) if len(sweep.runs) else []
    lists = dict.fromkeys("smoke" if p == "smoke" else "paper" for p in profiles) or {"paper": None}
    has_cf = len(sweep.runs) and sweep.runs["paper_arm"].isin([str(a) for a in range(14, 20)]).any()
    names = [n for name in lists for n in (name, f"{name}_cf" if name == "smoke" else "cf")[: 2 if has_cf else 1]]
    return [c for name in names for c in load_contrasts(name)]


def table2b_contrasts(sweep: Sweep, contrasts: list[Contrast] | None = None,
                      baseline: str | None = None) -> list[Contrast]:
    """Table 2B's rows: `contrasts` (None: `default_contrasts`), then each arm row against the baseline arm."""
    declared = default_contrasts(sweep) if contrasts is None else list(contrasts)
    return declared + baseline_contrasts(sweep, declared, baseline)


def build_tables(sweep: Sweep, contrasts: list[Contrast] | None = None, n_resamples: int = 4000,
                 seed: int = 0, only=ALL_TABLES, strata_reference=REFERENCE_ARMS, reuse: bool = False,
                 jobs: int = 1, baseline: str | None = None, verdicts: VerdictSettings = VerdictSettings()
                 ) -> dict[str, Table]:
    """{name: Table} for the names in `only`; a table that cannot be built carries its reason.
    `contrasts`: Table 2B's declared rows (None: the shipped list of the sweep's profiles); `baseline`: the arm
    every arm row is also contrasted with there (a paper number or name; None: `contrasts.baseline_units`'s
    choice); `verdicts`: the difference that matters and the power of Table 2B's verdicts. `strata_reference`: the arms whose checkpoints define the item strata (default Arms 1-9). `reuse`:
    a table this sweep object has built before with the same settings is returned again, not rebuilt
    (verify builds each several times; off by default, so code changed in a session is seen). `jobs`:
    processes to build them on (`analysis.forked`; the tables are the same)."""
    unknown = [n for n in only if n not in ALL_TABLES]
    if unknown:
        raise ValueError(f"unknown table(s) {unknown}; valid: {list(ALL_TABLES)}")
    builders = {
        "runs": lambda: build_runs_table(sweep),
        "table1": lambda: build_table1(sweep),
        "table2a": lambda: build_table2a(sweep),
        "table2b": lambda: build_table2b(sweep, table2b_contrasts(sweep, contrasts, baseline), n_resamples, seed,
                                         "the paper's" if contrasts is None else "the listed", verdicts),
        "table3": lambda: build_table3(sweep),
        "table4": lambda: build_table4(sweep, n_resamples, seed),
        "table5c": lambda: build_table5c(sweep, n_resamples, seed),
        "audit": lambda: build_audit(sweep),
        "baseline_readouts": lambda: build_baseline_readouts(sweep),
        "baseline_runs": lambda: build_baseline_runs(sweep),
        "strata": lambda: build_strata(sweep, strata_reference),
        "table5a_tf": lambda: build_table5a_tf(sweep),
        "table5a": lambda: build_table5a(sweep),
        "table5b": lambda: build_table5b(sweep, n_resamples, seed),
    }
    keys = {"table2b": None, "table4": (n_resamples, seed), "table5c": (n_resamples, seed),
            "table5b": (n_resamples, seed), "strata": tuple(strata_reference)}  # the others depend on the sweep alone
    def build_one(name: str) -> Table:
        if reuse and not (name in keys and keys[name] is None):
            return sweep.once(("table", name, keys.get(name)), builders[name])
        return builders[name]()

    tables = built(only, build_one, jobs)
    if reuse and jobs > 1:  # tables built in a child are this process's to reuse too
        for name, table in tables.items():
            if not (name in keys and keys[name] is None):
                sweep.once(("table", name, keys.get(name)), lambda table=table: table)
    return tables


def build_runs_table(sweep: Sweep) -> Table:
    """Every run folder the sweep saw (relative to its root): the row it stands behind, or why not."""
    title = "Runs: every run folder found, and the row of the tables it stands behind"
    frame = sweep.provenance.copy()
    if not len(frame):
        return Table.unbuilt("runs", title, "no run folder found")
    frame["run_dir"] = [sweep.relative(d) for d in frame["run_dir"]]
    frame = frame.sort_values(["used", "run_dir"], ascending=[False, True], kind="stable").reset_index(drop=True)
    frame["seed"] = frame["seed"].astype("Int64")
    display = pd.DataFrame({"Run folder": frame["run_dir"], "Seed": frame["seed"].astype(str).replace("<NA>", ""),
                            "Row": frame["row"].astype(object).fillna(""),  # object: all missing is float64
                            "Left out because": frame["why"].astype(object).fillna("")})
    used = int(frame["used"].sum())
    return Table("runs", title, frame, display, notes=[f"{used} of {len(frame)} run folders stand behind the tables"])


def header_lines(sweep: Sweep, root) -> list[str]:
    """What a reader must know before the tables: how many runs, which rows were split, what was left out."""
    kept = int(sweep.provenance["used"].sum()) if len(sweep.provenance) else len(sweep.runs)
    out = [f"sweep {root}: {kept} of {len(sweep.provenance)} run folders used ({len(sweep.runs)} training runs in "
           f"{len(sweep.units())} arm rows, {len(sweep.eval_runs)} read-outs of checkpoints); benchmarks "
           f"{sweep.benchmarks()}; every folder and its row: the runs table"]
    left = len(sweep.provenance) - kept
    if left:
        out.append(f"{left} run folder(s) left out (see the runs table and the notes below)")
    data_line = data_header(sweep)
    return out + ([data_line] if data_line else []) + [n for n in sweep.notes if " rows (their runs differ" in n or n.startswith("selected ")]


def table_notes(sweep: Sweep, root) -> list[str]:
    """The notes heading `tables.md`: `header_lines`, then the sweep's other notes (what `analysis tables`
    writes, and what `verify all --tables` expects to find)."""
    header = header_lines(sweep, root)
    return [*header, *(n for n in sweep.notes if n not in header)]


def data_header(sweep: Sweep) -> str | None:
    """Whether the runs read the study's canonical data files (run.json `data_canonical`)."""
    runs = pd.concat([sweep.runs, sweep.eval_runs], ignore_index=True) if len(sweep.eval_runs) else sweep.runs
    if not len(runs):
        return None
    flags = runs["data_canonical"] if "data_canonical" in runs.columns else pd.Series([None] * len(runs))
    yes = int((flags == True).sum())  # noqa: E712 (a column of True / False / None)
    no = runs.loc[flags == False, "run_dir"] if "run_dir" in runs.columns else []  # noqa: E712
    parts = [f"{yes} of {len(runs)} runs read the canonical data files"] if yes else []
    if len(no):
        parts.append(f"{len(no)} read data files that differ from them ({', '.join(sweep.relative(d) for d in no[:3])}"
                     + (", ..." if len(no) > 3 else "") + "; python -m rlvr_sweep.data check)")
    rest = len(runs) - yes - len(no)
    if rest:
        parts.append(f"{rest} read no file with a canonical version (the toy task, data of their own, or not recorded)")
    return "data: " + "; ".join(parts)


def parquet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """List-valued columns (per-seed values) with a missing cell: the cell becomes None, which parquet
    stores as a null list instead of failing on a float NaN."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object and out[column].map(lambda v: isinstance(v, list)).any():
            out[column] = out[column].map(lambda v: v if isinstance(v, list) else None)
    return out


def save_tables(tables: dict[str, Table], out, notes=()) -> list[Path]:
    """Write each built table's numbers as parquet (with its side files: Table 2B's contrast rows) and all of
    them as one markdown file."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in tables.items():
        path = out / f"{name}.parquet"
        for side, text in table.side_files.items():
            if text is None or table.why:
                (out / side).unlink(missing_ok=True)
            else:
                (out / side).write_text(text)
                written.append(out / side)
        if table.why:
            path.unlink(missing_ok=True)  # a stale file from an earlier build would pass for this one
            continue
        parquet_safe(table.frame).to_parquet(path, index=False)
        written.append(path)
    text = "\n\n".join([*(f"- {n}" for n in notes)] + [t.markdown() for t in tables.values()]) + "\n"
    (out / "tables.md").write_text(text)
    return [*written, out / "tables.md"]


def read_saved(out, name: str) -> pd.DataFrame | None:
    path = Path(out) / f"{name}.parquet"
    return pd.read_parquet(path) if path.is_file() else None

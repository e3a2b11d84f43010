"""A sweep as analysis sees it: the collated tables, its runs grouped by identity into arm rows.

`load_sweep(root)` wraps `rlvr_sweep.store.collect` and adds what the tables need to be grouped:
`unit` (the run's `group_hash`: the runs whose identities differ only in the seed, `analysis.grouping`),
a printable `label` ("5. stopped_tree", "12. stopped_tree h1024", "ablate_skip"; rows that would print
alike say how they differ), and from each run's stored config.yaml the profile's `length_scale`, the
`optimizer_step` / `accumulate_questions` that PASS 3 needs and the whole flattened config (`config`,
what `--where` selects on). Runs of one arm with other settings or inputs are other rows: nothing is
pooled as seeds by name, nothing replaced by the newest. `provenance` names every run folder the sweep
saw and whether it stands behind a row (and which) or why not. `item_matrix` aligns one arm's per-item
outcomes across seeds for the bootstrap (paper §5.3).

Test-time read-outs stay out of the training tables: `grades` holds the greedy read-outs of training
runs only; `task=evaluate` runs (read-outs of saved checkpoints) are `eval_runs`, and their rows plus
the sampled / forked rows of training runs are `readouts` (Tables 4, 5B and the batch audit group them
by checkpoint: `analysis.checkpoints`). Prefix-splice probe folders under the root are `probes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rlvr_sweep.analysis.grouping import distinguish, identity_settings, parse_where, read_config, select_runs, split_notes
from rlvr_sweep.analysis.probes import load_probes
from rlvr_sweep.analysis.row_names import composed_beside, name_rows, remember_presets
from rlvr_sweep.store import RUN_KEYS, collect
from rlvr_sweep.store.remembered import Remembered

TABLE_NAMES = ("steps", "rollouts", "pairs", "grades")
PAPER_SEEDS = (42, 101, 7)  # the paper's seed order: candidate 0, 1, 2 of cross-seed voting
# benchmark order of the paper's tables; others follow alphabetically
BENCHMARK_ORDER = ("math500", "math_val210", "ext240", "gsm8k200", "amc23", "toy_heldout")
BENCHMARK_NAMES = {"math500": "MATH-500", "math_val210": "Val210", "ext240": "Ext240", "gsm8k200": "GSM8K-200",
                   "amc23": "AMC23-40", "toy_heldout": "toy_heldout", "pool950": "Pool950"}
# the columns of a run that naming its row reads (with its `inputs.*` digests): `row_names.name_rows`, `_label`
_NAMING = ("arm", "profile", "horizon", "paper_arm", "config", "run_dir")
ABLATIONS = ("ablate_skip", "ablate_selective", "mst_act30", "mst_zpd_act35", "ra_mst_tail50", "stopped_tree_h1024")


def seed_order(seed) -> tuple:
    return (PAPER_SEEDS.index(seed), 0) if seed in PAPER_SEEDS else (len(PAPER_SEEDS), seed)


def benchmark_order(name: str) -> tuple:
    base = name.split("/")[0]
    return (BENCHMARK_ORDER.index(base) if base in BENCHMARK_ORDER else len(BENCHMARK_ORDER), name)


def is_paper_number(paper_arm) -> bool:
    return isinstance(paper_arm, str) and paper_arm.isdigit()


def _unit_order(row) -> tuple:
    pa = row["paper_arm"] or ""
    if is_paper_number(pa):
        rank = (0, int(pa), "")
    elif pa:
        rank = (1, ABLATIONS.index(pa) if pa in ABLATIONS else len(ABLATIONS), pa)
    else:
        rank = (2, 0, row["arm"])
    return (row["profile"], *rank, row["horizon"])


def _label(row, several_profiles: bool) -> str:
    pa, arm, horizon = row["paper_arm"] or "", row["arm"], int(row["horizon"])
    # the paper labels arms by number; a number already names its horizon (5 at 512, 12 at 1024)
    name = f"{pa}. {arm}" if is_paper_number(pa) else pa or arm
    if horizon != 512:
        name += f" h{horizon}"
    return f"[{row['profile']}] {name}" if several_profiles else name


def _config_fields(config: dict) -> dict:
    """The few settings analysis needs that run.json does not hold, from the run's flattened config."""
    get = lambda key, default: config.get(key, default)  # noqa: E731
    return {"length_scale": float(get("profile.length_scale", 1.0)),
            "optimizer_step": get("optimizer_step.name", None),
            "accumulate_questions": int(get("train.accumulate_questions", 1) or 1),
            # which read-out a run made, and of what: test-time tables group read-outs by checkpoint
            "task": config.get("task", "train"), "eval_name": get("eval.name", "greedy"),
            "eval_batch_size": get("eval.batch_size", None), "eval_schedule": get("eval.schedule", "fixed"),
            "model_path": get("model.path", None)}


@dataclass
class Sweep:
    runs: pd.DataFrame
    steps: pd.DataFrame
    rollouts: pd.DataFrame
    pairs: pd.DataFrame
    grades: pd.DataFrame  # greedy read-outs of training runs: what Tables 1-4 and the contrasts read
    notes: list[str] = field(default_factory=list)
    # task=evaluate runs (read-outs of saved checkpoints), one row each, with `unit` and `label` too
    eval_runs: pd.DataFrame = field(default_factory=pd.DataFrame)
    # every other graded row: sampled and forked read-outs of training runs and all rows of task=evaluate
    # runs, with `readout` (greedy, sampled_k3, fork3), `task` and the run's `run_dir`
    readouts: pd.DataFrame = field(default_factory=pd.DataFrame)
    # prefix-splice probe folders found under the root (`analysis.probes`)
    probes: list = field(default_factory=list)
    # one row per run folder seen: run_dir, task, arm, seed, used (bool), row (its row's label) or why not
    provenance: pd.DataFrame = field(default_factory=pd.DataFrame)
    # base model read-outs: base_hash -> label (one row of Table 1 each)
    base_labels: dict = field(default_factory=dict)
    root: Path | None = None  # where the sweep was read from (paths in saved tables are relative to it)
    # (table, key columns) -> (the frame indexed, {key: row positions}): see `rows`
    _indexes: dict = field(default_factory=dict, repr=False, compare=False)

    def rows(self, table: str, columns: tuple | None = None, **keys) -> pd.DataFrame:
        """The rows of one of the sweep's frames (`runs`, `grades`, `steps`, `rollouts`, `pairs`, ...) whose
        columns equal `keys`, in the frame's order, as `frame[(frame[k] == v) & ...]` gives them; with
        `columns`, only those of its columns (the ones present), which is cheaper: cutting rows copies
        each column cut. Each (frame, key columns) is indexed once and each part cut once, so a table
        built per arm or per run reads only that arm's or run's rows (linear in the sweep, not
        quadratic); a frame replaced afterwards is indexed anew. The part is a shallow copy: add
        columns to it freely, but do not write into its values in place."""
        positions, parts, key = self._index(table, keys)
        if (columns, key) not in parts:
            source = getattr(self, table) if columns is None else self._narrow(table, tuple(columns))
            hit = positions.get(key)
            parts[(columns, key)] = cut(source, hit) if hit is not None else source.iloc[:0]
        return parts[(columns, key)].copy(deep=False)

    def positions(self, table: str, **keys) -> np.ndarray:
        """The positions in the frame `table` of the rows `rows(table, **keys)` gives, ascending."""
        positions, _, key = self._index(table, keys)
        return positions.get(key, _NO_ROWS)

    def _index(self, table: str, keys: dict) -> tuple[dict, dict, object]:
        """({key: row positions}, {(columns, key): part cut}, this key) of the frame `table` grouped by
        the columns of `keys`, made once per frame and key columns."""
        frame = getattr(self, table)
        by = tuple(sorted(keys))
        cached = self._indexes.get((table, by))
        if cached is None or cached[0] is not frame:
            have = len(frame) and set(by) <= set(frame.columns)
            positions = frame.groupby(list(by), sort=False, dropna=False).indices if have else {}
            cached = self._indexes[(table, by)] = (frame, positions, {})
        return cached[1], cached[2], tuple(keys[c] for c in by) if len(by) > 1 else keys[by[0]]

    def _narrow(self, table: str, columns: tuple) -> pd.DataFrame:
        """The frame `table` with only `columns` (those it has), made once per frame."""
        frame = getattr(self, table)
        cached = self._indexes.get(("narrow", table, columns))
        if cached is None or cached[0] is not frame:
            have = [c for c in dict.fromkeys(columns) if c in frame.columns]
            cached = self._indexes[("narrow", table, columns)] = (frame, frame[have])
        return cached[1]

    def once(self, key, make):
        """`make()` computed once per sweep for `key` (a table that several readers build: verify's
        checks and its rebuild of the saved tables); made again if a frame of the sweep was replaced."""
        frames = (self.runs, self.grades, self.steps, self.rollouts, self.pairs, self.readouts, self.eval_runs)
        cached = self._indexes.get(("once", key))
        if cached is None or any(a is not b for a, b in zip(cached[0], frames)):
            cached = self._indexes[("once", key)] = (frames, make())
        return cached[1]

    def relative(self, path) -> str:
        """`path` relative to the sweep root, so saved tables read the same from any working directory."""
        if not path or self.root is None:
            return str(path or "")
        try:
            return Path(str(path)).relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    @classmethod
    def from_tables(cls, tables: dict, notes=(), where=None, profile: str | None = None, configs=None) -> "Sweep":
        """A Sweep from `collect`-shaped tables (hand-made ones in tests too), keeping the runs of
        `profile` whose config matches `where` ([(key, value)], `grouping.parse_where`). `configs`: a
        `store.remembered` cache of the runs' parsed config.yaml files."""
        notes = list(notes)
        runs = tables["runs"].copy()
        # run.json fields the tables read; a run written without one gets a missing value, not a KeyError
        defaults = {"profile": "", "paper_arm": "", "finished_at": 0.0, "run_dir": "", "params": np.nan,
                    "horizon_tokens": np.nan, "eval_max_new_tokens": np.nan, "lengths.audit_prefix": np.nan,
                    "gate_chars": None, "group_hash": None, "base_hash": None, "saved_model_digest": None,
                    "model_digest": None}
        for column, default in defaults.items():
            if column not in runs.columns:
                runs[column] = default
        runs["paper_arm"] = runs["paper_arm"].fillna("").astype(str)
        runs["profile"] = runs["profile"].fillna("").astype(str)
        runs["config"] = [read_config(d, configs) for d in runs["run_dir"]] if len(runs) else []
        if len(runs):
            extra = pd.DataFrame([_config_fields(c) for c in runs["config"]], index=runs.index)
            for column in extra.columns:
                runs[column] = runs[column].fillna(extra[column]) if column in runs.columns else extra[column]
        provenance = [{"run_dir": d, "task": t, "arm": a, "seed": sd, "used": True, "why": ""}
                      for d, t, a, sd in zip(runs["run_dir"], runs.get("task", "train"), runs["arm"], runs["seed"])]
        keep = pd.Series(True, index=runs.index)
        if profile is not None:
            keep &= runs["profile"] == profile
        chosen, where_notes = select_runs(runs, list(runs["config"]), where)
        notes += where_notes
        for i, (k, c) in enumerate(zip(keep, chosen)):
            if not (k and c):
                provenance[i].update(used=False, why=f"not profile {profile}" if not k else "not selected by --where")
        runs = runs[keep & chosen]
        evals = runs[runs["task"] == "evaluate"] if "task" in runs.columns else runs.iloc[:0]
        runs = runs.drop(evals.index)
        base_labels = {}
        if len(runs):
            runs["unit"] = [g if isinstance(g, str) and g else h for g, h in zip(runs["group_hash"], runs["run_hash"])]
            several = runs["profile"].nunique() > 1
            # one run of each unit, with only what naming reads (`name_rows`, `_label`): cheap to walk row by row
            naming = [c for c in runs.columns if c in _NAMING or c.startswith("inputs.")]
            first = runs[[*naming, "unit"]].drop_duplicates("unit").set_index("unit")
            sizes = runs["unit"].value_counts().to_dict()
            started = runs.groupby("unit")["finished_at"].min().to_dict()
            labels, paper, at_preset, named, _ = name_rows(first, sizes, started,
                                                        lambda r, pa: _label({**r, "paper_arm": pa}, several))
            plain = {u: _label({**r, "paper_arm": paper[u]}, several) for u, r in first.iterrows()}
            notes += named + split_notes(labels, plain, sizes, "arm")
            runs["label"], runs["paper_arm"] = runs["unit"].map(labels), runs["unit"].map(paper)
            runs["at_preset"] = runs["unit"].map(at_preset).astype(bool)
            runs["unit_order"] = [_unit_order(r) for r in runs[["profile", "paper_arm", "arm", "horizon"]]
                                  .to_dict("records")]
            runs["seed_order"] = [seed_order(s) for s in runs["seed"]]
            runs = runs.sort_values(["unit_order", "label", "seed_order"], kind="stable").reset_index(drop=True)
            base_labels = _base_labels(runs, notes)
        else:
            runs = runs.assign(unit=pd.Series(dtype=str), label=pd.Series(dtype=str))
        by_dir = dict(zip(runs["run_dir"], runs["label"]))
        for row in provenance:
            if row["used"] and row["run_dir"] in by_dir:
                row["row"] = by_dir[row["run_dir"]]
        keys = runs[[*RUN_KEYS, "unit"]] if len(runs) else None
        out = {}
        for name in TABLE_NAMES:
            frame = tables.get(name)
            if frame is None or keys is None or not len(frame) or not set(RUN_KEYS) <= set(frame.columns):
                out[name] = pd.DataFrame(columns=[*RUN_KEYS, "unit"])
                continue
            out[name] = frame.merge(keys, on=list(RUN_KEYS), how="inner")  # drops the runs not kept
        readouts = _readout_rows(tables.get("grades"), runs, evals)
        if len(out["grades"]) and "readout" in out["grades"].columns:  # sampled / forked rows are not greedy ones
            out["grades"] = out["grades"][out["grades"]["readout"].fillna("greedy") == "greedy"]
        if len(evals):
            evals = evals.assign(unit=[f"{p}/evaluate/{Path(str(d)).name}" for p, d in zip(evals["profile"],
                                                                                       evals["run_dir"])],
                                 label=list(evals["arm"]))
            for row in provenance:
                if row["used"] and row["task"] == "evaluate":
                    row["row"] = "read-out of a checkpoint"
        return cls(runs=runs, notes=notes, eval_runs=evals.reset_index(drop=True), readouts=readouts,
                   provenance=pd.DataFrame(provenance, columns=["run_dir", "task", "arm", "seed", "used", "row", "why"]),
                   base_labels=base_labels, **out)

    def units(self) -> list[str]:
        """Every arm row of the sweep (its `group_hash`), in the paper's order."""
        return list(self._of_unit())

    def runs_of(self, unit: str, seeds=None) -> pd.DataFrame:
        runs = self.rows("runs", unit=unit)
        return runs if seeds is None else runs[runs["seed"].isin(list(seeds))]

    def label(self, unit: str) -> str:
        return self._of_unit()[unit][0]

    def at_preset(self, unit: str) -> bool:
        """Whether the row's settings are its arm's preset's (`row_names`; False where no preset is known): its
        first run's `at_preset`, from one pass over `runs` (Table 2B asks for every arm row)."""
        runs = self.runs
        cached = self._indexes.get("at_preset")
        if cached is None or cached[0] is not runs:
            of: dict = {}
            if len(runs) and "at_preset" in runs.columns:
                for u, at in zip(runs["unit"].tolist(), runs["at_preset"].tolist()):
                    of.setdefault(u, bool(at))
            cached = self._indexes["at_preset"] = (runs, of)
        return cached[1].get(unit, False)

    def seeds_of(self, unit: str) -> list:
        """The unit's seeds in its runs' order (the paper's: `list(runs_of(unit)["seed"])`)."""
        return list(self._of_unit()[unit][1])

    def _of_unit(self) -> dict:
        """unit -> (label, [seeds]) from one pass over `runs`."""
        runs = self.runs
        cached = self._indexes.get("of_unit")
        if cached is None or cached[0] is not runs:
            of: dict = {}
            if len(runs):
                for unit, label, seed in zip(runs["unit"].tolist(), runs["label"].tolist(), runs["seed"].tolist()):
                    of.setdefault(unit, (label, []))[1].append(seed)
            cached = self._indexes["of_unit"] = (runs, of)
        return cached[1]

    def ref(self, unit: str) -> str:
        """A contrast reference that names this unit: "arm@h<horizon>" (see `resolve`)."""
        run = self.runs_of(unit).iloc[0]
        return f"{run['arm']}@h{run['horizon']}"

    def benchmarks(self, phase: str = "trained") -> list[str]:
        g = self.grades
        cached = self._indexes.get(("benchmarks", phase))
        if cached is None or cached[0] is not g:
            names = g.loc[g["phase"] == phase, "benchmark"].unique() if len(g) else []
            cached = self._indexes[("benchmarks", phase)] = (g, sorted(names, key=benchmark_order))
        return list(cached[1])

    def candidates(self, ref: str, profile: str | None = None) -> list[str]:
        """Every arm row a contrast's arm reference names: a paper arm label ("5", "ablate_selective"),
        else an arm name (optionally "arm@h1024")."""
        ref = str(ref)
        rows, _, memo = self._names()
        if (ref, profile) not in memo:
            rows = [r for r in rows if profile is None or r[0] == profile]
            hit = [r[4] for r in rows if r[1] == ref]
            if not hit:
                arm, _, horizon = ref.partition("@h")
                hit = [r[4] for r in rows if r[2] == arm and (not horizon or r[3] == horizon)]
            memo[(ref, profile)] = tuple(dict.fromkeys(hit))
        return list(memo[(ref, profile)])

    def names_of(self, unit: str) -> tuple:
        """(profile, paper_arm, arm, horizon as text) of the arm row's first run: the names it answers to."""
        return self._names()[1][unit][:4]

    def _names(self) -> tuple[list, dict, dict]:
        """(profile, paper_arm, arm, horizon as text, unit) of every run in order, the first of each unit,
        and the answers `candidates` gave (plain tuples: Table 2B asks once per contrast and per arm row)."""
        runs = self.runs
        cached = self._indexes.get("names")
        if cached is None or cached[0] is not runs:
            columns = ("profile", "paper_arm", "arm", "horizon", "unit")
            values = [runs[c].tolist() if c != "horizon" else runs[c].astype(str).tolist() for c in columns]
            rows = list(zip(*values)) if len(runs) else []
            first: dict = {}
            for row in rows:
                first.setdefault(row[4], row)
            cached = self._indexes["names"] = (runs, (rows, first, {}))
        return cached[1]

    def resolve(self, ref: str, profile: str | None = None) -> str | None:
        """The one arm row `ref` names (`candidates`); None when the sweep lacks it or it names several."""
        units = self.candidates(ref, profile)
        return units[0] if len(units) == 1 else None


_NO_ROWS = np.zeros(0, dtype=np.int64)


def cut(frame: pd.DataFrame, positions) -> pd.DataFrame:
    """`frame.iloc[positions]`. Positions that run unbroken (one run's rows of a ledger, read file by
    file) are cut as a slice, which copies no column; others are taken."""
    positions = np.asarray(positions, dtype=np.int64)
    if len(positions) and (np.diff(positions) == 1).all():
        return frame.iloc[positions[0]:positions[-1] + 1]
    return frame.iloc[positions]


def _base_labels(runs: pd.DataFrame, notes: list) -> dict:
    """{base_hash: label} of the base model read-outs: one per base model and read-out setting."""
    if "base_hash" not in runs.columns or not runs["base_hash"].notna().any():
        return {}
    first = runs[runs["base_hash"].notna()].drop_duplicates("base_hash").set_index("base_hash")
    sizes = runs["base_hash"].value_counts().to_dict()
    plain = {b: BASE_LABEL for b in first.index}

    def described(r) -> dict:
        keep = ("model.", "eval.", "grader.", "profile.", "train.num_threads")
        settings = {k: v for k, v in identity_settings(r["config"]).items() if k.startswith(keep)}
        for key in ("model.path", "model.hub_id"):  # where it came from tells a reader which model
            settings[key] = r["config"].get(key)
        inputs = {f"inputs.{c[len('inputs.'):]}": str(r[c])[:8] for c in r.index
                  if c.startswith("inputs.") and c != "inputs.train" and isinstance(r[c], str)}
        return {**settings, **inputs}

    labels = distinguish(plain, {b: described(r) for b, r in first.iterrows()}, sizes)
    notes += split_notes(labels, plain, sizes, "the base model row")
    return labels


BASE_LABEL = "base model (0 updates)"


def _readout_rows(grades, runs: pd.DataFrame, evals: pd.DataFrame) -> pd.DataFrame:
    """Graded rows of test-time read-outs: the non-greedy rows of the kept training runs and every row
    of the task=evaluate runs, each with its run's `task`, `run_dir` and read-out settings."""
    if grades is None or not len(grades) or not set(RUN_KEYS) <= set(grades.columns):
        return pd.DataFrame()
    info = ["run_dir", "task", "eval_name", "eval_batch_size", "eval_schedule", "model_path",
            "model_source", "model_fingerprint", "length_scale", "profile"]
    both = pd.concat([runs, evals])
    both = both.assign(**{c: both[c] if c in both.columns else None for c in info})[[*RUN_KEYS, *info]]
    rows = grades.merge(both, on=list(RUN_KEYS), how="inner")
    rows["readout"] = rows["readout"].fillna("greedy") if "readout" in rows.columns else "greedy"
    keep = (rows["task"] == "evaluate") | (rows["readout"] != "greedy")
    return rows[keep].reset_index(drop=True)


def load_sweep(root, profile: str | None = None, where=None, kept: bool = True, presets_beside: bool = False
               ) -> Sweep:
    """Every finished, intact run under `root` as a `Sweep`; optionally only one profile's runs and
    those whose config matches every `key=value` of `where` (strings, `--where train.steps=100`).

    Runs that `collect` leaves out (unfinished, damaged, another schema) are not analysed; each is
    named in `Sweep.notes` and `Sweep.provenance` with the reason. Raises
    `rlvr_sweep.store.CollectError` when `root` holds no run folder at all or two folders hold the
    same run, ValueError for a malformed `where`. `kept=False`: every table decoded from the runs' own
    files, no snapshot read or kept (`store.snapshot`), as `verify all` loads a sweep. `presets_beside`:
    the arms' presets that name the rows (Hydra: a second or more) are composed in a forked child while this
    process collects (`row_names.composed_beside`; the command line's choice: the same presets either way)."""
    composing = composed_beside(root, profile) if presets_beside else None
    try:
        tables = collect(Path(root), allow_skipped=True, kept=kept)
        if composing is not None:
            remember_presets(next(composing.results()))
    finally:
        if composing is not None:
            composing.close()
    notes = [f"left out {r.run_dir}: {r.reason}" for r in tables["skipped"].itertuples()]
    configs = Remembered(root, "configs")
    sweep = Sweep.from_tables(tables, notes, where=parse_where(where), profile=profile, configs=configs)
    configs.save()
    left = pd.DataFrame([{"run_dir": r.run_dir, "task": "", "arm": "", "seed": None, "used": False, "row": None,
                          "why": r.reason} for r in tables["skipped"].itertuples()], columns=sweep.provenance.columns)
    sweep.provenance = pd.concat([sweep.provenance, left], ignore_index=True) if len(left) else sweep.provenance
    sweep.root = Path(root)
    sweep.probes, probe_notes = load_probes(root, profile)
    sweep.notes += probe_notes
    return sweep


POOL = "pool950"  # the paper's Pool950: every item of MATH-500, Val210 and Ext240 together
POOL_PARTS = ("math500", "math_val210", "ext240")


def grade_rows(sweep: Sweep, unit: str, benchmark: str, phase: str = "trained", columns=None) -> pd.DataFrame:
    """The unit's grade rows of one benchmark ("ext240/gsm8k200" selects that source of ext240; "pool950"
    is MATH-500, Val210 and Ext240 together, item ids prefixed by their benchmark, for a unit that read
    out all three). `columns`: only these (and what selecting them needs), as `Sweep.rows`."""
    if benchmark == POOL:
        if columns is not None:
            columns = tuple(dict.fromkeys([*columns, "item_id", "index"]))
        parts = [grade_rows(sweep, unit, b, phase, columns) for b in POOL_PARTS]
        if any(not len(part) for part in parts):
            return parts[0].iloc[:0]
        return pd.concat([part.assign(item_id=f"{b}/" + part["item_id"].astype(str), index=part["index"] + n * 10**6)
                          for n, (b, part) in enumerate(zip(POOL_PARTS, parts))], ignore_index=True)
    name, _, source = benchmark.partition("/")
    if columns is not None and source:
        columns = tuple(dict.fromkeys([*columns, "source"]))
    rows = sweep.rows("grades", columns=None if columns is None else tuple(columns), unit=unit, benchmark=name,
                      phase=phase)
    return rows[rows["source"] == source] if source else rows


def item_matrix(sweep: Sweep, unit: str, benchmark: str, metric: str = "correct", phase: str = "trained",
                seeds=None) -> tuple[list, list, np.ndarray]:
    """(seeds, item_ids, values (seeds, items)) of one arm: `metric` (correct / capped) as 0/1 per seed and
    item (a seed's first non-missing value of an item), items in the benchmark's order (their first row's
    `index`; ties by id) and limited to those every listed seed has. Worked out once per sweep
    (`Sweep.once`: Table 2B reads the baseline arm's against every other row's); each call gets its own copy."""
    key = ("item_matrix", unit, benchmark, metric, phase, None if seeds is None else tuple(seeds))
    found, items, values = sweep.once(key, lambda: _item_matrix(sweep, unit, benchmark, metric, phase, seeds))
    return list(found), list(items), values.copy()


def _item_matrix(sweep: Sweep, unit: str, benchmark: str, metric: str, phase: str, seeds) -> tuple:
    rows = grade_rows(sweep, unit, benchmark, phase, columns=("seed", "item_id", "index", metric))
    if seeds is not None:
        rows = rows[rows["seed"].isin(list(seeds))]
    if not len(rows):
        return [], [], np.zeros((0, 0))
    found = sorted(rows["seed"].unique(), key=seed_order)
    column = {s: j for j, s in enumerate(found)}
    cells: dict = {}
    first_index: dict = {}
    for item, seed, index, value in zip(rows["item_id"].tolist(), rows["seed"].tolist(), rows["index"].tolist(),
                                        rows[metric].to_numpy(dtype=float).tolist()):
        first_index.setdefault(item, index)
        if value != value:  # missing: the seed's next row of the item may have it
            continue
        row = cells.setdefault(item, [None] * len(found))
        if row[column[seed]] is None:
            row[column[seed]] = value
    items = sorted((i for i in sorted(cells) if None not in cells[i]), key=first_index.__getitem__)
    values = np.array([cells[i] for i in items], dtype=float).T if items else np.zeros((len(found), 0))
    return found, items, values

"""Table 1 (seed paper §5.2): per arm, accuracy mean ± SD with per-seed values on every benchmark,
cap hits on the main benchmark, token totals, FLOP proxies and seconds; the base model is its own row
(one per base model and read-out setting).

Accuracies come from the stored grade rows (not run.json), token totals from run.json `totals` (PASS 3
checks that they equal the steps ledger), the proxies from each run's own parameter count. Cap hits
(`AllCap2048`: responses that hit the read-out cap) and `IncTrunc` (capped and wrong) are counted on
MATH-500, or, when not every arm row read MATH-500 out, on the benchmark most rows did (smoke: toy_heldout).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlvr_sweep.analysis.flops import TOKEN_KEYS, ledger_tokens, proxies
from rlvr_sweep.analysis.render import Table, mean_sd_text, num, per_seed, tflops
from rlvr_sweep.analysis.source import BASE_LABEL, BENCHMARK_NAMES, POOL, Sweep, grade_rows
from rlvr_sweep.analysis.stats import mean_sd



def cap_benchmark(sweep: Sweep) -> str | None:
    """MATH-500 when every arm row read it out (the paper's AllCap2048), else the benchmark most rows
    read out (first in the paper's order on a tie)."""
    names = sweep.benchmarks()
    g = sweep.grades
    if not names or not len(g):
        return None
    rows = g[g["phase"] == "trained"].groupby("benchmark")["unit"].nunique()
    return max(names, key=lambda b: (int(rows.get(b, 0)), b == "math500", -names.index(b)))


def parts_of(sweep: Sweep, benchmark: str) -> list[str]:
    """`benchmark/source` names of a combined benchmark (ext240: gsm8k200, amc23); [] when it has one source."""
    g = sweep.grades
    sources = g.loc[g["benchmark"] == benchmark, "source"].unique() if len(g) else []
    return [f"{benchmark}/{s}" for s in sources] if len(sources) > 1 else []


def seed_values(sweep: Sweep, unit: str, benchmark: str, column: str, phase: str = "trained",
                how: str = "mean") -> dict:
    """{seed: 100 x mean (or count) of a grades column} for one arm and benchmark."""
    if benchmark == POOL:
        rows = grade_rows(sweep, unit, benchmark, phase)
        grouped = rows.groupby("seed")[column]
        values = grouped.mean() * 100 if how == "mean" else grouped.sum()
        return {s: float(values[s]) for s in sweep.seeds_of(unit) if s in values.index}
    name, _, source = benchmark.partition("/")
    values = sweep.once(("seed_values", column, how, bool(source)),
                        lambda: _per_seed(sweep.grades, column, how, bool(source)))
    values = values.get((unit, phase, name, source) if source else (unit, phase, name), {})
    return {s: float(values[s]) for s in sweep.seeds_of(unit) if s in values}


def _per_seed(grades, column: str, how: str, by_source: bool) -> dict:
    """{(unit, phase, benchmark[, source]): {seed: value}} of `seed_values` for every arm at once: one
    grouping of the whole grades frame, each group's rows in the frame's order (as a cut of one arm's
    rows groups them), instead of cutting each arm's rows (what used to be most of Table 1's time)."""
    keys = ["unit", "phase", "benchmark", *(["source"] if by_source else []), "seed"]
    grouped = grades.groupby(keys, sort=False, dropna=False)[column]
    values = grouped.mean() * 100 if how == "mean" else grouped.sum()
    out: dict = {}
    for key, value in zip(values.index.tolist(), values.tolist()):
        out.setdefault(key[:-1], {})[key[-1]] = value
    return out


def run_proxies(run) -> dict:
    return proxies(ledger_tokens({c: run[f"totals.{c}"] for c in _TOTAL_COLUMNS}), run["params"])


_TOTAL_COLUMNS = ("gen_tokens", "prefill_tokens", "padded_prefill_tokens", "untrimmed_steps", "bwd_out_tokens",
                  "bwd_full_tokens")


_RUN_COLUMNS = ("paper_arm", "arm", "horizon", "seed", "params", *(f"totals.{c}" for c in _TOTAL_COLUMNS),
                "totals.seconds", "wall_seconds")  # what an arm's row reads of its runs


def _runs_by_unit(sweep: Sweep) -> dict:
    """unit -> its runs' `_RUN_COLUMNS` (those the sweep has) as dicts, in run order: one pass over the
    runs for every arm, not a cut of the runs frame per arm."""
    runs = sweep.runs
    out: dict = {}
    for unit, run in zip(runs["unit"].tolist(), runs[[c for c in _RUN_COLUMNS if c in runs.columns]]
                         .to_dict("records")):
        out.setdefault(unit, []).append(run)
    return out


def _arm_row(sweep: Sweep, unit: str, runs: list[dict], benchmarks: list[str], cap_bench: str | None) -> dict:
    """The row of one arm from its runs (dicts of `_RUN_COLUMNS`, `_runs_by_unit`). The means over its runs
    are the pandas means of frames made of them, as they always were (the same sums in the same order)."""
    first = runs[0]
    row = {"label": sweep.label(unit), "unit": unit, "paper_arm": first["paper_arm"], "arm": first["arm"],
           "horizon": int(first["horizon"]), "n_seeds": len(runs), "seeds": "/".join(str(r["seed"]) for r in runs)}
    for b in benchmarks:
        vals = seed_values(sweep, unit, b, "correct")
        if vals:
            m, sd = mean_sd(list(vals.values()))
            row.update({f"{b}.mean": m, f"{b}.sd": sd, f"{b}.per_seed": list(vals.values()),
                        f"{b}.seeds": list(vals)})
    if cap_bench:
        caps = seed_values(sweep, unit, cap_bench, "capped", how="sum")
        inc = seed_values(sweep, unit, cap_bench, "inc_trunc", how="sum")
        if caps:
            row.update({"allcap.mean": float(np.mean(list(caps.values()))), "allcap.per_seed": list(caps.values()),
                        "inctrunc.mean": float(np.mean(list(inc.values())))})
    totals = [f"totals.{c}" for c in _TOTAL_COLUMNS]
    if all(c in first for c in totals):
        tokens = pd.DataFrame([{c: r[c] for c in totals} for r in runs]).astype(float).mean()
        row.update({f"tok.{k}": tokens[f"totals.{c}"] for k, c in zip(TOKEN_KEYS, _TOTAL_COLUMNS)})
        if "params" in first and all(pd.notna(r["params"]) for r in runs):
            p = pd.DataFrame([run_proxies(r) for r in runs]).mean()
            row.update({"tflops.out": p["out"], "tflops.full": p["full"], "tflops.pad_full": p["pad_full"]})
    for column, key in (("totals.seconds", "seconds"), ("wall_seconds", "wall_seconds")):
        if column in first:
            row[key] = float(pd.Series([r[column] for r in runs]).astype(float).mean())
    return row


def _base_rows(sweep: Sweep, benchmarks: list[str], cap_bench: str | None) -> list[dict]:
    """The untrained policy, one row per base model and read-out setting (`base_hash`): every run of
    that base read it out (greedy, so the same numbers; an SD over runs shows where they differ)."""
    g = sweep.grades
    base = g[g["phase"] == "base"] if len(g) else g
    if not len(base):
        return []
    of_run = dict(zip(sweep.runs["run_hash"], sweep.runs["base_hash"].fillna("")))
    base = base.assign(base_hash=base["run_hash"].map(of_run).fillna(""))
    return [_base_row(part, sweep.base_labels.get(key, BASE_LABEL), key, benchmarks, cap_bench)
            for key, part in sorted(base.groupby("base_hash", sort=False), key=lambda kv: _first_run(sweep, kv[1]))]


def _first_run(sweep: Sweep, rows: pd.DataFrame) -> int:
    order = {h: i for i, h in enumerate(sweep.runs["run_hash"])}
    return min(order.get(h, len(order)) for h in rows["run_hash"].unique())


def _base_row(base: pd.DataFrame, label: str, key: str, benchmarks: list[str], cap_bench: str | None) -> dict:
    row = {"label": label, "unit": f"base:{key}", "is_base": True, "paper_arm": "", "arm": "base", "horizon": 0,
           "n_seeds": int(base["run_hash"].nunique()), "seeds": ""}
    for b in benchmarks:
        name, _, source = b.partition("/")
        rows = base[(base["benchmark"] == name) & ((base["source"] == source) if source else True)]
        if len(rows):
            per_run = rows.groupby("run_hash")["correct"].mean() * 100
            m, sd = mean_sd(per_run.to_numpy())
            row.update({f"{b}.mean": m, f"{b}.sd": 0.0 if len(per_run) == 1 else sd,
                        f"{b}.per_seed": [m], f"{b}.seeds": [], f"{b}.n_correct": float(rows.groupby("run_hash")["correct"].sum().mean()),
                        f"{b}.n_items": float(rows.groupby("run_hash").size().mean())})
    if cap_bench:
        rows = base[base["benchmark"] == cap_bench]
        if len(rows):
            row.update({"allcap.mean": float(rows.groupby("run_hash")["capped"].sum().mean()),
                        "allcap.per_seed": [], "inctrunc.mean": float(rows.groupby("run_hash")["inc_trunc"].sum().mean())})
    # 0 updates: no training tokens, no training FLOPs (the paper's "0 [0] / 0 [0] / 0 / 0k", "0.0 (0s)")
    row.update({f"tok.{k}": 0.0 for k in TOKEN_KEYS})
    row.update({"tflops.out": 0.0, "tflops.full": 0.0, "tflops.pad_full": 0.0, "seconds": 0.0})
    return row


def build_table1(sweep: Sweep) -> Table:
    title = "Table 1: accuracy, cap hits, tokens and FLOP proxies per arm (§5.2)"
    units = sweep.units()
    if not units:
        return Table.unbuilt("table1", title, "the sweep has no finished runs")
    main = sweep.benchmarks()
    benchmarks = [x for b in main for x in [b, *parts_of(sweep, b)]]
    cap_bench = cap_benchmark(sweep)
    runs = _runs_by_unit(sweep)
    rows = [{**_arm_row(sweep, u, runs[u], benchmarks, cap_bench), "is_base": False} for u in units]
    frame = pd.DataFrame(_base_rows(sweep, benchmarks, cap_bench) + rows)
    return Table("table1", title, frame, _display(frame, main, benchmarks, cap_bench),
                 notes=[f"cap hits counted on {cap_bench} (read-out cap: run.json eval_max_new_tokens)"]
                 if cap_bench else [])


def _display(frame: pd.DataFrame, main: list[str], benchmarks: list[str], cap_bench: str | None) -> pd.DataFrame:
    out = []
    for _, r in frame.iterrows():
        d = {"Arm": r["label"]}
        for b in main:
            name = BENCHMARK_NAMES.get(b, b)
            d[name] = _acc_text(r, b)
            parts = [p for p in benchmarks if p.startswith(b + "/")]
            if parts:
                d[f"{name} parts ({' / '.join(p.split('/')[1] for p in parts)})"] = " / ".join(
                    num(r.get(f"{p}.mean"), 2) for p in parts)
        if cap_bench:
            caps = r.get("allcap.per_seed")
            seeds = f" ({per_seed(caps, 0)})" if isinstance(caps, list) and len(caps) > 1 else ""
            d[f"AllCap ({BENCHMARK_NAMES.get(cap_bench, cap_bench)}) / IncTrunc"] = (
                f"{num(r.get('allcap.mean'), 1)}{seeds} / {num(r.get('inctrunc.mean'), 1)}")
        k = lambda key: num(r.get(key, float("nan")) / 1e3, 1)  # noqa: E731
        d["Tokens gen [untrim] / pref [pad] / bwd_out / bwd_full (k)"] = (
            f"{k('tok.gen')} [{k('tok.untrim_gen')}] / {k('tok.pref')} [{k('tok.pad_pref')}] / "
            f"{k('tok.bwd_out')} / {k('tok.bwd_full')}")
        d["Out / Full / PadFull TFLOPs"] = " / ".join(tflops(r.get(f"tflops.{x}")) for x in ("out", "full", "pad_full"))
        d["Sec"] = num(r.get("seconds"), 1)
        out.append(d)
    return pd.DataFrame(out)


def _acc_text(r, b: str) -> str:
    mean = r.get(f"{b}.mean")
    if mean is None or (isinstance(mean, float) and np.isnan(mean)):
        return "—"
    if r.get("is_base") is True:
        sd = r.get(f"{b}.sd", 0.0)
        count = f" ({num(r.get(f'{b}.n_correct'), 0)}/{num(r.get(f'{b}.n_items'), 0)})"
        return f"{num(mean)}{count}" + (f" ± {num(sd)} over runs" if sd and not np.isnan(sd) else "")
    return mean_sd_text(mean, r[f"{b}.sd"], r[f"{b}.per_seed"])

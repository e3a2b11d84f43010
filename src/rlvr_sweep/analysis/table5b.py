"""Table 5B (seed paper §5.6 item 3): deterministic branching of one checkpoint, and the batch audit.

One row per fork read-out (`eval=fork3`) and benchmark, plus a pooled row over its benchmarks:
- MinMargin-Fork@3: B0 / B1 / B2 accuracies, MDL- and CR-Maj@3, Pass@3;
- FirstGap05-Fork@3: B1 / B2, MDL- and CR-Maj@3 with paired question-bootstrap CIs of their difference
  from the greedy root (B0), Pass@3 (and its count), the five strata (Unanimous, Root+1, Sibling
  Override, Completed Tie, Truncated Tie), strict / fallback slots, and MDL with the plain cap instead
  of each branch's eff_cap (the paper's check that both give the same count);
- TieGated-FG05: CR- and MDL-Maj with CIs against B0, ties resolved (f_max >= 2) / ties, branches per item;
- Hybrid-Fork: CR- and MDL-Maj with CIs, Pass, branches per item; TieGated - Hybrid CR-Maj with its CI;
- rescues of wrong anchors (items the root missed): by FirstGap05's / MinMargin's first fork and by
  either of its two (paper: 65/471 and 103/471, 50/471 and 83/471), and MinMargin's forks re-indexed
  chronologically, the earlier vs the later position (60/471 vs 45/471);
- the batch audit of the same checkpoint (`batch_audit`): accuracies at both batch sizes, difference
  with CI, grade agreement. A checkpoint with an audit but no fork read-out gets an audit-only row.
MDL's window is 15 <= L < eff_cap (15 paper tokens, scaled); CIs are nominal, conditional on the checkpoint.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlvr_sweep.analysis.batch_audit import batch_audits
from rlvr_sweep.analysis.checkpoints import readouts_of
from rlvr_sweep.analysis.fork_votes import RULES, STRATA, readout_items
from rlvr_sweep.analysis.render import Table, ci_text, num
from rlvr_sweep.analysis.source import BENCHMARK_NAMES, Sweep
from rlvr_sweep.analysis.stats import bootstrap_ci

FORKS = "fork3"


def summarize_forks(items: pd.DataFrame, n_resamples: int, seed: int) -> dict:
    """Table 5B's numbers over `readout_items` rows (accuracies and differences in %)."""
    b0 = items["b0"].to_numpy(float)
    out = {"n_items": len(items), "b0": 100 * b0.mean()}
    for rule in RULES:
        for vote in ("mdl", "cr"):
            values = items[f"{rule}.{vote}"].to_numpy(float)
            _, lo, hi = bootstrap_ci(values - b0, "question", n_resamples, seed)  # paired: the same items
            out.update({f"{rule}.{vote}": 100 * values.mean(), f"{rule}.{vote}_count": float(values.sum()),
                        f"{rule}.{vote}_diff": 100 * (values - b0).mean(), f"{rule}.{vote}_lo": 100 * lo,
                        f"{rule}.{vote}_hi": 100 * hi})
        out[f"{rule}.pass"] = 100 * items[f"{rule}.pass"].mean()
        out[f"{rule}.pass_count"] = int(items[f"{rule}.pass"].sum())
        out[f"{rule}.branches"] = int(items[f"{rule}.branches"].sum())
        out[f"{rule}.branches_per_item"] = float(items[f"{rule}.branches"].mean())
    for rule in ("minmargin", "firstgap"):
        for k in (1, 2):
            hit = items[f"{rule}.b{k}"].dropna()
            out[f"{rule}.b{k}"] = 100 * hit.mean() if len(hit) else np.nan
            out[f"{rule}.b{k}_n"] = len(hit)  # items whose root is long enough for this fork
            out[f"{rule}.mean_t{k}"] = float(items[f"{rule}.t{k}"].mean())
        counts = items[f"{rule}.stratum"].value_counts()
        out.update({f"{rule}.{s}": int(counts.get(s, 0)) for s in STRATA})
        out[f"{rule}.mdl_plain_cap_count"] = float(items[f"{rule}.mdl_plain_cap"].sum())
    wrong = int(items["wrong_anchor"].sum())
    out["wrong_anchors"] = wrong
    for column in ("minmargin.rescue1", "minmargin.rescue2", "firstgap.rescue1", "firstgap.rescue2",
                   "minmargin.early_rescue", "minmargin.late_rescue"):
        out[column] = int(items[column].sum())
    tie, hybrid = items["tiegated.cr"].to_numpy(float), items["hybrid.cr"].to_numpy(float)
    _, lo, hi = bootstrap_ci(tie - hybrid, "question", n_resamples, seed)
    out.update({"tiegated_minus_hybrid.cr": 100 * (tie - hybrid).mean(), "tiegated_minus_hybrid.cr_lo": 100 * lo,
                "tiegated_minus_hybrid.cr_hi": 100 * hi})
    out["firstgap.strict_slots"] = int(items["firstgap.strict"].sum())
    out["firstgap.fallback_slots"] = int(items["firstgap.fallbacks"].sum())
    out["tiegated.ties"] = int(items["fg_tie"].sum())
    out["tiegated.resolved"] = int(items["tiegated.resolved"].sum())
    return out


def build_table5b(sweep: Sweep, n_resamples: int = 4000, seed: int = 0) -> Table:
    title = "Table 5B: MinMargin / FirstGap05 / TieGated / Hybrid forks of one checkpoint, and the batch audit (§5.6)"
    rows = []
    for r in readouts_of(sweep, FORKS):
        items = readout_items(r.rows, r.cap, r.min_len)
        names = r.benchmarks()
        for b in names + (["pool"] if len(names) > 1 else []):
            part = items if b == "pool" else items[items["benchmark"] == b]
            rows.append({"key": r.key, "label": r.label, "phase": r.phase, "benchmark": b, "cap": r.cap,
                         "min_len": r.min_len, "n_resamples": n_resamples, "boot_seed": seed,
                         **summarize_forks(part, n_resamples, seed)})
    frame = pd.DataFrame(rows)
    audit = batch_audits(sweep, n_resamples, seed)
    if len(audit):
        audit = audit.rename(columns={c: f"audit.{c}" for c in audit.columns if c not in ("key", "label", "benchmark")})
        audit = audit.drop_duplicates(["key", "benchmark"])  # one other batch size per row: the first
        if len(frame):
            frame = frame.merge(audit.drop(columns="label"), on=["key", "benchmark"], how="outer")
            frame["label"] = frame["label"].fillna(frame["key"].map(dict(zip(audit["key"], audit["label"]))))
        else:
            frame = audit.assign(n_resamples=n_resamples, boot_seed=seed)
    if not len(frame):
        return Table.unbuilt("table5b", title, "no fork read-out (eval=fork3) and no checkpoint read out greedily "
                                               "at two batch sizes (task=evaluate eval.batch_size=64)")
    frame = frame.reset_index(drop=True)
    return Table("table5b", title, frame, _display(frame),
                 notes=["B0 = the greedy root; Diff = rule - B0 in pp, paired question bootstrap CI, nominal and "
                        "conditional on the checkpoint; strata of FirstGap05@3: Unanimous / Root+1 / Sibling Override "
                        "/ Completed Tie / Truncated Tie; batch audit: other batch - reference batch",
                        f"MDL window {_min_len(frame)} <= L < eff_cap (15 paper tokens, scaled)"])


def _min_len(frame: pd.DataFrame) -> str:
    known = frame["min_len"].dropna() if "min_len" in frame else []
    return str(int(known.iloc[0])) if len(known) else "-"


def _pct(v) -> str:
    return num(v)


def _diff(r, col: str) -> str:
    if col + "_diff" not in r or pd.isna(r.get(col + "_diff")):
        return ""
    return f"{_pct(r[col])} ({num(r[col + '_diff'], 2, True)}, {ci_text(r[col + '_lo'], r[col + '_hi'])})"


def _display(frame: pd.DataFrame) -> pd.DataFrame:
    out = []
    for _, r in frame.iterrows():
        has_forks = "n_items" in r and pd.notna(r.get("n_items"))
        n = int(r["n_items"]) if has_forks else int(r.get("audit.n", 0))
        bench = "Pool" if r["benchmark"] == "pool" else BENCHMARK_NAMES.get(r["benchmark"], r["benchmark"])
        audit = ""
        if pd.notna(r.get("audit.n")):
            audit = (f"{_pct(r['audit.acc_a'])} vs {_pct(r['audit.acc_b'])} ({num(r['audit.diff'], 2, True)}, "
                     f"{ci_text(r['audit.diff_lo'], r['audit.diff_hi'])}; {int(r['audit.agree'])}/{int(r['audit.n'])}; "
                     f"batch {int(r['audit.batch_a'])} vs {int(r['audit.batch_b'])})")
        row = {"Checkpoint": r["label"], "Benchmark (N)": f"{bench} ({n})",
               "Batch a vs b (Diff, 95% CI; GradeAgree)": audit}
        if has_forks:
            strata = " / ".join(str(int(r[f"firstgap.{s}"])) for s in ("unanimous", "root_plus_1", "sibling_override",
                                                                        "completed_tie", "truncated_tie"))
            row.update({
                "MinMargin: B0 / B1 / B2": f"{_pct(r['b0'])} / {_pct(r['minmargin.b1'])} / {_pct(r['minmargin.b2'])}",
                "MinMargin: MDL / CR-Maj@3 (Pass@3)": (f"{_pct(r['minmargin.mdl'])} / {_pct(r['minmargin.cr'])} "
                                                       f"({_pct(r['minmargin.pass'])})"),
                "FirstGap05: B1 / B2": f"{_pct(r['firstgap.b1'])} / {_pct(r['firstgap.b2'])}",
                "FirstGap05: MDL-Maj@3 (Diff, 95% CI)": _diff(r, "firstgap.mdl"),
                "FirstGap05: CR-Maj@3 (Diff, 95% CI)": _diff(r, "firstgap.cr"),
                "FirstGap05: Pass@3 (n)": f"{_pct(r['firstgap.pass'])} ({int(r['firstgap.pass_count'])})",
                "FirstGap05 strata U / R+1 / SO / CT / TT": strata,
                "TieGated: CR-Maj (Diff, 95% CI)": _diff(r, "tiegated.cr"),
                "TieGated: MDL-Maj (Diff, 95% CI)": _diff(r, "tiegated.mdl"),
                "TieGated: resolved / ties; branches/item": (
                    f"{int(r['tiegated.resolved'])}/{int(r['tiegated.ties'])}; {num(r['tiegated.branches_per_item'])}"),
                "Hybrid: CR / MDL (Pass); branches/item": (
                    f"{_pct(r['hybrid.cr'])} / {_pct(r['hybrid.mdl'])} ({_pct(r['hybrid.pass'])}); "
                    f"{num(r['hybrid.branches_per_item'])}"),
                "TieGated - Hybrid CR (95% CI)": (f"{num(r['tiegated_minus_hybrid.cr'], 2, True)} "
                                                 f"({ci_text(r['tiegated_minus_hybrid.cr_lo'], r['tiegated_minus_hybrid.cr_hi'])})"),
                "Rescued wrong anchors FG05 1 / 2 br; MinMargin 1 / 2 br; Early / Late": (
                    f"{int(r['firstgap.rescue1'])} / {int(r['firstgap.rescue2'])}; {int(r['minmargin.rescue1'])} / "
                    f"{int(r['minmargin.rescue2'])}; {int(r['minmargin.early_rescue'])} / "
                    f"{int(r['minmargin.late_rescue'])} (of {int(r['wrong_anchors'])})"),
            })
        out.append(row)
    return pd.DataFrame(out).fillna("")

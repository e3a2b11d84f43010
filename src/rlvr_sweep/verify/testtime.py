"""PASS 4 (seed paper §7): the test-time read-outs and probes, regraded, re-derived and re-tabled.

1. every stored sampled and fork response (grades rows of `eval=sampled_k3` / `eval=fork3` read-outs) and
   every probe response (both greedy read-outs and every condition's continuation) re-extracted and
   regraded with its run's grader (`regrade`);
2. their structure re-derived from the stored rows (`testtime_rules`: fork positions, slots, tie gating,
   eff_cap arithmetic, draws, probe cuts);
3. the stored margins against a fresh teacher-forced pass through the checkpoint, on a sample
   (`margins`; loads the models, on the CPU by default);
4. Tables 4, 5A and 5B recounted from the stored rows by plain sums, their MDL / CR / MaxLen / Rand votes
   by the paper's rule written out again (`votes`, not the voting code that made them), and, with a saved tables folder, Tables 5A / 5B equal to their rebuilds (Table 4 is
   compared in PASS 3).
`run_pass4` returns (summary, problems); `passes.pass4` wraps it as PASS 4 of `verify all`.
"""

from __future__ import annotations

import pandas as pd

from rlvr_sweep.analysis import Sweep
from rlvr_sweep.analysis.checkpoints import readouts_of
from rlvr_sweep.analysis.report import TABLES, TEST_TIME_TABLES
from rlvr_sweep.analysis.table4 import build_table4
from rlvr_sweep.analysis.table5a import build_table5a
from rlvr_sweep.analysis.table5b import build_table5b
from rlvr_sweep.reward import graders
from rlvr_sweep.verify.rebuild import markdown_problems, saved_problems
from rlvr_sweep.verify.regrade import _check_grades, _memoised, format_disagreement, run_grader
from rlvr_sweep.verify.testtime_rules import fork_problems, probe_problems, sampled_problems
from rlvr_sweep.verify.votes import table4_vote_problems, table5b_vote_problems

TEST_TIME = ("sampled_k3", "fork3")


def regrade_problems(sweep: Sweep, cache: dict) -> tuple[int, list[str]]:
    """Regrade every sampled / fork row and every probe row; (responses checked, disagreements)."""
    checked, problems = 0, []
    rows = sweep.readouts
    rows = rows[rows["readout"].isin(TEST_TIME)] if len(rows) else rows
    for run_dir, part in (rows.groupby("run_dir", sort=False) if len(rows) else []):
        name, _ = run_grader(run_dir)
        n, _, found = _check_grades(part, _memoised(graders.get_grader(name), cache))
        checked += n
        problems += [format_disagreement({"run": str(run_dir), "table": "grades", **d}) for d in found]
    for probe in sweep.probes:
        grade = _memoised(graders.get_grader(probe.info.get("grader", "baseline")), cache)
        for table in ("greedy", "rows"):
            n, _, found = _check_grades(getattr(probe, table), grade)
            checked += n
            problems += [format_disagreement({"run": str(probe.path), "table": f"probe {table}", **d}) for d in found]
    return checked, problems


def structure_problems(sweep: Sweep) -> tuple[dict, list[str]]:
    counts, problems = {"fork_items": 0, "sampled_items": 0, "probe_items": 0}, []
    for r in readouts_of(sweep, "fork3"):
        n, more = fork_problems(r.rows, r.cap, r.label)
        counts["fork_items"] += n
        problems += more
    for r in readouts_of(sweep, "sampled_k3"):
        n, more = sampled_problems(r.rows, r.label)
        counts["sampled_items"] += n
        problems += more
    for probe in sweep.probes:
        n, more = probe_problems(probe)
        counts["probe_items"] += n
        problems += more
    return counts, problems


def _check(problems: list, what: str, stored, recounted) -> int:
    if not pd.isna(stored) and abs(float(stored) - float(recounted)) > 1e-9:
        problems.append(f"{what}: the table says {stored}, the stored rows give {recounted}")
    return 1


def recount_problems(sweep: Sweep, n_resamples: int = 200) -> tuple[int, list[str]]:
    """Tables 4, 5A and 5B against plain sums over the stored rows, their votes by the written-out rule."""
    t4 = build_table4(sweep, n_resamples).frame
    checked, problems = table4_vote_problems(sweep, t4) if len(t4) else (0, [])
    for r in readouts_of(sweep, "sampled_k3"):
        for b in r.benchmarks():
            rows = r.of(b)
            hit = t4[(t4.get("mode") == "sampled") & (t4["unit"] == r.key) & (t4["phase"] == r.phase) &
                     (t4["benchmark"] == b)] if len(t4) else t4
            if len(hit) != 1:
                problems.append(f"Table 4: no single sampled row for {r.label} {b}")
                continue
            row, what = hit.iloc[0], f"Table 4 {r.label} {b}"
            per_item = rows.groupby("index")["correct"]
            checked += _check(problems, what + " Mean@1", row["mean1"], 100 * rows["correct"].mean())
            checked += _check(problems, what + " Pass@k", row["oracle"], 100 * per_item.max().mean())
            checked += _check(problems, what + " test tokens", row["test_tokens"], rows["length"].sum())
    t5b = build_table5b(sweep, n_resamples).frame
    n, more = table5b_vote_problems(sweep, t5b)
    checked, problems = checked + n, problems + more
    for r in readouts_of(sweep, "fork3"):
        for b in r.benchmarks():
            rows = r.of(b)
            hit = t5b[(t5b["key"] == r.key) & (t5b["benchmark"] == b) & (t5b["phase"] == r.phase)]
            if len(hit) != 1:
                problems.append(f"Table 5B: no single row for {r.label} {b}")
                continue
            row, what = hit.iloc[0], f"Table 5B {r.label} {b}"
            fg = rows[rows["fg_slot"].between(0, 2)]
            checked += _check(problems, what + " B0", row["b0"], 100 * rows.loc[rows["branch"] == 0, "correct"].mean())
            checked += _check(problems, what + " FirstGap05 Pass@3", row["firstgap.pass_count"],
                              fg.groupby("index")["correct"].max().sum())
            checked += _check(problems, what + " ties", row["tiegated.ties"],
                              rows.loc[rows["branch"] == 0, "fg_tie"].astype(bool).sum())
            checked += _check(problems, what + " TieGated branches", row["tiegated.branches"],
                              (rows["fg_slot"] >= 0).sum())
            checked += _check(problems, what + " MinMargin branches", row["minmargin.branches"],
                              (rows["mm_slot"] >= 0).sum())
    t5a = build_table5a(sweep).frame
    for probe in sweep.probes:
        mine = t5a[t5a["path"] == sweep.relative(probe.path)] if len(t5a) else t5a
        for condition, rows in (probe.rows.groupby("condition", sort=False) if len(probe.rows) else []):
            hit = mine[mine["condition"] == condition]
            if len(hit) != 1:
                problems.append(f"Table 5A: no single row for {condition} of probe {probe.path}")
                continue
            what = f"Table 5A {probe.path} {condition}"
            checked += _check(problems, what + " rescued", hit.iloc[0]["rescued_all"], rows["correct"].sum())
            checked += _check(problems, what + " items", hit.iloc[0]["n_all"], len(probe.items))
    return checked, problems


def run_pass4(sweep: Sweep, tables_dir=None, margin_items: int = 3, device: str = "cpu",
              cache: dict | None = None) -> tuple[str, list[str]]:
    """(summary, problems) of PASS 4 over a loaded sweep."""
    regraded, problems = regrade_problems(sweep, {} if cache is None else cache)
    counts, more = structure_problems(sweep)
    problems += more
    from rlvr_sweep.verify.margins import Loader, fork_margin_problems, probe_margin_problems  # torch, models

    loader, margins, notes = Loader(device), 0, []
    runs = pd.concat([sweep.runs, sweep.eval_runs], ignore_index=True)
    for r in readouts_of(sweep, "fork3"):
        n, note, more = fork_margin_problems(r, runs[runs["run_dir"] == r.run_dir].iloc[0], loader, margin_items)
        margins, notes, problems = margins + n, notes + note, problems + more
    for probe in sweep.probes:
        n, note, more = probe_margin_problems(probe, loader, margin_items)
        margins, notes, problems = margins + n, notes + note, problems + more
    recounted, more = recount_problems(sweep)
    problems += more
    summary = (f"{regraded} sampled / fork / probe responses regraded; {counts['fork_items']} fork items, "
               f"{counts['sampled_items']} sampled items and {counts['probe_items']} probe items re-derived; "
               f"margins of {margins} items match a fresh teacher-forced pass; Tables 4/5A/5B: {recounted} "
               "numbers recounted from stored rows")
    if notes:
        summary += f"; not checked: {'; '.join(notes)}"
    if tables_dir is not None:
        rendered = {}
        n, more = saved_problems(sweep, tables_dir, TEST_TIME_TABLES, rendered=rendered)
        compared, in_md = markdown_problems(sweep, None, tables_dir, rendered, notes=False,
                                            elsewhere=len(TABLES))  # the other blocks: PASS 3 names them
        problems += more + in_md
        summary += f"; {n} saved tables (5A/5B) rebuilt" + (f", {compared} of them in tables.md" if compared else "")
    return summary, problems

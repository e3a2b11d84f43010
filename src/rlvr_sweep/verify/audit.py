"""PASS 3, the retained token-512 prefix audit (seed paper §5.4, `gt512_prefix_audit`; §7 "558 prefixes").

For every rollout longer than its run's audit cut (512 paper tokens), re-derived from the stored rows:
- the first `cut` tokens' text is stored (`audit_prefix_text`);
- its last `\\boxed` answer is re-extracted and regraded against the gold with the run's grader and
  gate, so the audit's pass / fail at the cut is recounted, not taken from the table;
- `first_box_token` agrees with the texts: -1 exactly when the rollout holds no `\\boxed`; a prefix that
  holds one has its first box start before the cut; an unboxed prefix's first box starts at or after
  `cut - SPLIT_BOX_TOKENS` (the paper's rule: `first_box_tok == -1 or >= 510` at a 512-token cut, since
  `\\boxed` spans tokens, ' \\' then 'boxed' in Qwen3's vocabulary, and one that starts in token 510
  or 511 can be split by the cut);
then each arm's audit row (`analysis.audit`: long rollouts, final R = 1, fail / pass at the cut) must
equal the recount.
"""

from __future__ import annotations

import pandas as pd

from rlvr_sweep.analysis import Sweep
from rlvr_sweep.analysis.report import build_tables
from rlvr_sweep.reward import extract_answer, get_grader


SPLIT_BOX_TOKENS = 2  # a `\\boxed` starting this few tokens before the cut may be cut in two (paper §5.4)


def box_problem(box: int, cut: int, text: str, prefix: str) -> str | None:
    """What is wrong with a stored `first_box_token` beside the rollout's text and its prefix, or None."""
    if (box < 0) != ("\\boxed" not in text):
        return f"first_box_token {box} but the rollout {'holds' if box < 0 else 'lacks'} a \\boxed"
    if box < 0:
        return None
    if "\\boxed" in prefix and box >= cut:
        return f"first_box_token {box} vs a cut at {cut}, but the prefix holds a \\boxed"
    if "\\boxed" not in prefix and box < cut - SPLIT_BOX_TOKENS:
        return (f"first_box_token {box} vs a cut at {cut}, but the prefix lacks a \\boxed (a box split by the cut "
                f"starts at or after token {cut - SPLIT_BOX_TOKENS})")
    return None


def _grader_of(run: pd.Series):
    return get_grader(run["config"].get("grader.name", "baseline") if isinstance(run.get("config"), dict) else "baseline")


def audit_problems(sweep: Sweep) -> tuple[int, list[str]]:
    """(long rollouts re-derived, problems)."""
    table = build_tables(sweep, only=["audit"], reuse=True)["audit"]  # the one the saved tables are compared with
    if table.why or not len(sweep.rollouts):
        return 0, []
    checked, problems = 0, []
    for _, row in table.frame.iterrows():
        runs = sweep.runs_of(row["unit"]).set_index("seed")
        cuts = {seed: int(run["lengths.audit_prefix"]) for seed, run in runs.iterrows()}
        gates = {seed: None if pd.isna(run.get("gate_chars")) else int(run["gate_chars"]) for seed, run in runs.iterrows()}
        graders = {seed: _grader_of(run) for seed, run in runs.iterrows()}
        ro = sweep.rows("rollouts", unit=row["unit"])
        ro = ro[ro["length"].to_numpy() > ro["seed"].map(cuts).to_numpy()]  # the long rollouts, in ledger order
        counts = {"long": 0, "long_r1": 0, "pass_at_cut": 0}
        for r in ro.itertuples(index=False):
            cut = cuts[r.seed]
            checked += 1
            counts["long"] += 1
            where = f"{row['label']} seed {r.seed} step {r.step} rollout {r.index}"
            prefix = r.audit_prefix_text if isinstance(r.audit_prefix_text, str) else None
            if prefix is None:
                problems.append(f"{where}: {r.length} tokens but no stored text of its first {cut} tokens")
                continue
            wrong = box_problem(int(r.first_box_token), cut, r.text, prefix)
            if wrong:
                problems.append(f"{where}: {wrong}")
            if r.reward != 1:
                continue
            counts["long_r1"] += 1
            gate = gates[r.seed]
            pred = extract_answer(prefix, fallback=None)
            gated = gate is None or prefix.rfind("\\boxed") >= gate
            counts["pass_at_cut"] += int(bool(pred) and gated and graders[r.seed](pred, r.gold))
        for key, value in counts.items():
            if int(row[key]) != value:
                problems.append(f"audit {row['label']} {key}: the table says {int(row[key])}, the rows give {value}")
        if int(row["fail_at_cut"]) != counts["long_r1"] - counts["pass_at_cut"]:
            problems.append(f"audit {row['label']} fail_at_cut: the table says {int(row['fail_at_cut'])}, "
                            f"the rows give {counts['long_r1'] - counts['pass_at_cut']}")
    return checked, problems

"""The retained token-512 prefix audit of 1,024-horizon arms (seed paper §5.4, `gt512_prefix_audit`).

For every rollout longer than the audit cut (512 paper tokens; run.json `lengths.audit_prefix`), the
rollout table keeps the text of its first 512 tokens (`audit_prefix_text`) and where its first
`\\boxed` starts (`first_box_token`). The audit asks whether those 512 tokens already held the answer:
rfind_512 (where the last `\\boxed` of the prefix starts, -1 if none), ext_512 (its boxed answer, ""
without one) and r_512, the training reward of the prefix (the run's own gate) against the final
reward. Per arm: long rollouts, those with final R = 1, how many of them fail at the cut (no box yet /
a box that is wrong or unclosed) or pass there, and the median first-`\\boxed` token of the long R = 1
rollouts that have a box.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlvr_sweep.analysis.render import Table, num
from rlvr_sweep.analysis.source import Sweep
from rlvr_sweep.reward import extract_answer, training_reward
from rlvr_sweep.store import RUN_KEYS


def audit_rows(rollouts: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per rollout longer than its run's audit cut: the prefix's box, answer and reward."""
    info = runs[[*RUN_KEYS, "lengths.audit_prefix", "gate_chars"]].rename(columns={"lengths.audit_prefix": "cut"})
    read = [*RUN_KEYS, *(c for c in _READ if c in rollouts.columns and c not in RUN_KEYS)]  # no other text copied
    long = rollouts[read].merge(info, on=list(RUN_KEYS), how="inner")
    long = long[long["length"] > long["cut"]]
    out = []
    for r in long.itertuples(index=False):
        text = r.audit_prefix_text if isinstance(r.audit_prefix_text, str) else ""
        gate = None if pd.isna(r.gate_chars) else int(r.gate_chars)
        out.append({"unit": r.unit, "seed": r.seed, "step": r.step, "index": r.index, "length": r.length,
                    "cut": int(r.cut), "r_fin": float(r.reward), "has_text": bool(text),
                    "rfind_512": text.rfind("\\boxed"), "ext_512": extract_answer(text, fallback=None),
                    "r_512": training_reward(text, r.gold, gate) if text else 0.0,
                    "first_box_token": int(r.first_box_token)})
    return pd.DataFrame(out)


_READ = ("unit", "seed", "step", "index", "length", "reward", "audit_prefix_text", "gold", "first_box_token")


def summarize(audit: pd.DataFrame, n_rollouts: int) -> dict:
    win = audit[audit["r_fin"] == 1]
    fail = win[win["r_512"] == 0]
    boxed = win[win["first_box_token"] >= 0]["first_box_token"]
    return {"rollouts": n_rollouts, "long": len(audit), "long_r1": len(win), "fail_at_cut": len(fail),
            "no_box_at_cut": int((fail["rfind_512"] < 0).sum()), "box_wrong_at_cut": int((fail["rfind_512"] >= 0).sum()),
            "pass_at_cut": len(win) - len(fail), "missing_text": int((~audit["has_text"]).sum()),
            "median_first_box": float(np.median(boxed)) if len(boxed) else float("nan")}


def build_audit(sweep: Sweep) -> Table:
    title = "Token-512 prefix audit of long rollouts (§5.4, gt512_prefix_audit)"
    runs = sweep.runs
    if not len(runs) or "lengths.audit_prefix" not in runs.columns:
        return Table.unbuilt("audit", title, "the runs do not record an audit cut (run.json lengths.audit_prefix)")
    longer = (runs["horizon_tokens"] > runs["lengths.audit_prefix"]).groupby(runs["unit"], sort=False).all()
    long_units = [u for u in sweep.units() if longer[u]]  # every run of the arm rolls out past the cut
    if not long_units:
        return Table.unbuilt("audit", title, "no arm has a rollout horizon above the 512-token audit cut "
                                             "(run a 1,024-token arm, e.g. +arm=stopped_tree horizon=1024)")
    # every long arm's rollouts audited at once (one merge, one walk), then summarised arm by arm
    ro = sweep.rollouts
    ro = ro.loc[ro["unit"].isin(long_units).to_numpy(), [c for c in dict.fromkeys((*RUN_KEYS, *_READ))
                                                       if c in ro.columns]] if len(ro) else ro
    audit = audit_rows(ro, runs[runs["unit"].isin(long_units)]) if len(ro) else pd.DataFrame()
    audited = dict(iter(audit.groupby("unit", sort=False))) if len(audit) else {}
    rollouts = ro["unit"].value_counts().to_dict() if len(ro) else {}
    rows = []
    for u in long_units:
        mine = audited.get(u)
        summary = summarize(mine if mine is not None else _EMPTY, rollouts.get(u, 0))
        rows.append({"label": sweep.label(u), "unit": u, "cut": int(sweep.runs_of(u)["lengths.audit_prefix"].iloc[0]),
                     **summary})
    frame = pd.DataFrame(rows)
    return Table("audit", title, frame, _display(frame))


_EMPTY = pd.DataFrame(columns=["r_fin", "r_512", "rfind_512", "first_box_token", "has_text"])


def _pct(a, b) -> str:
    return f"{int(a)}/{int(b)} ({num(100 * a / b, 1)}%)" if b else f"{int(a)}/0"


def _display(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame([{
        "Arm": r["label"], "Cut": r["cut"], "L > cut": _pct(r["long"], r["rollouts"]),
        "Final R = 1 (of long)": _pct(r["long_r1"], r["long"]),
        "Fail at cut, pass at end": _pct(r["fail_at_cut"], r["long_r1"]),
        "No box at cut / wrong box / pass at cut": f"{r['no_box_at_cut']} / {r['box_wrong_at_cut']} / {r['pass_at_cut']}",
        "Median first \\boxed token": num(r["median_first_box"], 1),
    } for _, r in frame.iterrows()])

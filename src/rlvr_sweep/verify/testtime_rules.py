"""PASS 4, from stored rows: the test-time read-outs and probes obey their own rules (seed paper §7).

- Fork read-outs (`eval=fork3`): every item's fork positions, slots and tie-gating are recomputed from
  the root's stored margin pass with `evaluation.fork_rules` and the vote's tie test; every branch's
  fork tokens equal the margin pass at its position and its prefix is ``fork_pos + 1`` tokens; within
  each continuation batch every row ran the same ``max(min_continuation, cap - max K)`` steps, so
  ``eff_cap - K`` is that number; a finished branch is shorter than its eff_cap and an unfinished one
  reached it.
- Sampled read-outs: every item has draws 0..k-1 once, all from one sample seed.
- Probes: the discordant items are the greedy read-outs' (donor right, recipient wrong); the span, the
  mismatch positions and the recipient's self forks are recomputed from the stored teacher-forced
  arrays; every condition's cut and fork tokens are recomputed with `evaluation.probe.item_cuts`; the
  eff_cap arithmetic holds per condition batch.
Each check returns (number checked, problems).
"""

from __future__ import annotations

import pandas as pd

from rlvr_sweep.analysis.candidates import fork_tie
from rlvr_sweep.evaluation.fork_rules import (
    extra_first_gap_slots, first_gap_slots, hybrid_positions, min_margin_positions,
)
from rlvr_sweep.evaluation.forks import SETTING_COLUMNS
from rlvr_sweep.evaluation.probe import ProbeSettings, item_cuts
from rlvr_sweep.evaluation.probe_rules import mismatch_positions


def _where(label: str, benchmark, index) -> str:
    return f"{label} {benchmark} item {index}"


def _lengths_vs_caps(rows: pd.DataFrame, where: str) -> list[str]:
    out = []
    for _, r in rows.iterrows():
        if bool(r["finished"]) and not int(r["length"]) < int(r["eff_cap"]):
            out.append(f"{where}: a finished response of {r['length']} tokens is not below its eff_cap {r['eff_cap']}")
        if not bool(r["finished"]) and int(r["length"]) != int(r["eff_cap"]):
            out.append(f"{where}: an unfinished response of {r['length']} tokens stopped before its eff_cap "
                       f"{r['eff_cap']}")
    return out


def batch_problems(rows: pd.DataFrame, by: list[str], cap: int, min_new: int, label: str) -> list[str]:
    """eff_cap_i = K_i + max(min_new, cap - max_j K_j) within every continuation batch."""
    out = []
    for key, batch in rows.groupby(by, sort=False):
        runs = (batch["eff_cap"] - batch["prefix_len"]).unique()
        want = max(min_new, cap - int(batch["prefix_len"].max()))
        if len(runs) != 1 or int(runs[0]) != want:
            out.append(f"{label} batch {key}: eff_cap - K is {sorted(int(x) for x in runs)}, expected {want} "
                       f"(= max({min_new}, {cap} - max K))")
    return out


def fork_item_problems(item: pd.DataFrame, cap: int, where: str) -> list[str]:
    """One item of a fork read-out against the rules, from its stored rows."""
    roots = item[item["branch"] == 0]
    if len(roots) != 1:
        return [f"{where}: {len(roots)} root rows"]
    root = roots.iloc[0]
    s = {k: root[k] for k in SETTING_COLUMNS}
    margins, tokens = list(root["tf_margins"]), list(root["tf_tokens"])
    top1, top2 = list(root["tf_top1"]), list(root["tf_top2"])
    out = []
    if len(tokens) != min(int(s["margin_tokens"]), int(root["length"]) + int(bool(root["finished"]))):
        out.append(f"{where}: the margin pass covers {len(tokens)} tokens of the root")
    window = (int(s["fork_start"]), int(s["fork_end"]))
    sep, threshold = int(s["fork_separation"]), float(s["fork_threshold"])
    mm = min_margin_positions(margins, *window, sep)
    fg = list(first_gap_slots(margins, *window, threshold, sep))
    first = item[item["cont_round"] == 1].sort_values("branch")
    if list(first["fork_pos"]) != hybrid_positions(mm, [x.position for x in fg]):
        out.append(f"{where}: forks at {list(first['fork_pos'])}, the rules give "
                   f"{hybrid_positions(mm, [x.position for x in fg])}")
        return out
    fg_rows = item[item["fg_slot"].between(0, 2)].sort_values("fg_slot")
    tie = fork_tie([r for _, r in fg_rows.iterrows()])
    if set(item["fg_tie"].astype(bool)) != {tie}:
        out.append(f"{where}: fg_tie stored {sorted(set(item['fg_tie']))}, the vote says {tie}")
    if tie and int(s["tie_forks"]):
        fg += extra_first_gap_slots(margins, *window, threshold, [x.position for x in fg], int(s["tie_forks"]), sep)
    want = {("mm", k): t for k, t in enumerate(mm, 1) if t is not None}
    want.update({("fg", k): x.position for k, x in enumerate(fg, 1) if x.position is not None})
    have = {("mm", int(r["mm_slot"])): int(r["fork_pos"]) for _, r in item.iterrows() if r["mm_slot"] >= 1}
    have.update({("fg", int(r["fg_slot"])): int(r["fork_pos"]) for _, r in item.iterrows() if r["fg_slot"] >= 1})
    if have != want:
        out.append(f"{where}: slots {sorted(have.items())}, the rules give {sorted(want.items())}")
    fallback = {k: x.source == "fallback" for k, x in enumerate(fg, 1) if x.position is not None}
    for _, r in item[item["fg_slot"] >= 1].iterrows():
        if bool(r["fg_fallback"]) != fallback.get(int(r["fg_slot"])):
            out.append(f"{where}: FirstGap05 slot {r['fg_slot']} fallback flag {r['fg_fallback']}")
    for _, r in item[item["branch"] > 0].iterrows():
        t = int(r["fork_pos"])
        stored = (int(r["orig_token"]), int(r["inserted_token"]), int(r["top1_token"]), int(r["prefix_len"]))
        if stored != (tokens[t], top2[t], top1[t], t + 1) or abs(float(r["margin"]) - margins[t]) > 0:
            out.append(f"{where}: branch {r['branch']} at {t} stores (orig, inserted, top1, K) {stored}, the margin "
                       f"pass gives {(tokens[t], top2[t], top1[t], t + 1)}")
    if int(root["eff_cap"]) != cap or set(item["branches"]) != {len(item)}:
        out.append(f"{where}: root eff_cap {root['eff_cap']} (cap {cap}) or branch count {set(item['branches'])} "
                   f"!= {len(item)} rows")
    return out + _lengths_vs_caps(item, where)


def fork_problems(rows: pd.DataFrame, cap: int, label: str) -> tuple[int, list[str]]:
    """Every item and continuation batch of one fork read-out."""
    problems, checked = [], 0
    for (benchmark, index), item in rows.groupby(["benchmark", "index"], sort=False):
        checked += 1
        problems += fork_item_problems(item, cap, _where(label, benchmark, index))
    branches = rows[rows["branch"] > 0]
    if len(branches):
        problems += batch_problems(branches, ["benchmark", "cont_round", "cont_batch"], cap,
                                   int(rows["min_continuation"].iloc[0]), label)
    return checked, problems


def sampled_problems(rows: pd.DataFrame, label: str) -> tuple[int, list[str]]:
    problems, checked = [], 0
    if "draws" not in rows or rows["draws"].isna().any():
        return 0, [f"{label}: rows without the draws column (written by an older read-out: rerun it)"]
    k = int(rows["draws"].iloc[0])
    if rows["sample_seed"].nunique() != 1:
        problems.append(f"{label}: draws from several sample seeds {sorted(rows['sample_seed'].unique())}")
    for (benchmark, index), item in rows.groupby(["benchmark", "index"], sort=False):
        checked += 1
        if sorted(item["draw"]) != list(range(k)):
            problems.append(f"{_where(label, benchmark, index)}: draws {sorted(item['draw'])}, expected 0..{k - 1}")
    return checked, problems


def probe_problems(probe) -> tuple[int, list[str]]:
    """A probe folder's items and condition rows against the probe rules."""
    info, label = probe.info, f"probe {probe.path}"
    s = ProbeSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in info["settings"].items()})
    g = probe.greedy
    wide = g.pivot_table(index=["benchmark", "index"], columns="role", values="correct", aggfunc="first")
    discordant = sorted(wide.index[(wide["donor"] == 1) & (wide["recipient"] == 0)].tolist())
    items = probe.items  # a probe that found no discordant item stores an empty table
    stored = sorted(zip(items["benchmark"], items["index"])) if len(items) else []
    problems = [] if discordant == stored else [f"{label}: items {stored}, the greedy read-outs give {discordant}"]
    rows = probe.rows
    for _, it in probe.items.iterrows():
        where = _where(label, it["benchmark"], it["index"])
        donor, recipient = list(it["donor_tokens"]), list(it["recipient_tokens"])
        span = min(s.tf_tokens, len(donor))
        mism = mismatch_positions(list(it["tf_top1"]), donor[:span])
        own = min_margin_positions(list(it["self_tf_margins"]), s.fork_start, s.fork_end, s.fork_separation)
        own = tuple(-1 if t is None else t for t in own)
        kept = (int(it["span"]), list(it["mismatches"]), (int(it["self_t_min1"]), int(it["self_t_min2"])))
        if kept != (span, mism, own):
            problems.append(f"{where}: span / mismatches / self forks stored {(it['span'], list(it['mismatches']))}, "
                            f"recomputed {(span, mism, own)}")
            continue
        cuts = item_cuts(it, donor, recipient, s)
        mine = rows[(rows["benchmark"] == it["benchmark"]) & (rows["index"] == it["index"])]
        if sorted(mine["condition"]) != sorted(cuts):
            problems.append(f"{where}: conditions {sorted(mine['condition'])}, the rules give {sorted(cuts)}")
            continue
        for _, r in mine.iterrows():
            prefix, detail = cuts[r["condition"]]
            want = (len(prefix), detail.get("fork_pos", -1), detail.get("inserted_token", -1))
            if (int(r["prefix_len"]), int(r["fork_pos"]), int(r["inserted_token"])) != want:
                problems.append(f"{where} {r['condition']}: (K, fork_pos, inserted) "
                                f"{(r['prefix_len'], r['fork_pos'], r['inserted_token'])}, the rules give {want}")
        problems += _lengths_vs_caps(mine, where)
    if len(rows):
        problems += batch_problems(rows, ["condition", "cont_batch"], s.cap, s.min_continuation, label)
    return len(probe.items), problems

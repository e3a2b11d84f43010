"""Deterministic low-margin fork read-out of one checkpoint (seed paper §5.6 item 3, Table 5B).

Per item:
1. the greedy root (branch 0), decoded exactly as the greedy read-out (`settings.schedule`, batches of
   `batch_size`, the read-out cap);
2. one unpadded teacher-forced margin pass over the root's first `margin_tokens` (72) tokens
   (`teacher_forcing`): margin, top-1 and top-2 id at each position;
3. the fork positions of both rules (`fork_rules`): MinMargin (``t_min1``, ``t_min2``) and
   FirstGap05 (first / second ``margin <= 0.5`` with per-slot fallback), in ``[fork_start, fork_end)``;
   each distinct position ``t`` is one branch: the root's tokens before ``t``, then the teacher-forced
   top-2 token at ``t``, continued greedily (`continuation`: length-sorted batches of
   `continuation_batch_size`, ``eff_cap_i = cap - max_j K_j + K_i`` recorded per branch). The union
   is Hybrid-Fork's branch set; MinMargin-Fork@3 and FirstGap05-Fork@3 are views of it (the same
   continuation serves both rules when their positions coincide);
4. TieGated-FG05: when FirstGap05's three branches have no majority (`reward.no_majority`, the rule the
   votes use), `tie_forks` (2) more first-gap
   forks (FG3, FG4; `fork_rules.extra_first_gap_slots`) are continued in a second round.

One `grades` row per branch. Columns beside the greedy ones: ``readout``, ``branch`` (0 = root, then in
order of creation), ``fork_pos`` (-1 for the root), ``prefix_len`` (K: root tokens kept + the inserted
one), ``margin`` (at ``fork_pos``), ``orig_token`` (the root's own token there), ``inserted_token``
(top-2), ``top1_token``, ``eff_cap``, ``cont_round`` / ``cont_batch`` (which continuation batch),
``mm_slot`` / ``fg_slot`` (the branch's slot in MinMargin (0-2) / FirstGap05 and TieGated (0-4); -1:
not used by the rule), ``fg_fallback``, ``fg_tie`` (the item's FirstGap05 branches tied), ``branches``
(branches of the item). The root row also keeps the margin pass: ``tf_prompt`` (the prompt's ids),
``tf_tokens``, ``tf_margins``, ``tf_top1``, ``tf_top2`` (verify re-runs it on a sample). Every row also
carries the settings it was made with (`SETTING_COLUMNS`, in this profile's tokens).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlvr_sweep.data import encode_prompts
from rlvr_sweep.evaluation.continuation import continue_prefixes
from rlvr_sweep.evaluation.fork_rules import (
    FALLBACK, extra_first_gap_slots, first_gap_slots, hybrid_positions, min_margin_positions,
)
from rlvr_sweep.evaluation.greedy import grade_row
from rlvr_sweep.evaluation.readout import ReadoutSettings
from rlvr_sweep.evaluation.schedule import decode_readout
from rlvr_sweep.evaluation.teacher_forcing import TeacherForced, teacher_forced
from rlvr_sweep.reward import grading, no_majority

__all__ = ["SETTING_COLUMNS", "ItemForks", "plan_item_forks", "evaluate_forks"]
# the read-out settings each row carries, in this profile's tokens
SETTING_COLUMNS = ("margin_tokens", "fork_start", "fork_end", "fork_threshold", "fork_separation", "tie_forks",
                   "continuation_batch_size", "min_continuation")


@dataclass
class ItemForks:
    """One item's margin pass and fork positions (each distinct position is continued once)."""
    tf: TeacherForced
    tf_tokens: list[int]
    min_margin: tuple[int | None, int | None]
    first_gap: list  # fork_rules.Slot per FirstGap05 / TieGated slot (1-based slot k at index k - 1)
    positions: list[int]  # round-1 branch positions (Hybrid's), in branch order 1, 2, ...
    tie: bool = False


def plan_item_forks(tf: TeacherForced, tf_tokens: list[int], s: ReadoutSettings) -> ItemForks:
    mm = min_margin_positions(tf.margins, s.fork_start, s.fork_end, s.fork_separation)
    fg = list(first_gap_slots(tf.margins, s.fork_start, s.fork_end, s.fork_threshold, s.fork_separation))
    return ItemForks(tf, tf_tokens, mm, fg, hybrid_positions(mm, [slot.position for slot in fg]))


def evaluate_forks(policy, rows: list[dict], *, benchmark: str, phase: str, settings: ReadoutSettings,
                   grade=grading.grade, on_batch=None, readout: str = "fork3") -> list[dict]:
    """Graded root and fork branches of every item (see the module docstring); rows item by item."""
    s = settings
    model = policy.model
    prompts = encode_prompts(policy.tokenizer, [r["problem"] for r in rows], s.prompt)
    root = decode_readout(model, prompts, schedule=s.schedule, engine=s.engine, batch_size=s.batch_size,
                          max_new_tokens=s.max_new_tokens, eos_id=policy.eos_id, pad_id=policy.pad_id,
                          temperature=0.0, top_p=1.0, slots=s.slots, on_batch=on_batch)
    plans = []
    for prompt, tokens in zip(prompts, root.tokens):
        tf_tokens = list(tokens[: s.margin_tokens])
        plans.append(plan_item_forks(teacher_forced(model, prompt, tf_tokens), tf_tokens, s))

    used = {k: getattr(s, k) for k in SETTING_COLUMNS}  # every row says how it was made (verify rechecks it)

    def row_of(i: int, tokens, length: int, finished: bool, extra: dict) -> dict:
        return {**grade_row(policy, rows[i], tokens, length, finished, benchmark=benchmark, phase=phase, index=i,
                            grade=grade, settings=s), "readout": readout, **extra, **used}

    out: list[list[dict]] = []
    for i, plan in enumerate(plans):
        out.append([row_of(i, root.tokens[i], root.lengths[i], root.finished[i], {
            "branch": 0, "fork_pos": -1, "prefix_len": 0, "margin": math.nan, "orig_token": -1,
            "inserted_token": -1, "top1_token": -1, "eff_cap": s.max_new_tokens, "cont_round": 0, "cont_batch": -1,
            "mm_slot": 0, "fg_slot": 0, "fg_fallback": False, "tf_prompt": prompts[i], "tf_tokens": plan.tf_tokens,
            "tf_margins": plan.tf.margins, "tf_top1": plan.tf.top1, "tf_top2": plan.tf.top2})])

    def grow(specs: list[tuple[int, int]], round_: int) -> None:
        """Continue the fork at position t of item i for every (i, t); append the graded branches."""
        cont = continue_prefixes(
            model, [prompts[i] for i, _ in specs],
            [list(root.tokens[i][:t]) + [plans[i].tf.top2[t]] for i, t in specs],
            cap=s.max_new_tokens, batch_size=s.continuation_batch_size, min_new=s.min_continuation,
            engine=s.engine, eos_id=policy.eos_id, pad_id=policy.pad_id,
            on_batch=(lambda items, tokens: on_batch(0, tokens)) if on_batch else None)
        for j, (i, t) in enumerate(specs):
            tf = plans[i].tf
            out[i].append(row_of(i, cont.tokens[j], len(cont.tokens[j]), cont.finished[j], {
                "branch": len(out[i]), "fork_pos": t, "prefix_len": t + 1, "margin": tf.margins[t],
                "orig_token": root.tokens[i][t], "inserted_token": tf.top2[t], "top1_token": tf.top1[t],
                "eff_cap": cont.eff_cap[j], "cont_round": round_, "cont_batch": cont.batch[j]}))

    grow([(i, t) for i, plan in enumerate(plans) for t in plan.positions], 1)
    if s.tie_forks:
        extra = []
        for i, plan in enumerate(plans):
            fg_rows = [out[i][0]] + [_at(out[i], slot.position) for slot in plan.first_gap if slot.position is not None]
            plan.tie = no_majority(fg_rows)
            if plan.tie:
                slots = extra_first_gap_slots(plan.tf.margins, s.fork_start, s.fork_end, s.fork_threshold,
                                              [slot.position for slot in plan.first_gap], s.tie_forks,
                                              s.fork_separation)
                plan.first_gap += slots
                have = {b["fork_pos"] for b in out[i]}  # a MinMargin branch already continues that fork
                extra += [(i, slot.position) for slot in slots
                          if slot.position is not None and slot.position not in have]
        if extra:
            grow(extra, 2)
    for i, plan in enumerate(plans):
        _label_slots(out[i], plan)
    return [r for item in out for r in item]


def _at(branches: list[dict], position: int) -> dict:
    return next(b for b in branches if b["fork_pos"] == position)


def _label_slots(branches: list[dict], plan: ItemForks) -> None:
    """Each branch's slot in MinMargin / FirstGap05(+TieGated), the item's tie flag and branch count."""
    for b in branches[1:]:
        b.update(mm_slot=-1, fg_slot=-1, fg_fallback=False, tf_prompt=None, tf_tokens=None, tf_margins=None,
                 tf_top1=None, tf_top2=None)
    for k, t in enumerate(plan.min_margin, start=1):
        if t is not None:
            _at(branches, t)["mm_slot"] = k
    for k, slot in enumerate(plan.first_gap, start=1):
        if slot.position is not None:
            _at(branches, slot.position).update(fg_slot=k, fg_fallback=slot.source == FALLBACK)
    for b in branches:
        b.update(fg_tie=plan.tie, branches=len(branches))

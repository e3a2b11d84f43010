"""A small hand-made sweep (collect-shaped tables) whose table numbers are worked out by hand in the tests.

Units (profile smoke, benchmark toy_heldout with 4 items, rollout cap 8 tokens, read-out cap 16):
  A = baseline (paper arm "1"), flat, seeds 42 / 101 / 7;
  B = stopped_tree (paper arm "5"), a flat-warmup step then a tree step, seeds 42 / 101 / 7, audit cut 4;
  C = ablate_skip (paper arm "ablate_skip"), seed 101 only.
Every step has K = 2 pairs of B = 2 leaves. The ledgers obey PASS 3's laws and run.json matches them.
"""

from __future__ import annotations

import pandas as pd

from rlvr_sweep.analysis import Sweep

CAP, EVAL_CAP, PROMPT, GOLD_TRAIN = 8, 16, 5, "4"
GOLDS = ["5", "4", "10", "1"]  # items i0..i3
BASE_CORRECT = [0, 0, 0, 1]  # the untrained model: 25 %

# (answer, length, capped, correct) per item, per seed: unit A (worked through in test_tables.py)
A_GRADES = {
    42: [("5", 4, False, 1), ("3", 10, False, 0), ("7", 16, True, 0), ("1", 3, False, 1)],
    101: [("5", 6, False, 1), ("4", 5, False, 1), ("8", 1, False, 0), ("1", 3, False, 1)],
    7: [("6", 3, False, 0), ("2", 1, False, 0), ("9", 16, True, 0), ("1", 2, False, 1)],
}
B_CORRECT = {42: [1, 1, 0, 1], 101: [1, 1, 1, 1], 7: [0, 1, 0, 1]}
C_CORRECT = {101: [1, 1, 0, 0]}

# Steps as pairs: (category, tau, (pl0, l0, r0), (pl1, l1, r1)) x K = 2
FLAT = "flat"
A_STEPS = {
    42: [[(FLAT, 0, (0, 3, 1), (0, 8, 0)), (FLAT, 0, (0, 8, 0), (0, 5, 0))],
         [(FLAT, 0, (0, 2, 0), (0, 2, 0)), (FLAT, 0, (0, 2, 0), (0, 2, 0))]],
    101: [[(FLAT, 0, (0, 4, 1), (0, 4, 1)), (FLAT, 0, (0, 8, 0), (0, 8, 0))],
          [(FLAT, 0, (0, 2, 1), (0, 2, 1)), (FLAT, 0, (0, 2, 1), (0, 2, 1))]],
    7: [[(FLAT, 0, (0, 8, 0), (0, 3, 1)), (FLAT, 0, (0, 6, 0), (0, 3, 1))],
        [(FLAT, 0, (0, 8, 0), (0, 8, 0)), (FLAT, 0, (0, 8, 0), (0, 8, 0))]],
}
WARM = [("flat_warmup", 0, (0, 3, 1), (0, 8, 0)), ("flat_warmup", 0, (0, 4, 0), (0, 4, 0))]
B_STEPS = {
    42: [WARM, [("causal_non_eos", 2, (2, 8, 0), (2, 5, 1)), ("terminal_dup", 3, (3, 3, 0), (3, 3, 0))]],
    101: [WARM, [("causal_non_eos", 2, (2, 6, 1), (2, 7, 0)), ("terminal_dup", 3, (3, 3, 1), (3, 3, 1))]],
    7: [WARM, [("causal_non_eos", 2, (2, 8, 0), (2, 8, 0)), ("terminal_dup", 3, (3, 3, 1), (3, 3, 1))]],
}
C_STEPS = {101: [[(FLAT, 0, (0, 3, 1), (0, 4, 0)), (FLAT, 0, (0, 4, 0), (0, 4, 0))],
                 [(FLAT, 0, (0, 2, 1), (0, 2, 1)), (FLAT, 0, (0, 2, 1), (0, 2, 1))]]}
# The first-512-token (here: 4-token) text of B's long rollouts that finished with R = 1, and where their
# first \boxed starts: seed 42 has no box yet at the cut (it starts at token 4), seed 101 has one at token 1.
AUDIT = {(42, 1, 0, 1): ("work", 4), (101, 1, 0, 0): ("a \\boxed{4}", 1)}

UNITS = {  # arm -> (paper arm, grades, steps, optimizer step, gate chars, audit cut)
    "baseline": ("1", None, A_STEPS, "full_backward", None, 8),
    "stopped_tree": ("5", B_CORRECT, B_STEPS, "zero_grad", 2, 4),
    "ablate_skip": ("ablate_skip", C_CORRECT, C_STEPS, "skip", None, 8),
}


def _keys(arm: str, seed: int) -> dict:
    return {"arm": arm, "horizon": 512, "seed": seed, "run_hash": f"{arm[:4]}{seed:04d}",
            "paper_arm": UNITS[arm][0]}


def _grade_rows(arm: str, seed: int) -> list[dict]:
    rows = []
    for i, gold in enumerate(GOLDS):
        if arm == "baseline":
            answer, length, capped, ok = A_GRADES[seed][i]
        else:
            ok = UNITS[arm][1][seed][i]
            answer, length, capped = (gold if ok else "0"), 5, False
        for phase, correct, ans in (("base", BASE_CORRECT[i], gold if BASE_CORRECT[i] else "0"), ("trained", ok, answer)):
            trained = phase == "trained"
            rows.append({**_keys(arm, seed), "phase": phase, "benchmark": "toy_heldout", "source": "toy_heldout",
                         "item_id": f"i{i}", "index": i, "length": length if trained else 3,
                         "finished": not (capped and trained), "capped": capped and trained,
                         "has_box": not (capped and trained), "capped_unboxed": capped and trained,
                         "inc_trunc": capped and trained and not correct, "extracted": ans, "gold": gold,
                         "correct": bool(correct), "response": f"\\boxed{{{ans}}}"})
    return rows


def _ledgers(arm: str, seed: int):
    steps, rollouts, pairs = [], [], []
    optimizer_step = UNITS[arm][3]
    for step, spec in enumerate(UNITS[arm][2][seed]):
        leaves = []
        for k, (category, tau, *branches) in enumerate(spec):
            for b, (pl, length, r) in enumerate(branches):
                leaves.append((k, b, pl, length, r))
            stage1 = 2 * tau if category != FLAT and category != "flat_warmup" else branches[0][1] + branches[1][1]
            pairs.append({**_keys(arm, seed), "step": step, "k": k, "category": category, "tau": tau,
                          "pl0": branches[0][0], "pl1": branches[1][0], "l0": branches[0][1], "l1": branches[1][1],
                          "r0": float(branches[0][2]), "r1": float(branches[1][2]),
                          "correct0": float(branches[0][2]), "correct1": float(branches[1][2]),
                          "finished0": branches[0][1] < CAP, "finished1": branches[1][1] < CAP,
                          "stage1_leaf_tokens": stage1, "stage2_generated": branches[0][1] + branches[1][1] - stage1})
        rewards = [float(r) for *_, r in leaves]
        leaf_tokens = sum(length for _, _, _, length, _ in leaves)
        for index, (k, b, pl, length, r) in enumerate(leaves):
            long = length > UNITS[arm][5]
            # every rollout's text holds a box (at token 1); a long one's stored prefix "xxxx" holds none, so its
            # box starts after the cut (PASS 3 checks first_box_token against the texts)
            default = (None, UNITS[arm][5] + 1 if long else 1)
            text, box = AUDIT.get((seed, step, k, b), default) if arm == "stopped_tree" else default
            rollouts.append({**_keys(arm, seed), "step": step, "index": index, "k": k, "b": b,
                             "question_id": f"q{step}", "gold": GOLD_TRAIN, "prefix_len": pl, "length": length,
                             "reward": float(r), "correct": float(r), "finished": length < CAP, "capped": length == CAP,
                             "text": ("ab \\boxed{4}" if r else "ab \\boxed{0}"),
                             "first_box_token": box, "audit_prefix_text": (text or "xxxx") if long else None})
        active = len(set(rewards)) > 1
        backward = active or optimizer_step == "full_backward"
        action = "backward_step" if backward else ("zero_grad_step" if optimizer_step == "zero_grad" else "skipped")
        steps.append({**_keys(arm, seed), "step": step, "question_id": f"q{step}", "rewards": rewards,
                      "mean_reward": sum(rewards) / 4, "active": active, "std": 0.0, "update": True, "action": action,
                      "grad_norm": 1.0, "loss": 0.0, "gen_tokens": leaf_tokens + 2, "prefill_tokens": 4 * PROMPT,
                      "padded_prefill_tokens": 4 * PROMPT + 3, "untrimmed_steps": 4 * CAP + 2,
                      "leaf_tokens": leaf_tokens, "prompt_tokens": PROMPT,
                      "bwd_out_tokens": leaf_tokens if backward else 0,
                      "bwd_full_tokens": leaf_tokens + 4 * PROMPT if backward else 0,
                      "capped": sum(length == CAP for *_, length, _ in leaves), "seconds": 0.5})
    return steps, rollouts, pairs


def tables() -> dict[str, pd.DataFrame]:
    """collect-shaped tables of the hand-made sweep."""
    runs, out = [], {"steps": [], "rollouts": [], "pairs": [], "grades": []}
    for arm, (paper, _, steps_spec, optimizer_step, gate, cut) in UNITS.items():
        for seed in steps_spec:
            steps, rollouts, pairs = _ledgers(arm, seed)
            grades = _grade_rows(arm, seed)
            out["steps"] += steps
            out["rollouts"] += rollouts
            out["pairs"] += pairs
            out["grades"] += grades
            trained = [g["correct"] for g in grades if g["phase"] == "trained"]
            totals = {c: sum(s[c] for s in steps) for c in ("gen_tokens", "prefill_tokens", "padded_prefill_tokens",
                                                            "untrimmed_steps", "bwd_out_tokens", "bwd_full_tokens",
                                                            "seconds")}
            totals.update(steps=len(steps), active_steps=sum(s["active"] for s in steps))
            runs.append({**_keys(arm, seed), "profile": "smoke", "status": "finished", "params": 1_000_000,
                         "group_hash": f"smoke/{arm}/h512", "base_hash": "tiny-base",
                         "horizon_tokens": CAP, "eval_max_new_tokens": EVAL_CAP, "gate_chars": gate,
                         "lengths": {"horizon": CAP, "audit_prefix": cut}, "totals": totals,
                         "accuracy": {"base": {"toy_heldout": 0.25}, "trained": {"toy_heldout": sum(trained) / 4}},
                         "wall_seconds": 2.0, "finished_at": float(seed), "run_dir": "",
                         "length_scale": 0.125, "optimizer_step": optimizer_step, "accumulate_questions": 1})
    return {"runs": pd.json_normalize(runs), **{k: pd.DataFrame(v) for k, v in out.items()}}


def sweep() -> Sweep:
    return Sweep.from_tables(tables())

"""A hand-made sweep with test-time read-outs whose Table 4 / 5A / 5B numbers are worked out in the tests.

On top of `handmade` (read-out cap 16, MDL window 2 <= L < 16 at length scale 1/8), three task=evaluate
runs read the trained models of stopped_tree (paper arm 5):
  E1 sampled_k3 of seed 42's model (3 draws of 4 items), E2 fork3 of seed 101's model (4 items),
  E3 greedy of seed 101's model at batch 64 (its training run read out at batch 32: the batch audit).
A probe (A = seed 42 -> B = seed 101) has 3 discordant items.
"""

from __future__ import annotations

import math

import pandas as pd

from rlvr_sweep.analysis import Sweep
from rlvr_sweep.analysis.probes import Probe
from tests.analysis import handmade

RUN_DIR = {42: "/sweep/smoke/stopped_tree/h512_s42_stop0042", 101: "/sweep/smoke/stopped_tree/h512_s101_stop0101"}
SAVED = {42: "digest-of-seed-42-weights", 101: "digest-of-seed-101-weights"}  # what each run saved as model/
GOLDS = handmade.GOLDS  # "5", "4", "10", "1"

# E1 draws per item: (answer, length, correct, capped_unboxed)
SAMPLED = [
    [("5", 4, 1, False), ("5", 6, 1, False), ("6", 3, 0, False)],  # majority 5
    [("3", 10, 0, False), ("4", 5, 1, False), ("2", 1, 0, False)],  # 1-1-1: MaxLen L10 (0), MDL L5 (1)
    [("7", 16, 0, True), ("8", 1, 0, False), ("9", 16, 0, True)],  # empties; none eligible: MDL falls back (fb)
    [("1", 3, 1, False)] * 3,
]

# E2 branches per item: (branch, fork_pos, answer, length, correct, eff_cap, finished, mm_slot, fg_slot)
F = True
FORKS = [
    [(0, -1, "5", 5, 1, 16, F, 0, 0), (1, 3, "5", 7, 1, 16, F, 1, 1), (2, 5, "6", 4, 0, 14, F, 2, -1),
     (3, 1, "5", 6, 1, 15, F, -1, 2)],
    [(0, -1, "3", 10, 0, 16, F, 0, 0), (1, 2, "4", 5, 1, 16, F, 1, 1), (2, 6, "4", 8, 1, 16, F, 2, 2)],
    [(0, -1, "7", 6, 0, 16, F, 0, 0), (1, 2, "8", 3, 0, 16, F, 1, 1), (2, 5, "10", 16, 1, 16, False, 2, 2),
     (3, 7, "10", 5, 1, 16, F, -1, 3), (4, 9, "10", 7, 1, 16, F, -1, 4)],
    [(0, -1, "", 16, 0, 16, False, 0, 0), (1, 3, "2", 4, 0, 4, False, 1, 1), (2, 6, "1", 9, 1, 16, F, 2, 2),
     (3, 9, "1", 1, 1, 16, F, -1, 3)],
]
TIES = [False, False, True, True]
E3_CORRECT = [1, 1, 0, 1]  # seed 101's trained read-out at batch 32 is [1, 1, 1, 1]


def _row(keys: dict, phase: str, index: int, answer: str, length: int, correct, finished=True, unboxed=False,
         **extra) -> dict:
    return {**keys, "phase": phase, "benchmark": "toy_heldout", "source": "toy_heldout", "item_id": f"i{index}",
            "index": index, "length": length, "finished": finished, "capped": not finished,
            "has_box": not unboxed, "capped_unboxed": unboxed, "inc_trunc": not finished and not correct,
            "extracted": answer, "gold": GOLDS[index], "correct": bool(correct), "response": f"\\boxed{{{answer}}}",
            **extra}


def tables() -> dict[str, pd.DataFrame]:
    t = handmade.tables()
    runs = t["runs"]
    runs["eval_batch_size"] = 32
    for seed, folder in RUN_DIR.items():
        runs.loc[(runs["arm"] == "stopped_tree") & (runs["seed"] == seed), "run_dir"] = folder
        runs.loc[(runs["arm"] == "stopped_tree") & (runs["seed"] == seed), "saved_model_digest"] = SAVED[seed]
    evals, grades = [], []
    for name, seed, model, batch in (("e1", 42, 42, 32), ("e2", 101, 101, 32), ("e3", 101, 101, 64)):
        keys = {"arm": "custom", "horizon": 512, "seed": seed, "run_hash": name, "paper_arm": "", "readout_cap": 16}
        evals.append({**keys, "profile": "smoke", "status": "finished", "task": "evaluate", "finished_at": 1e9,
                      "run_dir": f"/sweep/smoke/evaluate/{name}", "model_source": f"{RUN_DIR[model]}/model",
                      "model_digest": SAVED[model],
                      "eval_batch_size": batch, "eval_max_new_tokens": 16, "length_scale": 0.125})
        if name == "e1":
            for i, draws in enumerate(SAMPLED):
                for d, (a, n, ok, unboxed) in enumerate(draws):
                    grades.append(_row(keys, "eval", i, a, n, ok, finished=not unboxed, unboxed=unboxed,
                                       readout="sampled_k3", draw=d, draws=3, sample_seed=1042, temperature=0.6))
        elif name == "e2":
            for i, branches in enumerate(FORKS):
                for b, pos, a, n, ok, cap, fin, mm, fg in branches:
                    grades.append(_row(keys, "eval", i, a, n, ok, finished=fin, unboxed=not a, readout="fork3",
                                       branch=b, fork_pos=pos, prefix_len=pos + 1, eff_cap=cap, mm_slot=mm, fg_slot=fg,
                                       fg_fallback=False, fg_tie=TIES[i], branches=len(branches)))
        else:
            for i, ok in enumerate(E3_CORRECT):
                grades.append(_row(keys, "eval", i, GOLDS[i] if ok else "0", 5, ok))
    t["runs"] = pd.concat([runs, pd.json_normalize(evals)], ignore_index=True)
    t["grades"] = pd.concat([t["grades"], pd.DataFrame(grades)], ignore_index=True)
    return t


EOS = 99
LOG_HALF = math.log(0.5)
PROBE_ITEMS = [  # (index, donor tokens, span, tf_top1, tf_top2, tf_margins)
    (0, [10, 11, 12, 13, EOS], 4, [10, 20, 12, 13], [5, 11, 6, 7], [8.0, 0.5, 6.0, 7.0]),
    (1, [1, 2, 3], 3, [1, 2, 3], [4, 4, 4], [4.0, 4.0, 4.0]),
    (2, [5, 6], 2, [7, 8], [5, 9], [0.2, 0.4]),
]
# (condition, item, K, fork_pos, orig, top1, inserted, correct)
PROBE_ROWS = [
    ("K0_none", 0, 0, -1, -1, -1, -1, 1), ("K0_none", 1, 0, -1, -1, -1, -1, 0), ("K0_none", 2, 0, -1, -1, -1, -1, 0),
    ("MismatchPrefix_1_donor", 0, 2, 1, -1, -1, -1, 1), ("MismatchPrefix_1_donor", 1, 3, 2, -1, -1, -1, 1),
    ("MismatchPrefix_1_donor", 2, 1, 0, -1, -1, -1, 0),
    ("Self_MinMargin_Top2_Rank1", 0, 3, 2, 7, 7, 8, 0), ("Self_MinMargin_Top2_Rank1", 1, 2, 1, 5, 6, 4, 1),
    ("Self_Identity_Ctrl_Rank1", 0, 3, 2, 7, 7, 7, 0), ("Self_Identity_Ctrl_Rank1", 1, 2, 1, 5, 6, 5, 0),
    ("Self_MinMargin_Top2_Rank2", 0, 5, 4, 3, 3, 4, 1), ("Self_MinMargin_Top2_Rank2", 1, 4, 3, 9, 9, 9, 0),
    ("Self_Identity_Ctrl_Rank2", 0, 5, 4, 3, 3, 3, 0), ("Self_Identity_Ctrl_Rank2", 1, 4, 3, 9, 9, 9, 1),
]


def probe() -> Probe:
    items = pd.DataFrame([{"benchmark": "toy_heldout", "index": i, "item_id": f"i{i}", "donor_tokens": donor,
                           "span": span, "tf_top1": top1, "tf_top2": top2, "tf_margins": margins,
                           "tf_logprob": [LOG_HALF] * span} for i, donor, span, top1, top2, margins in PROBE_ITEMS])
    rows = pd.DataFrame([{"benchmark": "toy_heldout", "index": i, "condition": c, "prefix_len": k, "fork_pos": pos,
                          "orig_token": orig, "top1_token": top1, "inserted_token": ins, "correct": bool(ok)}
                         for c, i, k, pos, orig, top1, ins, ok in PROBE_ROWS])
    info = {"donor": {"label": "A", "run_dir": RUN_DIR[42], "model_digest": SAVED[42]},
            "recipient": {"label": "B", "run_dir": RUN_DIR[101], "model_digest": SAVED[101]}}
    return Probe(path="/sweep/smoke/probes/p", info=info, greedy=pd.DataFrame(), items=items, rows=rows)


def sweep() -> Sweep:
    s = Sweep.from_tables(tables())
    s.probes = [probe()]
    return s

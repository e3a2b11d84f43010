"""PASS 4: a bfloat16 model's logit margins are multiples of 1/128; a stored margin that is not fails."""

from __future__ import annotations

import pandas as pd
import torch

from rlvr_sweep.analysis import Sweep
from rlvr_sweep.verify.dyadic import dyadic_problems


def test_a_bfloat16_margin_is_k_over_128():
    logits = torch.tensor([13.37, 12.91, 1.5, -3.2]).to(torch.bfloat16).float()  # two top logits, as stored
    margin = float(logits[0] - logits[1])
    assert (margin * 128) == round(margin * 128)  # 13.375 - 12.875 = 0.5


def fork_sweep(dtype: str, margins) -> Sweep:
    keys = {"arm": "rg_cf_grpo", "horizon": 1024, "seed": 42, "run_hash": "h", "paper_arm": "15"}
    runs = pd.DataFrame([{**keys, "group_hash": "g", "profile": "paper", "run_dir": "/r", "finished_at": 0.0}])
    pairs = pd.DataFrame([{**keys, "step": 4, "k": k, "category": "cf_first_gap", "fork_margin": m, "min_margin": m,
                           "window_margins": [1.0, m]} for k, m in enumerate(margins)])
    sweep = Sweep.from_tables({"runs": runs, "pairs": pairs, "steps": pd.DataFrame(), "rollouts": pd.DataFrame(),
                               "grades": pd.DataFrame()})
    sweep.runs["config"] = [{"model.dtype": dtype}]
    return sweep


def test_fork_pair_margins_of_a_bfloat16_run_are_checked():
    assert dyadic_problems(fork_sweep("bfloat16", [0.5, 0.125])) == (8, [])  # 2 pairs x (fork, min, 2 window)
    checked, problems = dyadic_problems(fork_sweep("bfloat16", [0.5, 0.3]))
    assert checked == 8 and len(problems) == 3  # pair 1's fork, min and window margin
    assert "rg_cf_grpo seed 42 step 4 pair 1 fork_margin: 0.3 is not k/128" in problems[0]
    assert dyadic_problems(fork_sweep("float32", [0.3])) == (0, [])  # float32 margins are not dyadic

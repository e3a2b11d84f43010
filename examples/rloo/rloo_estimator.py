"""A leave-one-out (RLOO) baseline as an estimator of one's own, registered from outside the package.

    A_i = R_i - mean_{j != i} R_j = G / (G - 1) * (R_i - Rbar)

on every token of leaf i (the baseline TRL's RLOO trainer and TreeRL use). Importing this module
(`plugins=[rloo_estimator]`, with this folder on PYTHONPATH, or `plugins=[examples/rloo/rloo_estimator.py]`)
registers it as `estimator.name=rloo`, with the checks, ledgers and identity rules of a built-in option.
"""

import torch

from rlvr_sweep.extend import ESTIMATORS


@ESTIMATORS.register("rloo", kind="leaf")
def rloo(rewards: torch.Tensor, shape) -> torch.Tensor:
    """Leave-one-out advantages of a (K, B) group; an all-equal group is exactly zero (the framework calls it
    inactive)."""
    r = rewards.to(torch.float32)
    return r - (r.sum() - r) / (r.numel() - 1)

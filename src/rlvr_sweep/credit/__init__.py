"""Credit stage: pure functions from rewards (and tree structure) to advantages (paper §1, §4.3).

`ESTIMATORS` (the `estimator.name` choice, `credit.estimators`) holds every credit rule, each of a kind
whose calling convention `credit.kinds` owns (`bind_estimator` -> `BoundEstimator`, which turns what an
option returns into a `Credit` per group): leaf GRPO
(`grpo_advantages`, (R - mean) / (std + 1e-4)), Dr. GRPO (`dr_grpo`), the tree estimators (`tree_mean`
with beta and alpha, `clamped_prefix`), which credit a pair's shared prefix and its continuations
separately (`TreeCredit`), and the counterfactual fork-pair ones (`cf_uncond`, `cf_rg`, `cf_pb`:
`cf_credit`), which also list their fork-hinge terms; a `batch` estimator (`grpo_batch_std`) credits every
group of an optimizer update at once. `token_advantages` spreads a credit over
completion tokens. No config and no model enters here.
"""

from rlvr_sweep.credit.counterfactual import (
    CfCredit, HingePair, cf_credit, cf_pair_rows, cf_step_fields, fork_hinge_loss, loss_credit, signed_token_mass,
)
from rlvr_sweep.credit.estimators import ESTIMATORS, dr_grpo, grpo, grpo_batch_std
from rlvr_sweep.credit.grpo import STD_KINDS, grpo_advantages, is_homogeneous
from rlvr_sweep.credit.kinds import KINDS, BoundEstimator, Credit, GroupShape, Kind, bind_estimator
from rlvr_sweep.credit.tree import (
    TreeCredit, clamped_prefix_advantages, per_leaf_prefix, token_advantages, tree_mean_advantages,
    tree_mean_credit, zero_cont_token_mass,
)

__all__ = [
    "BoundEstimator", "CfCredit", "Credit", "ESTIMATORS", "GroupShape", "HingePair", "KINDS", "Kind", "STD_KINDS",
    "TreeCredit", "bind_estimator", "cf_credit", "cf_pair_rows", "cf_step_fields", "clamped_prefix_advantages",
    "dr_grpo", "fork_hinge_loss", "grpo", "grpo_batch_std", "grpo_advantages", "is_homogeneous", "loss_credit",
    "per_leaf_prefix", "signed_token_mass", "token_advantages", "tree_mean_advantages", "tree_mean_credit",
    "zero_cont_token_mass",
]

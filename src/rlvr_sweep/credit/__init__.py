"""Credit stage: pure functions from rewards (and tree structure) to advantages (paper §1, §4.3).

`grpo_advantages` is leaf-level GRPO, (R - mean) / (std + 1e-4); the tree estimators (`tree_mean`
with beta and alpha, `clamped_prefix`) credit a pair's shared prefix and its continuations
separately, as a `TreeCredit` of per-leaf prefix and continuation advantages; `token_advantages`
spreads them over completion tokens. The counterfactual estimators (`cf_uncond`, `cf_rg`, `cf_pb`,
registry `CF_ESTIMATORS`) credit fork pairs and list their fork-hinge terms. No config and no model
enters here.
"""

from rlvr_sweep.credit.counterfactual import (
    CF_ESTIMATORS, CfCredit, HingePair, cf_credit, cf_pair_rows, cf_pb, cf_rg, cf_step_fields, cf_uncond,
    fork_hinge_loss, get_cf_estimator, loss_credit, signed_token_mass,
)
from rlvr_sweep.credit.grpo import ESTIMATORS, STD_KINDS, get_estimator, grpo_advantages, is_homogeneous
from rlvr_sweep.credit.tree import (
    TREE_ESTIMATORS, TreeCredit, clamped_prefix_advantages, get_tree_estimator, per_leaf_prefix, token_advantages,
    tree_mean_advantages, tree_mean_credit, zero_cont_token_mass,
)

__all__ = [
    "CF_ESTIMATORS", "CfCredit", "HingePair", "cf_credit", "cf_pair_rows", "cf_pb", "cf_rg", "cf_step_fields",
    "cf_uncond", "fork_hinge_loss", "get_cf_estimator", "loss_credit", "signed_token_mass",
    "ESTIMATORS", "STD_KINDS", "TREE_ESTIMATORS", "TreeCredit", "clamped_prefix_advantages", "get_estimator",
    "get_tree_estimator", "grpo_advantages", "is_homogeneous", "per_leaf_prefix", "token_advantages",
    "tree_mean_advantages", "tree_mean_credit", "zero_cont_token_mass",
]

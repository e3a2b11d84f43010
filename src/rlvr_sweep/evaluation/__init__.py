"""Evaluation stage: read-outs of a policy on benchmark items (paper §5; baseline spec §8).

`evaluate_greedy` decodes the items greedily in left-padded batches of 32 at the read-out cap
(2,048 tokens in the paper), extracts and grades each response, and returns one `grades` row per item.
"""

from rlvr_sweep.evaluation.greedy import evaluate_greedy

__all__ = ["evaluate_greedy"]

"""Evaluation stage: read-outs of a policy on benchmark items (paper §5; baseline spec §8).

`evaluate_greedy` decodes the items greedily, in left-padded batches of 32 in dataset order by
default (`schedule`: also length-sorted batches or continuous refill), at the read-out cap (2,048
tokens in the paper), extracts and grades each response, and returns one `grades` row per item.
Every read-out takes `ReadoutSettings` and is registered by its `eval.name` (`get_readout`).
"""

from rlvr_sweep.evaluation.greedy import evaluate_greedy, grade_row
from rlvr_sweep.evaluation.readout import ReadoutSettings, get_readout
from rlvr_sweep.evaluation.schedule import SCHEDULES, decode_readout

__all__ = ["SCHEDULES", "ReadoutSettings", "decode_readout", "evaluate_greedy", "get_readout", "grade_row"]

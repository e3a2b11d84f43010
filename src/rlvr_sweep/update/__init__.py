"""Update stage: one question's loss and the optimizer update (paper §1, §3.2; baseline spec §7).

`question.score_group` rewards and credits a drawn group (a batch estimator credits an update's groups
together: `question.credit_update`) and `backward.backward` accumulates its loss: the paper's
(`losses`: "sum then scale" for Arm 1, "scale then sum" with per-token advantages for the rest), or the
run's `objective` (`objectives`: reinforce, ppo_clip, gspo, cispo) aggregated over the mini-batch
(`aggregation`) with an optional KL term to the initial policy (`kl`). `step.update_step` makes one update
over the accumulated questions (unit-norm question gradients if asked; a ratio objective may take several
passes in mini-batches) through `optim.apply_update`, the AdamW step, which on a homogeneous group does what
`optimizer_step` says (full backward, skip, or an O(P) zero-gradient step). `TailAverage` is the FP32 Polyak
average of Table 3's `ra_mst_tail50`.
"""

from rlvr_sweep.update.aggregation import AGGREGATIONS, PAPER_AGGREGATION, Normaliser, aggregate
from rlvr_sweep.update.backward import PAPER_OBJECTIVE, Objective, Signals, backward, sampled_logps
from rlvr_sweep.update.kl import KL_ESTIMATORS, KL_PLACES, kl_estimate, kl_penalty, token_entropy
from rlvr_sweep.update.losses import LOSS_RECIPES, pack_sequences, policy_loss, token_logprobs
from rlvr_sweep.update.objectives import OBJECTIVES, Surrogate
from rlvr_sweep.update.optim import HOMOGENEOUS_STEPS, UpdateOutcome, apply_update, make_adamw
from rlvr_sweep.update.question import ScoredGroup, credit_update, ledger_rows, score_group
from rlvr_sweep.update.step import Update, UpdateSettings, mini_batches, update_step
from rlvr_sweep.update.tail_average import TailAverage

__all__ = [
    "AGGREGATIONS", "HOMOGENEOUS_STEPS", "KL_ESTIMATORS", "KL_PLACES", "LOSS_RECIPES", "Normaliser", "OBJECTIVES",
    "Objective", "PAPER_AGGREGATION", "PAPER_OBJECTIVE", "ScoredGroup", "Signals", "Surrogate", "TailAverage", "Update",
    "UpdateOutcome", "UpdateSettings", "aggregate", "apply_update", "backward", "credit_update", "kl_estimate", "kl_penalty",
    "ledger_rows", "make_adamw", "mini_batches", "pack_sequences", "policy_loss", "sampled_logps", "score_group",
    "token_entropy", "token_logprobs", "update_step",
]

"""Update stage: one question's loss and the optimizer update (paper §1, §3.2; baseline spec §7).

`question.score_group` rewards and credits a drawn group and `question.backward` accumulates its
policy-gradient loss (a batch estimator credits an update's groups together: `question.batch_credit`) (`losses`: "sum then scale" for Arm 1, "scale then sum" with per-token
advantages for the rest); `step.update_step` makes one update over the accumulated questions
(unit-norm question gradients if asked) through `optim.apply_update`, the AdamW step, which on a
homogeneous group does what `optimizer_step` says (full backward, skip, or an O(P) zero-gradient step). `TailAverage` is the
FP32 Polyak average of Table 3's `ra_mst_tail50`.
"""

from rlvr_sweep.update.losses import LOSS_RECIPES, pack_sequences, policy_loss, token_logprobs
from rlvr_sweep.update.optim import HOMOGENEOUS_STEPS, UpdateOutcome, apply_update, make_adamw
from rlvr_sweep.update.question import ScoredGroup, backward, batch_credit, ledger_rows, score_group
from rlvr_sweep.update.step import Update, UpdateSettings, update_step
from rlvr_sweep.update.tail_average import TailAverage

__all__ = [
    "HOMOGENEOUS_STEPS", "LOSS_RECIPES", "ScoredGroup", "TailAverage", "Update", "UpdateOutcome", "UpdateSettings",
    "apply_update", "backward", "batch_credit", "ledger_rows", "make_adamw", "pack_sequences", "policy_loss", "score_group",
    "token_logprobs", "update_step",
]

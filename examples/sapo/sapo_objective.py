"""SAPO's soft gate as an objective of one's own, registered from outside the package.

Where PPO's clip cuts a token's gradient off outside [1 - eps, 1 + eps], SAPO (Soft Adaptive Policy Optimization,
TRL's `loss_type="sapo"`) weighs it by a smooth gate of the importance ratio r, with a temperature per sign of
the advantage:

    loss_t = -(4 / tau) sigmoid(tau (r_t - 1)) A_t,   tau = tau_pos if A_t > 0 else tau_neg

(at r = 1 the gate's slope is 1, so the gradient there is the paper's, -A grad log pi). Name this file once (`RLVR_SWEEP_PLUGINS=
examples/sapo/sapo_objective.py`) and `objective=sapo` is a choice like `ppo_clip`: crossable with every
sampler, estimator and aggregation, its parameters checked before launch, its code in the run's identity.
"""

import torch

from rlvr_sweep.extend import OBJECTIVES, Surrogate, above, param


@OBJECTIVES.register("sapo", kind="ratio", params={"tau_pos": param(1.0, above(0)), "tau_neg": param(1.05, above(0))})
def sapo(logp, old, advantages, mask, *, tau_pos, tau_neg):
    ratio = torch.exp(logp - old)
    tau = torch.where(advantages > 0, torch.full_like(ratio, tau_pos), torch.full_like(ratio, tau_neg))
    gate = torch.sigmoid(tau * (ratio - 1)) * 4 / tau
    return Surrogate(-gate * advantages, ratio.detach())

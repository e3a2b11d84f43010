"""KL to the reference policy, estimated on the sampled tokens, and the policy's entropy (`objective.kl_*`).

With x ~ pi (the sampled token) and log r = log pi_ref(x) - log pi(x), J. Schulman's note "Approximating
KL Divergence" (2020) gives three estimators of KL(pi || pi_ref):

- `k1` = -log r: unbiased, high variance, can be negative;
- `k2` = (log r)^2 / 2: biased, low variance, >= 0;
- `k3` = (r - 1) - log r: unbiased, low variance, >= 0 (DeepSeekMath's GRPO, eq. 4; TRL's; verl's
  `low_var_kl`, which also clamps it to [-10, 10], a clamp this project does not apply).

As a loss term (`objective.kl_in=loss`: DeepSeekMath's GRPO, TRL, verl's `use_kl_loss`) beta * k joins each
token's loss and is aggregated with it; as a reward penalty (`kl_in=reward`: the RLHF recipe of Ouyang et al.
2022, verl's `use_kl_in_reward`, whose per-token penalties a GRPO advantage sums) each rollout's reward loses
beta * sum_t k, taken when the group is scored (the behaviour policy's log-probs, no gradient), before credit
(`kl_penalty`).
"""

from __future__ import annotations

import torch

from rlvr_sweep.config import KL_ESTIMATORS, KL_PLACES  # noqa: F401  (re-exported: the config holds the names)


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) at the sampled tokens, (N, T); gradient through `logp`.

    >>> lp, ref = torch.log(torch.tensor([0.5])), torch.log(torch.tensor([0.25]))  # log r = -ln 2
    >>> [round(kl_estimate(lp, ref, k).item(), 4) for k in KL_ESTIMATORS]   # ln 2, (ln 2)^2 / 2, 1/2 - 1 + ln 2
    [0.6931, 0.2402, 0.1931]
    """
    log_r = ref_logp - logp
    if estimator == "k1":
        return -log_r
    if estimator == "k2":
        return 0.5 * log_r * log_r
    if estimator == "k3":
        return torch.exp(log_r) - log_r - 1
    raise ValueError(f"unknown objective.kl_estimator {estimator!r}; valid: {list(KL_ESTIMATORS)}")


def token_entropy(logp_all: torch.Tensor) -> torch.Tensor:
    """Entropy of each position's next-token distribution from its full log-softmax (N, T, V) -> (N, T), in nats,
    without gradient and one row at a time (a vocabulary of 151,936 makes the whole product a large tensor)."""
    with torch.no_grad():
        if not len(logp_all):
            return logp_all.new_zeros(logp_all.shape[:2])
        return torch.stack([torch.special.entr(row.exp()).sum(-1) for row in logp_all])  # entr(p) = -p ln p, 0 at 0


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, beta: float, estimator: str) -> torch.Tensor:
    """(N, T) log-probs of each rollout's sampled tokens (0 past its end) -> (N,) beta * sum_t k, no gradient.

    >>> kl_penalty(torch.log(torch.tensor([[0.5, 0.5], [0.5, 1.0]])), torch.log(torch.tensor([[0.25, 0.5],
    ...            [0.5, 1.0]])), 0.1, "k1")   # 0.1 ln 2 on the first rollout, 0 on the second
    tensor([0.0693, 0.0000])
    """
    with torch.no_grad():
        return beta * kl_estimate(logp, ref_logp, estimator).sum(-1)

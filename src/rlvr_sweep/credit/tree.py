"""Tree credit: prefix / continuation advantages for two-stage K x B branched rollouts (seed paper §4.3).

A group is K pairs of B leaves; R (K, B) are the leaf rewards. Pair k shares a completion prefix
u^(k) of tau_k tokens across its B leaves when tau_k > 0 (`shared[k]`); with tau_k = 0 (root
restart) there is no shared prefix. Over all K*B rewards of the group:

    Rbar = mean(R),  sigma = std(R) (unbiased by default),  d = sigma + eps (eps = 1e-4)
    Vhat_k = mean_b R_kb,  M_k = max_b R_kb,  V~_k = Vhat_k + beta (M_k - Vhat_k) = (1-beta) Vhat_k + beta M_k

    shared pair,  tokens t <= tau_k:  A_prefix(k)  = (V~_k - Rbar) / d
    shared pair,  tokens t >  tau_k:  A_cont(k, b) = ((1-alpha)(R_kb - Rbar) + alpha (R_kb - Vhat_k)) / d
    tau_k = 0 pair, all tokens:       A_prefix = 0 (no prefix),  A_cont(k, b) = (R_kb - Rbar) / d

A homogeneous group (sigma = 0) gets exact zeros. Every estimator returns a `TreeCredit` of two
(K, B) tensors, prefix advantage per leaf and continuation advantage per leaf, so the trainer
handles `tree_mean` (where the prefix value is constant over b) and `clamped_prefix` (where it is
not) alike; `token_advantages` spreads them over completion tokens for `rlvr_sweep.update.losses.policy_loss`
with recipe `scale_then_sum`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from rlvr_sweep.config import STD_KINDS
from rlvr_sweep.credit.grpo import is_homogeneous


class TreeCredit(NamedTuple):
    """Per-leaf credit of one group, leaves in row-major order i = k*B + b.

    prefix: (K, B) float32, advantage of leaf (k, b) on its prefix tokens [0, prefix_len).
    cont:   (K, B) float32, advantage of leaf (k, b) on its continuation tokens [prefix_len, L).
    """

    prefix: torch.Tensor
    cont: torch.Tensor


def _check(rewards: torch.Tensor, shared: torch.Tensor, std: str) -> tuple[torch.Tensor, torch.Tensor]:
    if std not in STD_KINDS:
        raise ValueError(f"unknown estimator.std {std!r}; valid: {list(STD_KINDS)}")
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (K, B), got shape {tuple(rewards.shape)}")
    shared = torch.as_tensor(shared, dtype=torch.bool, device=rewards.device)
    if shared.shape != rewards.shape[:1]:
        raise ValueError(f"shared must be (K,) = {tuple(rewards.shape[:1])}, got {tuple(shared.shape)}")
    return rewards.to(torch.float32), shared


def _group_stats(r: torch.Tensor, eps: float, std: str):
    """(K, B) rewards -> Rbar, d = sigma + eps, Vhat (K,), M (K,)."""
    rbar = r.mean()
    d = r.flatten().std(correction=1 if std == "unbiased" else 0) + eps
    return rbar, d, r.mean(dim=1), r.max(dim=1).values


def tree_mean_advantages(
    rewards: torch.Tensor, shared: torch.Tensor, *, beta: float, alpha: float = 0.5,
    eps: float = 1e-4, std: str = "unbiased",
) -> tuple[torch.Tensor, torch.Tensor]:
    """(K, B) rewards, (K,) bool [tau_k > 0] -> a_prefix (K,), a_cont (K, B); §4.3 formulas above.

    >>> a_pre, a_cont = tree_mean_advantages(torch.tensor([[1., 0], [1, 1]]), torch.tensor([True, False]), beta=0.)
    >>> a_pre          # Rbar = 0.75, sigma = 0.5: (0.5 - 0.75) / 0.5001; pair 1 has no prefix
    tensor([-0.4999,  0.0000])
    """
    r, shared = _check(rewards, shared, std)
    if is_homogeneous(r.flatten()):
        return torch.zeros(r.shape[0]), torch.zeros_like(r)
    rbar, d, vhat, m = _group_stats(r, eps, std)
    v_tilde = vhat + beta * (m - vhat)  # == vhat exactly when M_k == Vhat_k (no spurious bonus)
    a_prefix = torch.where(shared, (v_tilde - rbar) / d, torch.zeros_like(vhat))  # (K,)
    tree_cont = ((1 - alpha) * (r - rbar) + alpha * (r - vhat[:, None])) / d  # (K, B)
    a_cont = torch.where(shared[:, None], tree_cont, (r - rbar) / d)
    return a_prefix, a_cont


def per_leaf_prefix(a_prefix: torch.Tensor, branches: int) -> torch.Tensor:
    """(K,) pair prefix advantages -> (K, B) per-leaf view (each leaf of pair k carries A_prefix(k))."""
    return a_prefix[:, None].expand(-1, branches).clone()


def tree_mean_credit(
    rewards: torch.Tensor, shared: torch.Tensor, *, beta: float, alpha: float = 0.5,
    eps: float = 1e-4, std: str = "unbiased",
) -> TreeCredit:
    """`tree_mean_advantages` as a TreeCredit (the `tree_mean` registry entry)."""
    a_prefix, a_cont = tree_mean_advantages(rewards, shared, beta=beta, alpha=alpha, eps=eps, std=std)
    return TreeCredit(per_leaf_prefix(a_prefix, rewards.shape[1]), a_cont)


def clamped_prefix_advantages(
    rewards: torch.Tensor, shared: torch.Tensor, *, beta: float, alpha: float = 0.5,
    eps: float = 1e-4, std: str = "unbiased",
) -> TreeCredit:
    """One-sided prefix clamping (`--clamped-prefix`, ablation `ablate_selective`; §4.3 Proposition 3).

    Prefix credit is set per leaf. On a shared pair k, a winning leaf (R_kb == M_k) keeps its own
    leaf value and a losing leaf (R_kb < M_k) gets the pair's tree prefix value clamped below at 0:

        A_pref(k, b) = (R_kb - Rbar) / d                 if R_kb == M_k
        A_pref(k, b) = max(0, (V~_k - Rbar) / d)         if R_kb <  M_k

    This is the paper's sentence read literally: on a divergent pair (Vhat=0.5, M=1) it keeps
    (1 - Rbar)/d on the winning branch and clamps the losing branch to max(0, (0.625 - Rbar)/d),
    0.625 being V~_k at the beta = 0.25 of the arm it is compared with (Arm 10). The net prefix
    weight (1 - Rbar)/d + max(0, ...) is then > 0 for every Rbar < 1. On a pair without a loser
    (all R_kb equal) R_kb = V~_k, so it coincides with `tree_mean`; continuation credit and
    tau_k = 0 pairs are exactly `tree_mean`'s.
    """
    a_prefix, a_cont = tree_mean_advantages(rewards, shared, beta=beta, alpha=alpha, eps=eps, std=std)
    r, shared = _check(rewards, shared, std)
    if is_homogeneous(r.flatten()):
        return TreeCredit(torch.zeros_like(r), a_cont)
    rbar, d, _, m = _group_stats(r, eps, std)
    winner = r == m[:, None]  # (K, B)
    per_leaf = torch.where(winner, (r - rbar) / d, a_prefix[:, None].clamp(min=0.0).expand_as(r))
    return TreeCredit(torch.where(shared[:, None], per_leaf, torch.zeros_like(r)), a_cont)


def zero_cont_token_mass(credit: TreeCredit, prefix_len: torch.Tensor, leaf_len: torch.Tensor) -> TreeCredit:
    """Shift continuation credit so the group's signed token mass is zero (`--zero-cont-token-mass`).

    mass = sum_i [A_pref(i) * pl_i + A_cont(i) * (L_i - pl_i)] over the group's leaves; one
    constant c = mass / sum_i (L_i - pl_i) is subtracted from A_cont(i) of every leaf with
    continuation tokens (L_i > pl_i, tau = 0 leaves included: all their tokens are continuation),
    leaving prefix credit and zero-continuation leaves (terminal duplicates) as they are. If no
    leaf has a continuation token the credit is returned unchanged (mass stays as it was).
    prefix_len, leaf_len: ints shaped like the credit (K, B) (or K*B flat, row-major).
    """
    pl = torch.as_tensor(prefix_len).reshape(credit.cont.shape).to(torch.float64)
    ll = torch.as_tensor(leaf_len).reshape(credit.cont.shape).to(torch.float64)
    if (pl < 0).any() or (ll < pl).any():
        raise ValueError("need 0 <= prefix_len <= leaf_len for every leaf")
    cont_len = ll - pl  # (K, B)
    total = cont_len.sum()
    if total == 0:
        return credit
    pre, cont = credit.prefix.to(torch.float64), credit.cont.to(torch.float64)
    c = ((pre * pl).sum() + (cont * cont_len).sum()) / total
    shifted = torch.where(cont_len > 0, cont - c, cont)
    return TreeCredit(credit.prefix, shifted.to(credit.cont.dtype))


def token_advantages(credit: TreeCredit, prefix_len: torch.Tensor, leaf_len: torch.Tensor, width: int) -> torch.Tensor:
    """-> (N, width) per-token advantages, N = K*B leaves in row-major order i = k*B + b.

    Completion token j of leaf i gets prefix[i] for j < pl_i, cont[i] for pl_i <= j < L_i, 0 after.
    Alignment with `rlvr_sweep.update.losses.pack_sequences` (all N rows share the group's prompt of P tokens):
    completion token j is predicted at absolute position P + j - 1, i.e. column j of
    `token_logprobs(model, ids, attn, start=P-1)` and of `completion_mask[:, P-1:]`; pass
    width = ids.shape[1] - P and the result lines up column for column with both.
    """
    n = credit.prefix.numel()
    pl = torch.as_tensor(prefix_len).reshape(n, 1).long()
    ll = torch.as_tensor(leaf_len).reshape(n, 1).long()
    if (pl < 0).any() or (ll < pl).any() or (ll > width).any():
        raise ValueError(f"need 0 <= prefix_len <= leaf_len <= width={width} for every leaf")
    j = torch.arange(width)[None, :]  # (1, width)
    pre = credit.prefix.reshape(n, 1).to(torch.float32)
    cont = credit.cont.reshape(n, 1).to(torch.float32)
    zero = torch.zeros((), dtype=torch.float32)
    return torch.where(j < pl, pre, torch.where(j < ll, cont, zero))  # (N, width)


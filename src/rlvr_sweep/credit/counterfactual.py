"""Counterfactual fork-pair credit: `cf_uncond`, `cf_rg`, `cf_pb` (seed paper §5.6 item 4, Table 5C, Arms 14-19).

A `cf_fork` group (rlvr_sweep.rollout.cf_fork) is K pairs of B = 2 leaves sharing root[:tau_k]; column
b = 0 is the on-policy branch (token v0 at tau_k), b = 1 the alternative (v1). R (K, 2) are the raw
binary rewards (after the derivation gate), L (K, 2) the leaf lengths. `forked[k]` is False for a
`cf_no_fork` pair (a stopped-tree pair: never divergent, never rescued, no hinge).

1. Rescue duplication (`--cf-rescue-only`; cf_rg, cf_pb). A forked pair with (R_k0, R_k1) = (1, 0) has its
   losing alternative replaced by a duplicate of the winning branch: R_k1 := 1, L_k1 := L_k0 (`dup[k]`).
   Everything below uses these effective leaves; cf_uncond keeps the raw ones.
2. Statistics over the 8 effective leaves: Rbar, Bessel s_R = sqrt(sum (R_i - Rbar)^2 / 7), d = s_R + eps.
   s_R < 1e-6 (the guard) -> all coefficients 0: `homogeneous` when the raw rewards already were, else
   `gated_rescue_dup` (the duplication removed the activation; Table 5C's "gated"). cf_pb also skips
   (`skipped_pb_unrescued`) a group with b0_pass >= 3 and no rescued pair, i.e. no forked (0, 1) pair.
   b0_pass = sum_k R_k0 (raw).
3. Tree credit (§4.3, beta = 0, alpha = 0.5, as `credit.tree`):
       A_pref(k) = (Vhat_k - Rbar) / d,   A_cont(k, b) = ((1 - alpha)(R_kb - Rbar) + alpha (R_kb - Vhat_k)) / d
4. Variant rules on divergent forked pairs (R_k0 != R_k1 after step 1; winner w, loser l), with the
   continuation lengths c_kb = L_kb - tau_k >= 1 (the fork token is a continuation token):
   - cf_uncond (Arm 14, `--cf-balance-div-len`): A_cont(k, b) *= cbar_k / c_kb, cbar_k = (c_k0 + c_k1) / 2.
   - cf_rg (Arms 15, 16, 18, `--cf-dampen-lose-len`): A_cont(k, l) *= min(1, c_kw / c_kl).
   - cf_pb (Arms 17, 19, `--cf-pair-balanced`): the cf_rg package plus, when b0_pass >= 3 (and rescued),
     A_pref := 0 on every pair and both A_cont := 0 on non-divergent pairs, the divergent pair's loser
     balanced against its winner, A_cont(k, l) := -A_cont(k, w) * min(1, c_kw / c_kl) (`pb_loser="balanced"`,
     the default; `"tree"` keeps the loser's damped tree continuation instead); when b0_pass < 3,
     A_pref := max(A_pref, 0) and A_cont(k, l) := -A_cont(k, w) * min(1, c_kw / c_kl). Our reading of
     "package": Table 5C has no b0-winning divergent pair in Arms 17, 19, so the rescue duplication is on.
     Why "balanced" is the default for b0_pass >= 3: the paper's text allows both readings, its numbers
     one. On a (3, 7) group (Rbar 0.875, s_R 0.3536) the divergent pair's tree continuations are +0.8836
     (winner) and -1.9440 (loser); with equal continuation lengths c = 500 the tree reading gives
     M_tot = (0.8836 - 1.9440) * 500 / 8 = -66.27 and the balanced one exactly 0.00. The paper reports a
     small positive mean M_tot for Arms 17 / 19 (+5.58 / +0.94) where Arms 15 / 18, whose (3, 7) groups
     keep A_pref = -1.0604 and the (1, 1) pairs, have +29.65 / +19.40: a mean of many such groups near
     zero and above it fits the balanced loser (0 for equal lengths, >= 0 when the loser runs longer),
     not -66 per group.
5. Signed token mass M_tot = (1/8) sum_i [A_pref(i) pl_i + A_cont(i)(L_i - pl_i)] over the effective
   leaves (pl_i = tau_k); 0 for an inactive group. The hinge below is not part of it.

Our definitions where the paper gives only a name (§5.6 item 4):

- `--cf-balance-div-len` (balance divergent-pair lengths by dividing by length): step 4's cf_uncond rule.
  A branch's continuation token mass A_cont(k, b) * c_kb becomes A_cont(k, b) * cbar_k, so a long (often
  capped) branch no longer weighs in proportion to its own length; an equal-length pair keeps its tree
  values. `--cf-dampen-lose-len`, which replaces it from Arm 15 on, is its one-sided form (only the loser
  shrinks, never the winner grows).
- The fork hinge (`--cf-fork-hinge-weight` lambda; 0.5 in Arm 14, 0.15 from Arm 15 on; we read Arms 17, 19
  as the Arm 15 package plus `--cf-pair-balanced`, so 0.15). For the hinge pairs H = the divergent forked
  pairs of an active group (`CfCredit.hinge`, empty when lambda = 0), the trainer adds to the policy loss

      L_hinge = (lambda / G) sum_{k in H} max(0, delta - [log pi(v_wk | c_k) - log pi(v_lk | c_k)]),
      c_k = (x, root_k[:tau_k])

  (`fork_hinge_loss`): v_w / v_l are the winning / losing leaves' tokens at position tau_k, G = 8 the
  policy loss's own 1/G, delta the fork threshold (0.5). Both log-probs share one context, so the
  difference is the raw logit gap z(v_w) - z(v_l): the hinge pushes the winning fork token ahead until it
  leads by the margin that defined a near-tie fork, then stops. Its gradient equals a per-token advantage
  of +lambda on the winner's fork token and -lambda on the loser's (scale_then_sum, 1/G) while the gap is
  below delta. lambda = 0 gives H = () and a constant zero: exactly no hinge.

Paper hand checks (tests/credit/test_counterfactual.py): (3, 7) group under cf_rg -> Rbar 0.875,
s_R 0.3536, A_pref(k*) = -1.0604; (0, 1) group under cf_pb, tau 19, L_win 266, L_lose 1024 ->
A_pref(k*) = +1.0604, A_cont(k*) = (+1.9440, -0.4778), sum of the 8 A_cont = +0.4059.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from rlvr_sweep.credit.tree import TreeCredit, tree_mean_advantages

VARIANTS = ("cf_uncond", "cf_rg", "cf_pb")
_RESCUE = ("cf_rg", "cf_pb")
STATUSES = ("active", "homogeneous", "gated_rescue_dup", "skipped_pb_unrescued")


class HingePair(NamedTuple):
    """A hinge term: pair k, winning / losing branch, fork position (completion index tau_k)."""

    k: int
    win: int
    lose: int
    position: int

    def leaves(self, branches: int = 2) -> tuple[int, int]:
        """Row-major leaf indices (win, lose), i = k * B + b."""
        return self.k * branches + self.win, self.k * branches + self.lose


class CfCredit(NamedTuple):
    """Credit of one cf group over its *effective* leaves (after rescue duplication), row-major.

    prefix, cont: (K, 2) float32 A_pref / A_cont per effective leaf. rewards, lengths: (K, 2) effective;
    raw_rewards: (K, 2) as scored; tau: (K,) long; dup: (K,) bool, leaf (k, 1) is a copy of leaf (k, 0).
    `loss_credit` maps it onto the sampled leaves for the trainer's loss.
    """

    prefix: torch.Tensor
    cont: torch.Tensor
    rewards: torch.Tensor
    raw_rewards: torch.Tensor
    lengths: torch.Tensor
    tau: torch.Tensor
    dup: torch.Tensor
    hinge: tuple[HingePair, ...]
    hinge_weight: float
    metrics: dict


def _check(rewards, tau, lengths, forked):
    r = torch.as_tensor(rewards, dtype=torch.float32)
    if r.dim() != 2 or r.shape[1] != 2:
        raise ValueError(f"rewards must be (K, 2), got shape {tuple(r.shape)}")
    if not ((r == 0) | (r == 1)).all():
        raise ValueError(f"cf credit needs binary rewards, got {r.tolist()}")
    K = r.shape[0]
    tau = torch.as_tensor(tau, dtype=torch.long).reshape(-1)
    lengths = torch.as_tensor(lengths, dtype=torch.long)
    forked = torch.ones(K, dtype=torch.bool) if forked is None else torch.as_tensor(forked, dtype=torch.bool)
    if tau.shape != (K,) or lengths.shape != (K, 2) or forked.shape != (K,):
        raise ValueError(f"need tau (K,), lengths (K, 2), forked (K,) with K={K}; got {tuple(tau.shape)}, "
                         f"{tuple(lengths.shape)}, {tuple(forked.shape)}")
    if (tau < 0).any() or (lengths < tau[:, None]).any():
        raise ValueError(f"need 0 <= tau <= L per leaf; tau={tau.tolist()}, L={lengths.tolist()}")
    if (forked & ((tau == 0) | (lengths <= tau[:, None]).any(dim=1))).any():
        raise ValueError("a forked pair has tau > 0 and its fork token in both leaves (L > tau); "
                         f"tau={tau.tolist()}, L={lengths.tolist()}, forked={forked.tolist()}")
    return r, tau, lengths, forked


def signed_token_mass(prefix: torch.Tensor, cont: torch.Tensor, prefix_len: torch.Tensor,
                      lengths: torch.Tensor) -> float:
    """M = (1/N) sum_i [A_pref(i) pl_i + A_cont(i) (L_i - pl_i)] over N leaves (any matching shapes)."""
    pl = torch.as_tensor(prefix_len, dtype=torch.float64).reshape(prefix.shape)
    ll = torch.as_tensor(lengths, dtype=torch.float64).reshape(prefix.shape)
    mass = prefix.to(torch.float64) * pl + cont.to(torch.float64) * (ll - pl)
    return float(mass.sum() / prefix.numel())


PB_LOSERS = ("balanced", "tree")  # cf_pb, b0_pass >= 3: the divergent pair's loser (module docstring)


def cf_credit(rewards, tau, lengths, *, variant: str, hinge_weight: float, forked=None, alpha: float = 0.5,
              eps: float = 1e-4, guard: float = 1e-6, pb_loser: str = "balanced") -> CfCredit:
    """(K, 2) raw rewards, (K,) tau, (K, 2) leaf lengths -> CfCredit (module docstring, steps 1-5).

    `forked` (K,) bool defaults to every pair forked. `hinge_weight` is lambda (>= 0); it only decides
    whether `hinge` lists the divergent pairs, the loss term itself is `fork_hinge_loss`.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown cf variant {variant!r}; valid: {list(VARIANTS)}")
    if not hinge_weight >= 0:
        raise ValueError(f"hinge_weight must be >= 0, got {hinge_weight}")
    if pb_loser not in PB_LOSERS:
        raise ValueError(f"unknown pb_loser {pb_loser!r}; valid: {list(PB_LOSERS)}")
    r_raw, tau, L, forked = _check(rewards, tau, lengths, forked)
    K = r_raw.shape[0]
    b0_win = forked & (r_raw[:, 0] > r_raw[:, 1])  # raw (1, 0) pairs
    b1_win = forked & (r_raw[:, 1] > r_raw[:, 0])  # raw (0, 1) pairs: the alternative rescued the root
    b0_pass = int(r_raw[:, 0].sum())

    # 1. Rescue duplication: leaf (k, 1) becomes a copy of leaf (k, 0).
    dup = b0_win if variant in _RESCUE else torch.zeros(K, dtype=torch.bool)
    r = torch.where(dup[:, None], r_raw[:, :1].expand(K, 2), r_raw)  # (K, 2) effective rewards
    L_eff = torch.where(dup[:, None], L[:, :1].expand(K, 2), L)  # (K, 2) effective lengths

    # 2. Gates.
    s_raw = float(r_raw.flatten().std(correction=1))
    s_r = float(r.flatten().std(correction=1))
    if s_raw < guard:
        status = "homogeneous"
    elif s_r < guard:
        status = "gated_rescue_dup"
    elif variant == "cf_pb" and b0_pass >= 3 and not bool(b1_win.any()):
        status = "skipped_pb_unrescued"
    else:
        status = "active"
    divergent = forked & (r[:, 0] != r[:, 1])  # (K,) after duplication
    metrics = {
        "variant": variant, "pb_loser": pb_loser if variant == "cf_pb" else None, "status": status,
        "active": status == "active",
        "gated": status == "gated_rescue_dup", "skipped": status == "skipped_pb_unrescued",
        "b0_pass": b0_pass, "b1_pass": int(r_raw[:, 1].sum()), "r_bar": float(r.mean()), "s_r": s_r,
        "n_forked": int(forked.sum()), "n_b0_win": int(b0_win.sum()), "n_b1_win": int(b1_win.sum()),
        "n_rescue_dup": int(dup.sum()), "n_divergent": int(divergent.sum()),
    }
    zeros = torch.zeros(K, 2)
    if status != "active":
        metrics.update(m_tot=0.0, n_hinge=0)
        return CfCredit(zeros, zeros.clone(), r, r_raw, L_eff, tau, dup, (), float(hinge_weight), metrics)

    # 3. Tree credit at beta = 0 (pairs with tau = 0 would get leaf credit, as in credit.tree).
    a_pref, a_cont = tree_mean_advantages(r, tau > 0, beta=0.0, alpha=alpha, eps=eps, std="unbiased")
    a_cont = a_cont.clone()  # (K, 2)

    # 4. Variant rules on divergent forked pairs.
    rows = torch.arange(K)
    win = (r[:, 1] > r[:, 0]).long()  # (K,) winning branch (meaningful on divergent pairs)
    lose = 1 - win
    c = (L_eff - tau[:, None]).to(torch.float32).clamp(min=1)  # (K, 2) continuation lengths; >= 1 when forked
    damp = (c[rows, win] / c[rows, lose]).clamp(max=1.0)  # (K,) min(1, c_win / c_lose)
    div_rows = rows[divergent]
    if variant == "cf_uncond":  # --cf-balance-div-len
        balanced = a_cont * c.mean(dim=1, keepdim=True) / c
        a_cont = torch.where(divergent[:, None], balanced, a_cont)
    else:  # --cf-dampen-lose-len
        a_cont[div_rows, lose[div_rows]] *= damp[div_rows]
    if variant == "cf_pb":  # --cf-pair-balanced
        if b0_pass >= 3:
            a_pref = torch.zeros_like(a_pref)
            a_cont = torch.where(divergent[:, None], a_cont, torch.zeros_like(a_cont))
            if pb_loser == "balanced":
                a_cont[div_rows, lose[div_rows]] = -a_cont[div_rows, win[div_rows]] * damp[div_rows]
        else:
            a_pref = a_pref.clamp(min=0.0)
            a_cont[div_rows, lose[div_rows]] = -a_cont[div_rows, win[div_rows]] * damp[div_rows]

    prefix = a_pref[:, None].expand(K, 2).clone()
    hinge = tuple(HingePair(int(k), int(win[k]), int(lose[k]), int(tau[k])) for k in div_rows) \
        if hinge_weight > 0 else ()
    pl = tau[:, None].expand(K, 2)  # every leaf's prefix length is its pair's tau
    metrics.update(m_tot=signed_token_mass(prefix, a_cont, pl, L_eff), n_hinge=len(hinge))
    return CfCredit(prefix, a_cont, r, r_raw, L_eff, tau, dup, hinge, float(hinge_weight), metrics)


def loss_credit(cf: CfCredit) -> TreeCredit:
    """The same gradient on the *sampled* leaves: a TreeCredit for `token_advantages` / the policy loss.

    A duplicated leaf (k, 1) is leaf (k, 0)'s tokens again, so its continuation coefficient moves onto
    leaf (k, 0)'s continuation and the sampled alternative's continuation gets 0; its prefix tokens are
    root[:tau_k] either way and keep A_pref. Token by token (same context, same token) the weighted
    sums, hence the loss gradient and M_tot, equal those over the effective leaves, with 6 + 2 sequences
    instead of 8 to backpropagate through on a duplicated pair.
    """
    cont = cf.cont.clone()
    cont[cf.dup, 0] = cf.cont[cf.dup, 0] + cf.cont[cf.dup, 1]
    cont[cf.dup, 1] = 0.0
    return TreeCredit(cf.prefix.clone(), cont)


def fork_hinge_loss(logp_win: torch.Tensor, logp_lose: torch.Tensor, *, weight: float, margin: float,
                    group_size: int) -> torch.Tensor:
    """(P,) log pi of the winning / losing fork tokens of P hinge pairs -> the scalar L_hinge (docstring).

    weight * sum_p max(0, margin - (logp_win - logp_lose)) / group_size. weight 0, or no pair, returns a
    constant 0 with no autograd graph, so adding it changes neither the loss nor any gradient.
    """
    if weight == 0 or logp_win.numel() == 0:
        return torch.zeros((), dtype=logp_win.dtype, device=logp_win.device)
    gap = logp_win - logp_lose  # (P,) = z(v_win) - z(v_lose): same context
    return weight * torch.clamp(margin - gap, min=0.0).sum() / group_size


# ---------------------------------------------------------------------------------------------
# Ledger columns (the trainer writes them; `verify` replays cf_credit from them).


def cf_pair_rows(pairs, cf: CfCredit) -> list[dict]:
    """One dict per pair: the fork (t*, v0 / v1, top-2 ids, margins), raw rewards, lengths, category,
    and the effective rewards, rescue duplication, winner and coefficients. `pairs` are the group's
    `ForkPair`s in k order; merge each dict into that pair's `ledger_rows` row."""
    rows = []
    hinge = {h.k for h in cf.hinge}
    for pair, raw, eff, pre, cont, dup in zip(pairs, cf.raw_rewards.tolist(), cf.rewards.tolist(),
                                               cf.prefix.tolist(), cf.cont.tolist(), cf.dup.tolist()):
        winner = "b0" if raw[0] > raw[1] else "b1" if raw[1] > raw[0] else ""
        rows.append({
            "k": pair.k, "category": pair.category, "t_star": pair.tau, "v0": pair.v0, "v1": pair.v1,
            "top1": pair.top1, "top2": pair.top2, "fork_margin": pair.margin, "min_margin": pair.min_margin,
            "window_start": pair.window_start, "window_margins": list(pair.window),
            "r0_raw": raw[0], "r1_raw": raw[1], "l0": len(pair.leaves[0].tokens), "l1": len(pair.leaves[1].tokens),
            "raw_winner": winner if pair.category != "cf_no_fork" else "", "rescue_dup": dup,
            "r0_eff": eff[0], "r1_eff": eff[1], "a_pref": pre[0], "a_cont0": cont[0], "a_cont1": cont[1],
            "hinge": pair.k in hinge,
        })
    return rows


def cf_step_fields(cf: CfCredit) -> dict:
    """Per-step columns: b0_pass, status (active / homogeneous / gated / skipped and why), M_tot, counts."""
    m = cf.metrics
    return {"cf_variant": m["variant"], "cf_pb_loser": m["pb_loser"], "cf_status": m["status"], "cf_active": m["active"],
            "cf_gated": m["gated"], "cf_skipped": m["skipped"], "b0_pass": m["b0_pass"],
            "b1_pass": m["b1_pass"], "cf_r_bar": m["r_bar"], "cf_s_r": m["s_r"], "m_tot": m["m_tot"],
            "n_forked": m["n_forked"], "n_b0_win": m["n_b0_win"], "n_b1_win": m["n_b1_win"],
            "n_rescue_dup": m["n_rescue_dup"], "n_divergent": m["n_divergent"], "n_hinge": m["n_hinge"],
            "hinge_weight": cf.hinge_weight}

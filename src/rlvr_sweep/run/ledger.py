"""The training loop's ledger rows: one per step (its group, its update, the health signals of docs/health.md),
one per rollout (its tokens, texts and credit) (seed paper §5.1, §5.4, §3.3), and the run's totals.

`run.train` builds them as the loop goes and writes them (`write_ledger`); `verify` re-derives what they hold
from each other and from the stored rewards (PASS 3 and 4).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rlvr_sweep import store
from rlvr_sweep.credit import cf_step_fields, is_homogeneous
from rlvr_sweep.reward import first_box_token

if TYPE_CHECKING:
    from rlvr_sweep.update import Update


def step_row(step, row, scored, update, seconds, prompt_len, filtered: bool = False) -> dict:
    g, outcome = scored.group, update.outcome if update else None
    action = outcome.action if outcome else "filtered" if filtered else "accumulated"
    fork = cf_step_fields(scored.cf) if scored.cf is not None else {}  # b0_pass, gated / skipped, M_tot
    return {**fork,
        "step": step, "question_id": row["id"], "rewards": scored.rewards.flatten().tolist(),
        "mean_reward": float(scored.rewards.mean()), "correct": scored.correct.flatten().tolist(),
        "active": scored.active, "std": float(scored.rewards.flatten().std()),
        "update": outcome is not None, "action": action,
        "grad_norm": outcome.grad_norm if outcome else float("nan"),
        "loss": update.loss if update else float("nan"),
        "gen_tokens": g.gen_tokens, "prefill_tokens": g.prefill_tokens,
        "padded_prefill_tokens": g.padded_prefill_tokens, "untrimmed_steps": g.untrimmed_steps,
        "leaf_tokens": sum(len(leaf.tokens) for leaf in g.leaves()), "prompt_tokens": prompt_len,
        "bwd_out_tokens": update.bwd_out if update else 0, "bwd_full_tokens": update.bwd_full if update else 0,
        "capped": sum(not leaf.finished for leaf in g.leaves()), "seconds": seconds,
        **group_signals(scored), **update_signals(update),
        **({"kl_penalty": scored.penalty.flatten().tolist()} if scored.penalty is not None else {}),
    }


SIGNALS = ("entropy", "kl_ref", "ratio_mean", "ratio_min", "ratio_max", "clip_low", "clip_high", "logp_gap_mean",
           "logp_gap_max", "logp_gap_outside")


def group_signals(scored) -> dict:
    """The step's group: response length mean, max and the share cut at the cap, and whether its rewards have
    zero variance (averaged over steps, the share of such groups) (health signals)."""
    leaves = scored.leaves
    lengths = [len(leaf.tokens) for leaf in leaves]
    return {"length_mean": sum(lengths) / len(lengths), "length_max": max(lengths),
            "truncated_share": sum(not leaf.finished for leaf in leaves) / len(leaves),
            "zero_variance": is_homogeneous(scored.credited_rewards.flatten())}


def update_signals(update: Update | None) -> dict:
    """The update's health signals (`update.Signals`) and optimizer steps, on the step that made it (NaN, 0
    elsewhere)."""
    values = update.signals if update else {}
    return {"optimizer_steps": update.optimizer_steps if update else 0,
            **{k: values.get(k, float("nan")) for k in SIGNALS}}


def rollout_rows(step, row, scored, decode, audit_cut: int, head_cut: int) -> list[dict]:
    """One row per rollout, its token ids included, and its credit: `adv_prefix` on its prefix tokens and
    `adv_cont` on the rest (equal for leaf credit; a batch estimator's are filled in at its update:
    `credit_rows`), which `verify` re-derives from the stored rewards; `logp_engine`, the sum of the log-probs
    the engine recorded for its sampled tokens (None where it recorded none), and `logp_behaviour`, the same
    sum as the trainer recomputed it for the update (filled in there; None for a rollout no backward saw),
    which `verify` holds against the step's engine-trainer gap. For the paper's >512-token prefix
    audit (§5.4) each row also keeps where its first `\\boxed` starts and, when it is longer than `audit_cut`
    tokens, the text of its first `audit_cut` tokens (512 in paper units); for the surface-token divergence
    of §3.3 the text of its first `head_cut` tokens (160)."""
    B = scored.rewards.shape[1]
    prefix, cont = scored.credit.prefix.flatten().tolist(), scored.credit.cont.flatten().tolist()
    penalty = scored.penalty.flatten().tolist() if scored.penalty is not None else None
    return [{
        "step": step, "index": i, "k": i // B, "b": i % B, "question_id": row["id"], "gold": row["answer"],
        "prefix_len": leaf.prefix_len, "length": len(leaf.tokens), "reward": float(r), "correct": float(c),
        "finished": leaf.finished, "capped": not leaf.finished, "text": text,
        "first_box_token": first_box_token(leaf.tokens, decode),
        "audit_prefix_text": decode(leaf.tokens[:audit_cut]) if len(leaf.tokens) > audit_cut else None,
        "tokens": list(leaf.tokens), "head_text": decode(leaf.tokens[:head_cut]),
        "adv_prefix": prefix[i], "adv_cont": cont[i],
        "logp_engine": math.fsum(leaf.logprobs) if leaf.logprobs is not None else None, "logp_behaviour": None,
        **({"kl_penalty": penalty[i]} if penalty is not None else {}),
    } for i, (leaf, r, c, text) in enumerate(zip(scored.leaves, scored.rewards.flatten().tolist(),
                                                 scored.correct.flatten().tolist(), scored.texts))]


def credit_rows(rows: list[dict], credited: list, behaviour: list | None = None) -> None:
    """Write what the update decided into the rollout rows of its questions (`rows`, in order; a filtered
    question's rows are not among them): the credit it gave them (a batch estimator's is given there) and, per
    rollout, its sampled tokens' log-prob sum under the behaviour policy (`update.Update.behaviour`)."""
    values = [(p, c) for s in credited for p, c in zip(s.credit.prefix.flatten().tolist(),
                                                      s.credit.cont.flatten().tolist())]
    sums = [b for question in (behaviour or [[None] * len(s.leaves) for s in credited]) for b in question]
    if len(values) != len(rows) or len(sums) != len(rows):
        raise ValueError(f"{len(rows)} rollout rows await the credit of {len(values)} rollouts")
    for row, (p, c), b in zip(rows, values, sums):
        row["adv_prefix"], row["adv_cont"], row["logp_behaviour"] = p, c, b


def write_ledger(run_dir, state, keys: dict) -> None:
    """The ledgers so far (`state`: the loop's `run.train.TrainState`) as the run folder's three tables."""
    store.write_table(run_dir, "steps", state.steps, keys)
    store.write_table(run_dir, "rollouts", state.rollouts, keys)
    store.write_table(run_dir, "pairs", state.pairs, keys)


def totals(steps: list[dict]) -> dict:
    keys = ("gen_tokens", "prefill_tokens", "padded_prefill_tokens", "untrimmed_steps", "bwd_out_tokens", "bwd_full_tokens", "seconds")
    totals = {k: sum(s[k] for s in steps) for k in keys}
    totals.update(steps=len(steps), active_steps=sum(s["active"] for s in steps))
    return totals

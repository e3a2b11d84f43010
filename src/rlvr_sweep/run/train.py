"""The training loop, read top to bottom: rollout -> reward -> advantage -> loss -> optimizer step -> ledger.

Each training step takes one question (row s % len(rows)), samples G rollouts from the current
policy, scores them with the verifier reward (optionally gated), turns rewards into advantages,
and makes one optimizer update; homogeneous groups take the configured `optimizer_step`
(seed paper §1, §3.2, §4.1; baseline spec §5-§7). Tables are rewritten atomically as the run goes.
The run around it (folder, checkpoints, read-outs) is `lifecycle.run`.
"""

from __future__ import annotations

import logging
import time

import torch

from rlvr_sweep import data, store
from rlvr_sweep.config import FORK_SAMPLERS, Config, scaled_length
from rlvr_sweep.credit import cf_step_fields
from rlvr_sweep.reward import first_box_token
from rlvr_sweep.rollout import ModelPolicy, get_engine, get_fork_sampler, get_sampler
from rlvr_sweep.run.progress import Progress
from rlvr_sweep.update import apply_update, ledger_rows, score_group
from rlvr_sweep.update import backward as question_backward

log = logging.getLogger(__name__)
# one line per step, for the run's own logs/run.log only (the console gets the progress bar)
step_log = logging.getLogger("rlvr_sweep.steps")
step_log.propagate = False
AUDIT_PREFIX_TOKENS = 512  # §5.4 gt512_prefix_audit: what the first 512 tokens of a longer rollout hold


def train_loop(cfg: Config, policy, params, optimizer, train_rows, generator, tail, lengths: dict, grade, run_dir,
               progress: dict, save, keys: dict, loggers) -> None:
    """The loop: one question per step; an optimizer update every `accumulate_questions` steps.
    `progress` holds the counters and ledger rows; it is checkpointed between updates. Steps are
    numbered from 0, in the tables, the log and the loggers alike."""
    model, tok = policy.model, policy.tokenizer
    t, sc, est = cfg.train, cfg.sampler, cfg.estimator
    sampling = ModelPolicy(policy, temperature=sc.temperature, top_p=sc.top_p, generator=generator,
                           generate_fn=get_engine(cfg.model.engine))
    steps, rollouts, pairs = progress["steps"], progress["rollouts"], progress["pairs"]
    decode = lambda ids: tok.decode(ids, skip_special_tokens=False)  # noqa: E731  (EOS kept, as stored)
    pending = []
    warmup = False

    def more() -> bool:
        if t.active_steps:
            return progress["step"] < t.max_steps and progress["active_count"] < t.active_steps
        return progress["step"] < t.steps

    bar = Progress(t.max_steps if t.active_steps else t.steps, "train", "step", initial=progress["step"])

    while more():
        step = progress["step"]
        started = time.perf_counter()
        row = train_rows[step % len(train_rows)]
        prompt = data.encode_prompts(tok, [row["problem"]])[0]
        if not pending:  # chosen per update, so one update never mixes flat warmup and tree questions
            warmup = sc.name != "flat" and progress["active_count"] < sc.bifurcate_after_active
        group = draw_group("flat" if warmup else sc.name, sampling, prompt, lengths, sc)
        if warmup:
            group = group.with_category("flat_warmup")
        group.check_conservation(lengths["horizon"])
        scored = score_group(group, decode, row["answer"],
                             gate_chars=lengths["gate"], grade=grade, estimator=est.name, std=est.std, eps=est.eps,
                             beta=est.beta, alpha=est.alpha, zero_mass=est.zero_cont_token_mass,
                             hinge_weight=est.hinge_weight)
        progress["active_count"] += scored.active
        pending.append((prompt, scored))
        outcome, loss, bwd = None, float("nan"), (0, 0)
        if len(pending) == t.accumulate_questions:
            model.train()
            outcome, loss, bwd = _update(cfg, model, params, optimizer, pending, policy)
            pending = []
            if tail:
                tail.observe(step + 1)
        seconds = time.perf_counter() - started
        steps.append(_step_row(step, row, scored, outcome, loss, bwd, seconds, len(prompt)))
        rollouts.extend(_rollout_rows(step, row, scored, decode, lengths["audit_prefix"]))
        pairs.extend(ledger_rows(step, scored))
        tokens_per_s = group.gen_tokens / seconds
        step_log.info("step %d q=%s reward %.3f %s %s gen %d tok %.0f tok/s %.2fs", step, row["id"],
                      float(scored.rewards.mean()), "active" if scored.active else "homog",
                      outcome.action if outcome else "accumulating", group.gen_tokens, tokens_per_s, seconds)
        loggers.log_step(step, {"mean_reward": float(scored.rewards.mean()), "active": float(scored.active),
                                "grad_norm": outcome.grad_norm if outcome else None, "loss": loss,
                                "gen_tokens": group.gen_tokens, "tokens_per_s": tokens_per_s, "seconds": seconds,
                                "lr": optimizer.param_groups[0]["lr"]})
        bar.update(1, group.gen_tokens, reward=f"{float(scored.rewards.mean()):.3f}",
                   active=progress["active_count"])
        progress["step"] = step + 1
        if progress["step"] % t.write_every == 0 or not more():
            _write_ledger(run_dir, steps, rollouts, pairs, keys)
        if not pending and (progress["step"] % t.checkpoint_every == 0 or not more()):
            save()
    bar.close()


def draw_group(name: str, sampling, prompt: list[int], lengths: dict, sc):
    """One question's group from the sampler `name` (flat: G/2 pairs of 2; trees and forks: K x B)."""
    if name in FORK_SAMPLERS:
        return get_fork_sampler(name)(sampling, prompt, horizon=lengths["horizon"], K=sc.K, B=sc.B,
                                      fork_start=lengths["fork_start"], fork_end=lengths["fork_end"],
                                      threshold=sc.fork_threshold)
    flat = name == "flat"
    return get_sampler(name)(sampling, prompt, horizon=lengths["horizon"], K=sc.group_size // 2 if flat else sc.K,
                             B=2 if flat else sc.B, t_min=lengths["t_min"], t_max=lengths["split_tokens"],
                             midpoint_min_len=lengths["midpoint_min_len"], long_eos_len=lengths["long_eos_len"])


def _update(cfg: Config, model, params, optimizer, pending, policy):
    """One optimizer update over the accumulated questions (each a unit-norm gradient if asked)."""
    t = cfg.train
    active = any(scored.active for _, scored in pending)
    totals = {"loss": 0.0, "out": 0, "full": 0}

    def accumulate() -> None:
        summed = [torch.zeros_like(p) for p in params] if t.unit_question_grad else None
        for prompt, scored in pending:
            if not scored.active and cfg.optimizer_step.name != "full_backward":
                continue  # all-zero advantages: only full_backward pays for that backward
            if summed is not None:
                for p in params:
                    p.grad = None
            loss, out, full = question_backward(model, prompt, scored, pad_id=policy.pad_id, recipe=t.loss_recipe,
                                                micro_batch=t.backward_micro_batch, device=policy.device,
                                                hinge_margin=cfg.sampler.fork_threshold)
            totals["loss"] += loss
            totals["out"] += out
            totals["full"] += full
            if summed is not None:
                norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
                scale = 1.0 / float(norm) if norm > 0 else 0.0
                for acc, p in zip(summed, params):
                    if p.grad is not None:
                        acc.add_(p.grad, alpha=scale)
        if summed is not None:
            for acc, p in zip(summed, params):
                p.grad = acc

    outcome = apply_update(params, optimizer, active=active, homogeneous_step=cfg.optimizer_step.name,
                           backward=accumulate, grad_clip=t.grad_clip)
    return outcome, totals["loss"] if outcome.backward_ran else float("nan"), (totals["out"], totals["full"])


def _step_row(step, row, scored, outcome, loss, bwd, seconds, prompt_len) -> dict:
    g = scored.group
    fork = cf_step_fields(scored.cf) if scored.cf is not None else {}  # b0_pass, gated / skipped, M_tot
    return {**fork,
        "step": step, "question_id": row["id"], "rewards": scored.rewards.flatten().tolist(),
        "mean_reward": float(scored.rewards.mean()), "correct": scored.correct.flatten().tolist(),
        "active": scored.active, "std": float(scored.rewards.flatten().std()),
        "update": outcome is not None, "action": outcome.action if outcome else "accumulated",
        "grad_norm": outcome.grad_norm if outcome else float("nan"), "loss": loss,
        "gen_tokens": g.gen_tokens, "prefill_tokens": g.prefill_tokens,
        "padded_prefill_tokens": g.padded_prefill_tokens, "untrimmed_steps": g.untrimmed_steps,
        "leaf_tokens": sum(len(leaf.tokens) for leaf in g.leaves()), "prompt_tokens": prompt_len,
        "bwd_out_tokens": bwd[0], "bwd_full_tokens": bwd[1],
        "capped": sum(not leaf.finished for leaf in g.leaves()), "seconds": seconds,
    }


def _rollout_rows(step, row, scored, decode, audit_cut: int) -> list[dict]:
    """One row per rollout. For the paper's >512-token prefix audit (§5.4) each row also keeps where its
    first `\\boxed` starts and, when it is longer than `audit_cut` tokens, the text of its first
    `audit_cut` tokens (512 in paper units)."""
    B = scored.rewards.shape[1]
    return [{
        "step": step, "index": i, "k": i // B, "b": i % B, "question_id": row["id"], "gold": row["answer"],
        "prefix_len": leaf.prefix_len, "length": len(leaf.tokens), "reward": float(r), "correct": float(c),
        "finished": leaf.finished, "capped": not leaf.finished, "text": text,
        "first_box_token": first_box_token(leaf.tokens, decode),
        "audit_prefix_text": decode(leaf.tokens[:audit_cut]) if len(leaf.tokens) > audit_cut else None,
    } for i, (leaf, r, c, text) in enumerate(zip(scored.leaves, scored.rewards.flatten().tolist(),
                                                 scored.correct.flatten().tolist(), scored.texts))]


def _write_ledger(run_dir, steps, rollouts, pairs, keys) -> None:
    store.write_table(run_dir, "steps", steps, keys)
    store.write_table(run_dir, "rollouts", rollouts, keys)
    store.write_table(run_dir, "pairs", pairs, keys)


def scaled_lengths(cfg: Config) -> dict:
    """Every paper length budget in this profile's units (profile.length_scale)."""
    scale, sc = cfg.profile.length_scale, cfg.sampler
    return {
        "horizon": scaled_length(cfg.horizon.tokens, scale),
        "gate": None if cfg.reward.gate_chars is None else scaled_length(cfg.reward.gate_chars, scale),
        "t_min": scaled_length(sc.t_min, scale), "split_tokens": scaled_length(sc.split_tokens, scale),
        "midpoint_min_len": scaled_length(sc.midpoint_min_len, scale),
        "long_eos_len": scaled_length(sc.long_eos_len, scale),
        "fork_start": scaled_length(sc.fork_start, scale), "fork_end": scaled_length(sc.fork_end, scale),
        "audit_prefix": scaled_length(AUDIT_PREFIX_TOKENS, scale),
    }


def totals(steps: list[dict]) -> dict:
    keys = ("gen_tokens", "prefill_tokens", "padded_prefill_tokens", "untrimmed_steps", "bwd_out_tokens", "bwd_full_tokens", "seconds")
    totals = {k: sum(s[k] for s in steps) for k in keys}
    totals.update(steps=len(steps), active_steps=sum(s["active"] for s in steps))
    return totals

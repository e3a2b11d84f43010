"""One run, top to bottom: read out the base policy, train, read out the trained policy.

Each training step takes one question (row s % len(rows)), samples G rollouts from the current
policy, scores them with the verifier reward (optionally gated), turns rewards into advantages,
and makes one optimizer update; homogeneous groups take the configured `optimizer_step`
(seed paper §1, §3.2, §4.1; baseline spec §5-§7). Tables are rewritten atomically as the run goes.
"""

from __future__ import annotations

import logging
import time
import traceback

import torch

from rlvr_sweep import data, store
from rlvr_sweep.config import Config, check_config, paper_arm, scaled_length
from rlvr_sweep.evaluation import evaluate_greedy
from rlvr_sweep.policy import load_policy, resolve_model_source
from rlvr_sweep.reward import first_box_token, get_grader, grading
from rlvr_sweep.rollout import ModelPolicy, get_sampler
from rlvr_sweep.run import checkpoint
from rlvr_sweep.update import TailAverage, apply_update, ledger_rows, make_adamw, score_group
from rlvr_sweep.update import backward as question_backward

log = logging.getLogger(__name__)
AUDIT_PREFIX_TOKENS = 512  # §5.4 gt512_prefix_audit: what the first 512 tokens of a longer rollout hold


def run(cfg: Config) -> dict:
    """Train and evaluate one run; a finished run folder is skipped. Returns the run summary.

    Everything that can be checked is checked before anything is written: the settings, the data
    files and benchmark names, and where the model comes from. Then the run takes its folder's lock
    (one writer per run: `store.run_lock`), loads the model, and resumes from its checkpoint or
    starts over. A finished run is sealed with a manifest before its `DONE` marker.
    """
    check_config(cfg)
    run_dir = store.run_dir_for(cfg)
    if store.is_finished(run_dir):
        return _skip_finished(run_dir)
    train_rows = data.training_rows(cfg.data)
    eval_sets = {b: data.benchmark_rows(b, cfg.data, cfg.eval.limit) for b in cfg.eval.benchmarks}
    resolve_model_source(cfg.model)  # a missing folder or unreachable hub fails here, in seconds
    with store.run_lock(run_dir, wait=cfg.run.wait_for_lock):
        if store.is_finished(run_dir):  # finished by the process this one waited for
            return _skip_finished(run_dir)
        if cfg.train.num_threads:
            torch.set_num_threads(cfg.train.num_threads)
        policy = load_policy(cfg.model)
        resume = _resume_or_start(cfg, run_dir)
        info = {
            "status": "running", "arm": cfg.arm, "paper_arm": paper_arm(cfg), "seed": cfg.seed,
            "horizon": cfg.horizon.tokens, "profile": cfg.profile.name, "config_hash": store.config_hash(cfg),
            "run_dir": str(run_dir.resolve()), "model_source": policy.source, "started_at": time.time(),
            "code": store.code_version(),
            "params": sum(p.numel() for p in policy.model.parameters() if p.requires_grad),  # P of the FLOP proxies
        }
        if resume:
            info["resumed_from_step"] = resume["progress"]["step"]
        store.atomic_write_json(run_dir / store.RUN_JSON, info)
        log.info("run %s -> %s", cfg.arm, run_dir)
        try:
            info.update(_train_and_evaluate(cfg, policy, train_rows, eval_sets, run_dir, resume))
            info["status"] = "finished"
        except BaseException as err:
            info.update(status="failed", error=repr(err), traceback=traceback.format_exc())
            raise
        finally:
            info["finished_at"] = time.time()
            info["wall_seconds"] = info["finished_at"] - info["started_at"]
            store.atomic_write_json(run_dir / store.RUN_JSON, info)
        store.finish(run_dir)
        _tidy(run_dir)
    _log_summary(info)
    return info


def _skip_finished(run_dir) -> dict:
    """A finished run is never moved or rewritten; a checkpoint or temporary file that a kill left
    after its DONE marker is removed (when no other process holds the run)."""
    log.info("skipping finished run %s", run_dir)
    if (run_dir / checkpoint.CHECKPOINT).exists() or any(run_dir.glob(".*.tmp-*")):
        try:
            with store.run_lock(run_dir):
                _tidy(run_dir)
        except store.RunBusyError:
            pass
    return {**store.read_run_json(run_dir), "skipped": True}


def _tidy(run_dir) -> None:
    checkpoint.remove(run_dir)
    store.remove_temp_files(run_dir)


def _resume_or_start(cfg: Config, run_dir) -> dict | None:
    """The checkpoint to resume from, or None after preparing a fresh folder. An unfinished folder
    without a usable checkpoint is moved aside, never deleted (or stops the run: on_unfinished=error)."""
    if not run_dir.exists():
        store.prepare_run_dir(cfg, run_dir)
        return None
    for path in store.remove_temp_files(run_dir):
        log.info("removed %s, left by a killed writer", path)
    try:
        resume = checkpoint.load(run_dir, store.config_hash(cfg))
        why = "holds an unfinished run without a checkpoint"
    except checkpoint.CheckpointError as err:
        log.error("%s", err)
        resume, why = None, f"has an unusable checkpoint ({err})"
    if resume is None:
        moved = store.prepare_run_dir(cfg, run_dir, why)
        log.warning("%s %s: moved it aside to %s and started over", run_dir, why, moved)
    return resume


def _train_and_evaluate(cfg: Config, policy, train_rows, eval_sets, run_dir, resume: dict | None) -> dict:
    grader_before = grading.stats()
    grading.warm_up()  # start the sympy worker now, not inside the first timed step
    torch.manual_seed(cfg.seed)
    t = cfg.train
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = make_adamw(params, t.lr, t.betas, t.adam_eps, t.weight_decay)
    generator = torch.Generator(device=policy.device).manual_seed(cfg.seed)
    tail = TailAverage(params, *t.tail_average) if t.tail_average else None
    progress = {"config_hash": store.config_hash(cfg), "step": 0, "active_count": 0, "base_done": False,
                "steps": [], "rollouts": [], "pairs": [], "grades": [], "accuracy": {}}
    if resume:
        progress = checkpoint.restore(resume, model=policy.model, optimizer=optimizer, generator=generator, tail=tail)
        log.info("resuming from step %d", progress["step"])
    lengths = _scaled_lengths(cfg)
    eval_tokens = scaled_length(cfg.eval.max_new_tokens, cfg.profile.length_scale)
    grade = get_grader(cfg.grader.name)
    keys = store.run_keys(cfg)

    def read_out(phase: str) -> None:
        for name, rows in eval_sets.items():
            graded = evaluate_greedy(policy, rows, benchmark=name, phase=phase, max_new_tokens=eval_tokens,
                                     batch_size=cfg.eval.batch_size, grade=grade)
            progress["grades"].extend(graded)
            progress["accuracy"].setdefault(phase, {}).update(_accuracy_by_source(name, graded))
        store.write_table(run_dir, "grades", progress["grades"], keys)

    def save() -> None:
        checkpoint.save(run_dir, model=policy.model, optimizer=optimizer, generator=generator, tail=tail,
                        progress=progress)

    if cfg.eval.before and not progress["base_done"]:
        read_out("base")
        progress["base_done"] = True
        save()
    _train(cfg, policy, params, optimizer, train_rows, generator, tail, lengths, grade, run_dir, progress, save, keys)
    if tail:
        tail.load_into(params)
    if cfg.eval.after:
        read_out("trained")
    return {
        "horizon_tokens": lengths["horizon"], "gate_chars": lengths["gate"], "eval_max_new_tokens": eval_tokens,
        "lengths": lengths, "accuracy": progress["accuracy"], "totals": _totals(progress["steps"]),
        "tail_average_steps": tail.count if tail else None,
        "grader": {k: v - grader_before.get(k, 0) for k, v in grading.stats().items()},  # this run's timeouts etc.
    }


def _train(cfg: Config, policy, params, optimizer, train_rows, generator, tail, lengths: dict, grade, run_dir,
           progress: dict, save, keys: dict) -> None:
    """The loop: one question per step; an optimizer update every `accumulate_questions` steps.
    `progress` holds the counters and ledger rows; it is checkpointed between updates."""
    model, tok = policy.model, policy.tokenizer
    t, sc, est = cfg.train, cfg.sampler, cfg.estimator
    sampling = ModelPolicy(policy, temperature=sc.temperature, top_p=sc.top_p, generator=generator)
    steps, rollouts, pairs = progress["steps"], progress["rollouts"], progress["pairs"]
    decode = lambda ids: tok.decode(ids, skip_special_tokens=False)  # noqa: E731  (EOS kept, as stored)
    pending = []
    warmup = False

    def more() -> bool:
        if t.active_steps:
            return progress["step"] < t.max_steps and progress["active_count"] < t.active_steps
        return progress["step"] < t.steps

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
                             beta=est.beta, alpha=est.alpha, zero_mass=est.zero_cont_token_mass)
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
        log.info("step %d q=%s reward %.3f %s %s gen %d tok %.0f tok/s %.2fs", step + 1, row["id"],
                 float(scored.rewards.mean()), "active" if scored.active else "homog",
                 outcome.action if outcome else "accumulating", group.gen_tokens, group.gen_tokens / seconds, seconds)
        progress["step"] = step + 1
        if progress["step"] % t.write_every == 0 or not more():
            _write_ledger(run_dir, steps, rollouts, pairs, keys)
        if not pending and (progress["step"] % t.checkpoint_every == 0 or not more()):
            save()


def draw_group(name: str, sampling, prompt: list[int], lengths: dict, sc):
    return get_sampler(name)(sampling, prompt, horizon=lengths["horizon"], K=sc.K if name != "flat" else sc.group_size // 2,
                             B=sc.B if name != "flat" else 2, t_min=lengths["t_min"], t_max=lengths["split_tokens"],
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
                                                micro_batch=t.backward_micro_batch, device=policy.device)
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
    return {
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


def _scaled_lengths(cfg: Config) -> dict:
    """Every paper length budget in this profile's units (profile.length_scale)."""
    scale, sc = cfg.profile.length_scale, cfg.sampler
    return {
        "horizon": scaled_length(cfg.horizon.tokens, scale),
        "gate": None if cfg.reward.gate_chars is None else scaled_length(cfg.reward.gate_chars, scale),
        "t_min": scaled_length(sc.t_min, scale), "split_tokens": scaled_length(sc.split_tokens, scale),
        "midpoint_min_len": scaled_length(sc.midpoint_min_len, scale),
        "long_eos_len": scaled_length(sc.long_eos_len, scale),
        "audit_prefix": scaled_length(AUDIT_PREFIX_TOKENS, scale),
    }


def _accuracy_by_source(benchmark: str, graded: list[dict]) -> dict:
    """Accuracy of a benchmark, plus each source's when it combines several (ext240)."""
    out = {benchmark: sum(g["correct"] for g in graded) / len(graded)}
    sources = sorted({g["source"] for g in graded})
    if len(sources) > 1:
        for source in sources:
            part = [g["correct"] for g in graded if g["source"] == source]
            out[f"{benchmark}/{source}"] = sum(part) / len(part)
    return out


def _totals(steps: list[dict]) -> dict:
    keys = ("gen_tokens", "prefill_tokens", "padded_prefill_tokens", "untrimmed_steps", "bwd_out_tokens", "bwd_full_tokens", "seconds")
    totals = {k: sum(s[k] for s in steps) for k in keys}
    totals.update(steps=len(steps), active_steps=sum(s["active"] for s in steps))
    return totals


def _log_summary(info: dict) -> None:
    acc = info.get("accuracy", {})
    parts = [f"{phase} {name} {value:.3f}" for phase, by_name in acc.items() for name, value in by_name.items()]
    log.info("finished %s seed %s in %.1fs: %s", info["arm"], info["seed"], info["wall_seconds"], ", ".join(parts))

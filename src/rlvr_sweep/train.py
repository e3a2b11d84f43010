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

from rlvr_sweep import data, grading, results
from rlvr_sweep.config import Config, scaled_length
from rlvr_sweep.estimators import get_estimator, is_homogeneous
from rlvr_sweep.graders import get_grader
from rlvr_sweep.evaluate import encode_prompts, evaluate_greedy
from rlvr_sweep.generation import generate
from rlvr_sweep.losses import pack_sequences, policy_loss, token_logprobs
from rlvr_sweep.model import load_policy
from rlvr_sweep.optim import apply_update, make_adamw
from rlvr_sweep.rewards import REWARDS, score_rollouts

log = logging.getLogger(__name__)
SAMPLERS = ("flat",)


def run(cfg: Config) -> dict:
    """Train and evaluate one run; a finished run folder is skipped. Returns the run summary."""
    run_dir = results.run_dir_for(cfg)
    if results.is_finished(run_dir):
        log.info("skipping finished run %s", run_dir)
        return {**results.read_run_json(run_dir), "skipped": True}
    _check_choices(cfg)
    policy = load_policy(cfg.model)  # fails fast, before anything is written
    train_rows = data.training_rows(cfg.data)
    eval_sets = {b: data.benchmark_rows(b, cfg.data, cfg.eval.limit) for b in cfg.eval.benchmarks}
    moved = results.prepare_run_dir(cfg, run_dir)
    if moved:
        log.warning("moved the unfinished run folder aside to %s and started over", moved)
    info = {
        "status": "running", "arm": cfg.arm, "seed": cfg.seed, "horizon": cfg.horizon.tokens,
        "profile": cfg.profile.name, "config_hash": results.config_hash(cfg), "run_dir": str(run_dir.resolve()),
        "model_source": policy.source, "started_at": time.time(), "code": results.code_version(),
    }
    results.atomic_write_json(run_dir / results.RUN_JSON, info)
    log.info("run %s -> %s", cfg.arm, run_dir)
    try:
        info.update(_train_and_evaluate(cfg, policy, train_rows, eval_sets, run_dir))
        info["status"] = "finished"
    except BaseException as err:
        info.update(status="failed", error=repr(err), traceback=traceback.format_exc())
        raise
    finally:
        info["finished_at"] = time.time()
        info["wall_seconds"] = info["finished_at"] - info["started_at"]
        results.atomic_write_json(run_dir / results.RUN_JSON, info)
    results.mark_done(run_dir)
    _log_summary(info)
    return info


def _train_and_evaluate(cfg: Config, policy, train_rows, eval_sets, run_dir) -> dict:
    grader_before = grading.stats()
    grading.warm_up()  # start the sympy worker now, not inside the first timed step
    torch.manual_seed(cfg.seed)
    generator = torch.Generator(device=policy.device).manual_seed(cfg.seed)
    horizon = scaled_length(cfg.horizon.tokens, cfg.profile.length_scale)
    gate = None if cfg.reward.gate_chars is None else scaled_length(cfg.reward.gate_chars, cfg.profile.length_scale)
    eval_tokens = scaled_length(cfg.eval.max_new_tokens, cfg.profile.length_scale)
    grade = get_grader(cfg.grader.name)
    grades: list[dict] = []
    accuracy: dict = {}

    def read_out(phase: str) -> None:
        for name, rows in eval_sets.items():
            graded = evaluate_greedy(policy, rows, benchmark=name, phase=phase, max_new_tokens=eval_tokens,
                                     batch_size=cfg.eval.batch_size, grade=grade)
            grades.extend(graded)
            accuracy.setdefault(phase, {}).update(_accuracy_by_source(name, graded))
        results.write_table(run_dir, "grades", grades)

    if cfg.eval.before:
        read_out("base")
    steps, rollouts = _train(cfg, policy, train_rows, generator, horizon, gate, grade, run_dir)
    if cfg.eval.after:
        read_out("trained")
    return {
        "horizon_tokens": horizon, "gate_chars": gate, "eval_max_new_tokens": eval_tokens, "accuracy": accuracy,
        "totals": _totals(steps),
        "grader": {k: v - grader_before.get(k, 0) for k, v in grading.stats().items()},  # this run's timeouts etc.
    }


def _train(cfg: Config, policy, train_rows, generator, horizon: int, gate: int | None, grade, run_dir):
    model, tok = policy.model, policy.tokenizer
    params = [p for p in model.parameters() if p.requires_grad]
    t = cfg.train
    optimizer = make_adamw(params, t.lr, t.betas, t.adam_eps, t.weight_decay)
    estimator = get_estimator(cfg.estimator.name)
    group = cfg.sampler.group_size
    steps: list[dict] = []
    rollouts: list[dict] = []
    for step in range(t.steps):
        started = time.perf_counter()
        row = train_rows[step % len(train_rows)]
        prompt = encode_prompts(tok, [row["problem"]])[0]
        model.eval()
        gen = generate(model, [prompt] * group, max_new_tokens=horizon, eos_id=policy.eos_id, pad_id=policy.pad_id,
                       temperature=cfg.sampler.temperature, top_p=cfg.sampler.top_p, generator=generator)
        texts = [tok.decode(c, skip_special_tokens=False) for c in gen.tokens]  # EOS kept, as in the baseline
        reward_list, correct = score_rollouts(texts, row["answer"], gate, grade)
        rewards = torch.tensor(reward_list)
        advantages = estimator(rewards, eps=cfg.estimator.eps, std=cfg.estimator.std)
        active = not is_homogeneous(rewards)
        loss_total = [0.0]

        def backward() -> None:
            chunk = t.backward_micro_batch or group
            for lo in range(0, group, chunk):
                ids, attn, cmask = pack_sequences([prompt] * len(gen.tokens[lo:lo + chunk]), gen.tokens[lo:lo + chunk], policy.pad_id)
                start = len(prompt) - 1
                logps = token_logprobs(model, ids.to(policy.device), attn.to(policy.device), start)
                loss = policy_loss(logps, cmask[:, start:].to(policy.device), advantages[lo:lo + chunk], t.loss_recipe, group)
                loss.backward()
                loss_total[0] += float(loss.detach())

        model.train()
        outcome = apply_update(params, optimizer, active=active, homogeneous_step=cfg.optimizer_step.name,
                               backward=backward, grad_clip=t.grad_clip)
        seconds = time.perf_counter() - started
        out_tokens = gen.generated_tokens
        steps.append({
            "step": step, "question_id": row["id"], "rewards": rewards.tolist(), "mean_reward": float(rewards.mean()),
            "correct": correct, "active": active, "std": float(rewards.std()), "advantages": advantages.tolist(),
            "action": outcome.action, "grad_norm": outcome.grad_norm, "loss": loss_total[0] if outcome.backward_ran else float("nan"),
            "gen_tokens": out_tokens, "prefill_tokens": gen.prefill_tokens, "padded_prefill_tokens": gen.padded_prefill_tokens,
            "untrimmed_steps": gen.untrimmed_steps,
            "bwd_out_tokens": out_tokens if outcome.backward_ran else 0,
            "bwd_full_tokens": out_tokens + len(prompt) * group if outcome.backward_ran else 0,
            "capped": sum(not f for f in gen.finished), "seconds": seconds,
        })
        rollouts.extend({
            "step": step, "index": i, "question_id": row["id"], "gold": row["answer"], "length": n, "reward": float(r), "correct": float(c),
            "finished": f, "capped": not f, "text": x,
        } for i, (n, r, c, f, x) in enumerate(zip(gen.lengths, rewards.tolist(), correct, gen.finished, texts)))
        log.info("step %d/%d q=%s reward %.3f %s %s gen %d tok %.0f tok/s %.2fs", step + 1, t.steps, row["id"],
                 float(rewards.mean()), "active" if active else "homog", outcome.action, out_tokens,
                 out_tokens / seconds, seconds)
        if (step + 1) % t.write_every == 0 or step + 1 == t.steps:
            results.write_table(run_dir, "steps", steps)
            results.write_table(run_dir, "rollouts", rollouts)
    return steps, rollouts


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


def _check_choices(cfg: Config) -> None:
    if cfg.sampler.name not in SAMPLERS:
        raise ValueError(f"unknown sampler {cfg.sampler.name!r}; valid: {list(SAMPLERS)}")
    if cfg.reward.name not in REWARDS:
        raise ValueError(f"unknown reward {cfg.reward.name!r}; valid: {list(REWARDS)}")
    get_estimator(cfg.estimator.name)


def _log_summary(info: dict) -> None:
    acc = info.get("accuracy", {})
    parts = [f"{phase} {name} {value:.3f}" for phase, by_name in acc.items() for name, value in by_name.items()]
    log.info("finished %s seed %s in %.1fs: %s", info["arm"], info["seed"], info["wall_seconds"], ", ".join(parts))

"""The training loop, read top to bottom: draw -> score -> credit -> accumulate -> update -> ledger.

Each step takes one question (row s % len(rows)), draws its group from the current policy with the
run's sampler, scores it with the verifier reward (optionally gated) and credits it with the run's
estimator, and every `accumulate_questions` steps makes one optimizer update; homogeneous groups take
the configured `optimizer_step` (seed paper §1, §3.2, §4.1; baseline spec §5-§7). The stages are bound
from the config once (`make_trainer`), so the loop never unpacks a setting; its state is a
`TrainState`, checkpointed between updates. Tables are rewritten atomically as the run goes. The run
around it (folder, checkpoints, read-outs) is `lifecycle.run`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from numbers import Real
from types import SimpleNamespace

import numpy as np

from rlvr_sweep import data
from rlvr_sweep.config import Config, scaled_length
from rlvr_sweep.credit import ESTIMATORS, bind_estimator
from rlvr_sweep.reward import REWARDS, answering, shaped
from rlvr_sweep.rollout import ENGINES, SAMPLERS, ModelPolicy
from rlvr_sweep.rollout.seeding import PerRolloutPolicy
from rlvr_sweep.run.ledger import (  # noqa: F401  (write_ledger, totals: re-exported for the run's lifecycle)
    credit_rows, group_signals, rollout_rows, step_row, totals, update_signals, write_ledger,
)
from rlvr_sweep.plugins import PluginOutputError
from rlvr_sweep.run.progress import Progress
from rlvr_sweep.store import beacon
from rlvr_sweep.update import (
    OBJECTIVES, Objective, Update, UpdateSettings, credit_update, kl_penalty, ledger_rows, sampled_logps, score_group,
    update_step,
)

log = logging.getLogger(__name__)
# one line per step, for the run's own logs/run.log only (the console gets the progress bar)
step_log = logging.getLogger("rlvr_sweep.steps")
step_log.propagate = False
BEACON_SIGNALS = ("entropy", "kl_ref", "clip_low", "clip_high")  # the progress file's (`status`' detail)
LOGPROB_ENGINES = ("reference", "static", "auto")  # the engines that record each sampled token's raw log-prob
AUDIT_PREFIX_TOKENS = 512  # §5.4 gt512_prefix_audit: what the first 512 tokens of a longer rollout hold
SURFACE_HEAD_TOKENS = 160  # §3.3 surface-token divergence: equations in the first 160 tokens


@dataclass
class TrainState:
    """What a resumed run continues from, besides the model, optimizer and random states."""

    run_hash: str
    step: int = 0  # steps done (the next step's 0-based index)
    active_count: int = 0  # active steps so far (the warmup and active_steps budgets count these)
    base_done: bool = False  # the base read-out is complete
    steps: list[dict] = field(default_factory=list)  # the ledgers so far, one row per step / rollout / pair
    rollouts: list[dict] = field(default_factory=list)
    pairs: list[dict] = field(default_factory=list)
    grades: list[dict] = field(default_factory=list)
    accuracy: dict = field(default_factory=dict)

    def state_dict(self) -> dict:
        return dataclasses.asdict(self)

    def load_state_dict(self, state: dict) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, state[f.name])


@dataclass
class Trainer:
    """The loop's stages, bound from the run's config once (`make_trainer`)."""

    rows: list[dict]
    encode: Callable[[str], list[int]]  # problem -> prompt tokens
    draw: Callable[[list[int], bool, int], object]  # (prompt, warmup, step) -> RolloutGroup
    in_warmup: Callable[[TrainState], bool]  # flat groups until the warmup's active steps are done
    score: Callable[[list[int], object, str], object]  # (prompt, group, gold) -> ScoredGroup: reward and credit
    update: Callable[[list], Update]  # pending questions -> one optimizer update
    accumulate: int  # questions per update
    dynamic_sampling: bool  # homogeneous groups join no update (DAPO)
    more: Callable[[TrainState], bool]  # the step budget
    after_update: Callable[[int], None]  # steps done -> the tail average's turn
    record: Callable[..., None]  # the ledger rows, the step log, the loggers, the progress bar
    persist: Callable[[TrainState, bool], None]  # (state, at an update boundary) -> tables, checkpoint
    close: Callable[[], None]  # the progress bar


def train_loop(t: Trainer, state: TrainState) -> None:
    """The loop. Steps are numbered from 0, in the tables, the log and the loggers alike."""
    pending, warmup = [], False
    while t.more(state):
        step, started = state.step, time.perf_counter()
        row = t.rows[step % len(t.rows)]
        prompt = t.encode(row["problem"])
        if not pending:  # chosen per update, so one update never mixes flat warmup and tree questions
            warmup = t.in_warmup(state)
        group = t.draw(prompt, warmup, step)  # rollout
        scored = t.score(prompt, group, row["answer"])  # reward and credit
        state.active_count += scored.active
        filtered = t.dynamic_sampling and not scored.active
        if not filtered:
            pending.append((prompt, scored))
        update = None
        if len(pending) == t.accumulate:  # loss, backward, optimizer step
            update, pending = t.update(pending), []
            t.after_update(step + 1)
        t.record(state, step, row, scored, update, time.perf_counter() - started, len(prompt), filtered)  # ledger
        state.step = step + 1
        t.persist(state, not pending)
    t.close()


def make_trainer(cfg: Config, policy, params, optimizer, rows: list[dict], generator, tail, grade, *,
                 write: Callable[[TrainState], None], save: Callable[[TrainState], None], loggers,
                 start_step: int = 0, reference=None, peers=None) -> Trainer:
    """Bind every stage of the loop from `cfg`: sampler, reward, estimator, update, budgets, reporting.
    `grade`: the run's grader, which the training task's own grader (if it has one) replaces; `reference`: the
    frozen initial policy, where the objective needs one (`bound_objective(cfg).needs_reference`); `peers`: the
    run's ranks (`run.ranks.World`), where it has several: they split each group's decoding (per-rollout seeding)
    and its backward."""
    t, sc = cfg.train, cfg.sampler
    scale = cfg.profile.length_scale
    lengths = scaled_lengths(cfg)
    task = data.task_of(cfg.data.name)
    answers = answering(task, cfg.grader.name)
    grade = task.grade or grade
    sampling = ModelPolicy(policy, temperature=sc.temperature, top_p=sc.top_p, generator=generator,
                           generate_fn=ENGINES[cfg.model.engine].fn, record_logprobs=cfg.model.engine in LOGPROB_ENGINES)
    if t.rollout_seeding == "per_rollout":
        sampling = PerRolloutPolicy(sampling, cfg.seed, peers)
    sampler, flat = SAMPLERS[sc.name].bind(sc, scale), SAMPLERS["flat"].bind(sc, scale)
    reward = bound_reward(cfg, grade, answers.extract_reward)
    estimator = bind_estimator(ESTIMATORS[cfg.estimator.name], cfg.estimator)
    decode = lambda ids: policy.tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731  (EOS kept, as stored)
    settings = UpdateSettings(cfg.optimizer_step.name, t.loss_recipe, t.backward_micro_batch, t.unit_question_grad,
                              t.grad_clip, sc.fork_threshold, policy.pad_id, policy.device, bound_objective(cfg),
                              reference, peers if peers is not None and peers.size > 1 else None)
    budget = t.max_steps if t.active_steps else t.steps
    bar = Progress(budget, "train", "step", initial=start_step)
    objective = settings.objective

    def penalty_of(prompt):
        """KL to the reference as a reward penalty (`objective.kl_in=reward`): beta sum_t k per rollout."""
        if not objective.kl_in_reward:
            return None

        def penalty(group):
            leaves = SimpleNamespace(leaves=group.leaves())
            logps = dict(pad_id=policy.pad_id, micro_batch=t.backward_micro_batch, device=policy.device)
            return kl_penalty(sampled_logps(policy.model, prompt, leaves, **logps),
                              sampled_logps(reference, prompt, leaves, **logps), objective.kl_beta,
                              objective.kl_estimator)

        return penalty

    awaiting: list[dict] = []  # the rollout rows of the questions the next update credits
    given: list = []  # ... and the groups as the last update credited them (a batch estimator credits there)

    def credited(pending: list) -> list:
        scored = credit_update([s for _, s in pending], estimator)
        given[:] = scored
        return [(prompt, s) for (prompt, _), s in zip(pending, scored)]

    def draw(prompt, warmup, step):
        if isinstance(sampling, PerRolloutPolicy):
            sampling.at_step(step)
        group = flat(sampling, prompt, horizon=lengths["horizon"]).with_category("flat_warmup") if warmup \
            else sampler(sampling, prompt, horizon=lengths["horizon"])
        group.check_conservation(lengths["horizon"])
        return group

    def more(state: TrainState) -> bool:
        if t.active_steps:
            return state.step < t.max_steps and state.active_count < t.active_steps
        return state.step < t.steps

    def record(state: TrainState, step, row, scored, update, seconds, prompt_len, filtered) -> None:
        state.steps.append(step_row(step, row, scored, update, seconds, prompt_len, filtered))
        rows = rollout_rows(step, row, scored, decode, lengths["audit_prefix"], lengths["surface_head"])
        state.rollouts.extend(rows)
        if not filtered:  # the update's credit is the rows' (a batch estimator's is given there)
            awaiting.extend(rows)
            if update is not None:
                credit_rows(awaiting, given, update.behaviour)
                awaiting.clear()
        state.pairs.extend(ledger_rows(step, scored))
        report_step(step, row, scored, update, seconds, state, loggers, bar, optimizer)

    def persist(state: TrainState, at_update_boundary: bool) -> None:
        last = not more(state)
        if state.step % t.write_every == 0 or last:
            write(state)
        if at_update_boundary and (state.step % t.checkpoint_every == 0 or last):
            save(state)

    return Trainer(
        rows=rows, encode=lambda problem: data.encode_prompts(policy.tokenizer, [problem], task.prompt)[0], draw=draw,
        in_warmup=lambda state: sc.name != "flat" and state.active_count < sc.bifurcate_after_active,
        score=lambda prompt, group, gold: score_group(group, decode, gold, reward=reward, estimator=estimator,
                                                      penalty=penalty_of(prompt)),
        update=lambda pending: update_step(policy.model, params, optimizer, credited(pending), settings),
        accumulate=t.accumulate_questions, dynamic_sampling=t.dynamic_sampling, more=more,
        after_update=(lambda done: tail.observe(done)) if tail else (lambda done: None),
        record=record, persist=persist, close=bar.close)


def bound_objective(cfg: Config) -> Objective:
    """The run's objective with its settings (`update.backward.Objective`)."""
    o = cfg.objective
    option = OBJECTIVES[o.name]
    return Objective(o.name, option.bind(o), option.kind, o.passes, o.mini_batches, o.aggregation, o.kl_beta,
                     o.kl_estimator, o.kl_in, o.measure_kl, o.mask_truncated,
                     scaled_length(cfg.horizon.tokens, cfg.profile.length_scale))


def bound_reward(cfg: Config, grade, extract) -> Callable:
    """`reward(texts, gold, tokens) -> (rewards, correct)`: the run's reward with its settings, its grader and
    what it declares it receives (each rollout's `tokens`, the task's answer `extract`ion)."""
    option = REWARDS[cfg.reward.name]
    fn = option.bind(cfg.reward, cfg.profile.length_scale)
    wants_tokens, wants_extract = "tokens" in option.receives, "extract" in option.receives
    lengths = scaled_lengths(cfg)

    def reward(texts, gold, tokens):
        extra = {**({"tokens": tokens} if wants_tokens else {}), **({"extract": extract} if wants_extract else {})}
        rewards, correct = checked_reward(option, fn(texts, gold, grade=grade, **extra), len(texts))
        if lengths["overlong_buffer"] is None:
            return rewards, correct
        return shaped(rewards, [len(t) for t in tokens], lengths["horizon"], lengths["overlong_buffer"],
                      cfg.reward.overlong_penalty), correct

    return reward


def checked_reward(option, returned, n: int) -> tuple[list[float], list[bool]]:
    """A reward's output as it enters the run: (rewards, correct), one finite number and one verdict (a bool, or
    0 / 1) per rollout; anything else is refused in one line naming the reward and its function."""
    where = f"reward {option.name!r} ({getattr(option.fn, '__module__', '?')}.{getattr(option.fn, '__qualname__', '?')})"
    if not isinstance(returned, (tuple, list)) or len(returned) != 2:
        raise PluginOutputError(f"{where} returned {type(returned).__name__}: a reward returns (rewards, correct)")
    rewards, correct = returned
    for what, values in (("rewards", rewards), ("correct", correct)):
        if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
            raise PluginOutputError(f"{where} returned {type(values).__name__} as its {what}: one value per rollout")
        if len(values) != n:
            raise PluginOutputError(f"{where} returned {len(values)} {what} for {n} rollouts: one per rollout")
    for i, r in enumerate(rewards):  # checked, and passed on as they are (their type is what the run computes with)
        if not isinstance(r, (Real, np.bool_)) or not math.isfinite(float(r)):
            raise PluginOutputError(f"{where} returned reward {r!r} for rollout {i}: a reward is a finite number")
    for i, c in enumerate(correct):
        if not isinstance(c, (Real, np.bool_)) or float(c) not in (0.0, 1.0):
            raise PluginOutputError(f"{where} returned correct={c!r} for rollout {i}: a verdict is true or false (1 or 0)")
    return rewards, correct


def report_step(step, row, scored, update, seconds, state, loggers, bar, optimizer) -> None:
    """The step's line in logs/run.log, its row in the experiment loggers, the progress bar."""
    group, outcome = scored.group, update.outcome if update else None
    tokens_per_s = group.gen_tokens / seconds
    reward = float(scored.rewards.mean())
    step_log.info("step %d q=%s reward %.3f %s %s gen %d tok %.0f tok/s %.2fs", step, row["id"], reward,
                  "active" if scored.active else "homog", outcome.action if outcome else "accumulating",
                  group.gen_tokens, tokens_per_s, seconds)
    health = {k: (None if isinstance(v, float) and math.isnan(v) else float(v))
              for k, v in {**group_signals(scored), **update_signals(update)}.items()}
    loggers.log_step(step, {"mean_reward": reward, "active": float(scored.active),
                            "grad_norm": outcome.grad_norm if outcome else None,
                            "loss": update.loss if update else float("nan"), "gen_tokens": group.gen_tokens,
                            "tokens_per_s": tokens_per_s, "seconds": seconds, "lr": optimizer.param_groups[0]["lr"],
                            **health})
    signal = beacon.current()
    if signal is not None and update is not None:  # what `status` shows of the last update
        signal.fields.update({k: health[k] for k in BEACON_SIGNALS})
    bar.update(1, group.gen_tokens, reward=f"{reward:.3f}", active=state.active_count)


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
        "surface_head": scaled_length(SURFACE_HEAD_TOKENS, scale),
        "overlong_buffer": None if cfg.reward.overlong_buffer is None else scaled_length(cfg.reward.overlong_buffer, scale),
    }

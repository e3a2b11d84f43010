"""One run, top to bottom: check, lock, load, resume, read out, train, read out, keep the model, seal.

`run(cfg)` is the whole life of a run folder. Everything that can be checked is checked before
anything is written (the settings, the data files and benchmark names, where the model comes from);
then the run takes its folder's lock (one writer per run), loads the model, resumes from its
checkpoint or starts over, and logs to `logs/run.log` and the configured experiment loggers. A
training run (`task=train`) reads out the base policy, trains (`train.train_loop`), keeps the final
policy as `model/` and reads it out; `task=evaluate` only reads out `model.path` (phase `eval`). The
folder is sealed with a manifest before its `DONE` marker.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from rlvr_sweep import data, evaluation, store
from rlvr_sweep.config import Config, check_config, paper_arm, scaled_length
from rlvr_sweep.policy import load_policy, resolve_model_source, weights_fingerprint
from rlvr_sweep.reward import get_grader, grading
from rlvr_sweep.rollout import static_engine, vllm_engine
from rlvr_sweep.run import checkpoint, readouts, train
from rlvr_sweep.run.loggers import check_loggers, open_loggers
from rlvr_sweep.run.progress import Progress
from rlvr_sweep.update import TailAverage, make_adamw

log = logging.getLogger(__name__)
LOGS = "logs"
MODEL = "model"


def with_checkpoint_identity(cfg: Config) -> Config:
    """For task=evaluate, the config with `model.fingerprint` set to the checkpoint's weights digest, so
    the read-out's run folder (its identity) names the checkpoint it read; else `cfg` unchanged."""
    if cfg.task != "evaluate" or not cfg.model.path or cfg.model.fingerprint:
        return cfg
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, fingerprint=weights_fingerprint(cfg.model.path)))


def run(cfg: Config) -> dict:
    """Train and evaluate one run (or read out one checkpoint); a finished run folder is skipped.
    Returns the run summary (run.json)."""
    check_config(cfg)
    check_loggers(cfg.logger)
    train_rows = data.training_rows(cfg.data) if cfg.task == "train" else []
    eval_sets = {b: data.benchmark_rows(b, cfg.data, cfg.eval.limit) for b in cfg.eval.benchmarks}
    resolve_model_source(cfg.model)  # a missing folder or unreachable hub fails here, in seconds
    cfg = with_checkpoint_identity(cfg)
    run_dir = store.run_dir_for(cfg)
    if store.is_finished(run_dir):
        return _skip_finished(run_dir)
    with store.run_lock(run_dir, wait=cfg.run.wait_for_lock):
        if store.is_finished(run_dir):  # finished by the process this one waited for
            return _skip_finished(run_dir)
        if cfg.train.num_threads:
            torch.set_num_threads(cfg.train.num_threads)
        hf_logging.disable_progress_bar()  # the run reports its own progress
        policy = load_policy(cfg.model)
        resume = _resume_or_start(cfg, run_dir)
        with _run_log(run_dir / LOGS / "run.log"):
            info = _run_info(cfg, run_dir, policy, resume)
            store.atomic_write_json(run_dir / store.RUN_JSON, info)
            log.info("run %s -> %s", cfg.arm, run_dir)
            loggers = open_loggers(cfg.logger, run_dir / LOGS, resume["progress"]["step"] if resume else None,
                                   run_id=f"{cfg.arm}-{info['config_hash']}-s{cfg.seed}", name=run_dir.name)
            if not resume:
                loggers.log_config(store.config_dict(cfg))
            try:
                body = _evaluate_checkpoint if cfg.task == "evaluate" else _train_and_evaluate
                info.update(body(cfg, policy, train_rows, eval_sets, run_dir, resume, loggers))
                info["status"] = "finished"
            except BaseException as err:
                info.update(status="failed", error=repr(err), traceback=traceback.format_exc())
                raise
            finally:
                info["finished_at"] = time.time()
                info["wall_seconds"] = info["finished_at"] - info["started_at"]
                store.atomic_write_json(run_dir / store.RUN_JSON, info)
                loggers.close()
                static_engine.release(policy.model)  # the fast engines' caches and graphs
                vllm_engine.release(policy.model)
            store.finish(run_dir)
            _tidy(run_dir)
            _log_summary(info)
    return info


# ---------------------------------------------------------------------------------------------
# the run folder


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
    without a usable checkpoint is moved aside, never deleted (or stops the run: on_unfinished=error).
    A read-out of a checkpoint resumes from its grades table instead (benchmark by benchmark)."""
    if not run_dir.exists():
        store.prepare_run_dir(cfg, run_dir)
        return None
    for path in store.remove_temp_files(run_dir):
        log.info("removed %s, left by a killed writer", path)
    if cfg.task == "evaluate":
        done = store.read_table(run_dir, "grades").to_dict("records") if (run_dir / "grades.parquet").is_file() else []
        return {"progress": {"step": 0, "grades": done}}
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


@contextmanager
def _run_log(path: Path):
    """Everything rlvr_sweep logs while the run lives, and one line per training step, also goes to
    the run's own `logs/run.log` (appended across resumes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    loggers = [logging.getLogger("rlvr_sweep"), train.step_log]
    for logger in loggers:
        logger.addHandler(handler)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        handler.close()


def _run_info(cfg: Config, run_dir, policy, resume) -> dict:
    scale = cfg.profile.length_scale
    info = {
        "status": "running", "task": cfg.task, "arm": cfg.arm, "paper_arm": paper_arm(cfg), "seed": cfg.seed,
        "horizon": cfg.horizon.tokens, "profile": cfg.profile.name, "length_scale": scale,
        "rollout_cap": scaled_length(cfg.horizon.tokens, scale),
        "readout_cap": scaled_length(cfg.eval.max_new_tokens, scale),
        "optimizer_step": cfg.optimizer_step.name, "accumulate_questions": cfg.train.accumulate_questions,
        "config_hash": store.config_hash(cfg), "run_dir": str(run_dir.resolve()), "model_source": policy.source,
        "model_fingerprint": cfg.model.fingerprint, "started_at": time.time(), "code": store.code_version(),
        "params": sum(p.numel() for p in policy.model.parameters() if p.requires_grad),  # P of the FLOP proxies
    }
    if resume and cfg.task == "train":
        info["resumed_from_step"] = resume["progress"]["step"]
    return info


# ---------------------------------------------------------------------------------------------
# what a run does


def _read_out(cfg: Config, policy, eval_sets: dict, phase: str, grade, progress: dict, run_dir, keys: dict,
              loggers, step: int) -> None:
    """Read out every benchmark not yet read out in `phase`, writing the grades table after each."""
    done = {(g["phase"], g["benchmark"]) for g in progress["grades"]}
    for name, rows in eval_sets.items():
        if (phase, name) in done:
            continue
        bar = Progress(len(rows), f"read-out {phase} {name}", "item")
        graded = readouts.read_out(cfg, policy, rows, benchmark=name, phase=phase, grade=grade,
                                   on_batch=lambda items, tokens: bar.update(items, tokens))
        bar.close()
        progress["grades"].extend(graded)
        store.write_table(run_dir, "grades", progress["grades"], keys)
    for name in eval_sets:
        accuracy = _accuracy_by_source(name, [g for g in progress["grades"] if (g["phase"], g["benchmark"]) == (phase, name)])
        progress["accuracy"].setdefault(phase, {}).update(accuracy)
        loggers.log_accuracy(step, phase, accuracy)
        log.info("%s %s: %s", phase, name, ", ".join(f"{k} {v:.3f}" for k, v in accuracy.items()))


def _evaluate_checkpoint(cfg: Config, policy, train_rows, eval_sets, run_dir, resume, loggers) -> dict:
    """task=evaluate: read out the checkpoint in `model.path` on every benchmark (phase `eval`)."""
    grader_before = grading.stats()
    progress = {"grades": resume["progress"]["grades"] if resume else [], "accuracy": {}}
    _read_out(cfg, policy, eval_sets, "eval", get_grader(cfg.grader.name), progress, run_dir, store.run_keys(cfg),
              loggers, step=0)
    return {"eval_max_new_tokens": scaled_length(cfg.eval.max_new_tokens, cfg.profile.length_scale),
            "accuracy": progress["accuracy"],
            "grader": {k: v - grader_before.get(k, 0) for k, v in grading.stats().items()}}


def _train_and_evaluate(cfg: Config, policy, train_rows, eval_sets, run_dir, resume, loggers) -> dict:
    grader_before = grading.stats()
    grading.warm_up()  # start the sympy workers now, not inside the first timed step
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
    lengths = train.scaled_lengths(cfg)
    grade = get_grader(cfg.grader.name)
    keys = store.run_keys(cfg)

    def save() -> None:
        checkpoint.save(run_dir, model=policy.model, optimizer=optimizer, generator=generator, tail=tail,
                        progress=progress)

    if cfg.eval.before and not progress["base_done"]:
        _read_out(cfg, policy, eval_sets, "base", grade, progress, run_dir, keys, loggers, step=0)
        progress["base_done"] = True
        save()
    train.train_loop(cfg, policy, params, optimizer, train_rows, generator, tail, lengths, grade, run_dir, progress,
                     save, keys, loggers)
    if tail:
        tail.load_into(params)
    if t.save_model:
        _save_model(policy, run_dir / MODEL)
    if cfg.eval.after:
        _read_out(cfg, policy, eval_sets, "trained", grade, progress, run_dir, keys, loggers, step=progress["step"])
    return {
        "horizon_tokens": lengths["horizon"], "gate_chars": lengths["gate"],
        "eval_max_new_tokens": scaled_length(cfg.eval.max_new_tokens, cfg.profile.length_scale),
        "lengths": lengths, "accuracy": progress["accuracy"], "totals": train.totals(progress["steps"]),
        "tail_average_steps": tail.count if tail else None, "model_dir": MODEL if t.save_model else None,
        "grader": {k: v - grader_before.get(k, 0) for k, v in grading.stats().items()},  # this run's timeouts etc.
    }


def _save_model(policy, folder: Path) -> None:
    """The final policy as a `save_pretrained` folder (weights, config, tokenizer), written beside and
    renamed into place whole; `model.path=<run>/model` loads it."""
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    policy.model.save_pretrained(tmp, safe_serialization=True)
    policy.tokenizer.save_pretrained(tmp)
    if folder.exists():  # a copy saved by this same unfinished run before it was killed
        shutil.rmtree(folder)
    tmp.rename(folder)
    log.info("saved the final policy to %s", folder)


def _accuracy_by_source(benchmark: str, graded: list[dict]) -> dict:
    """Accuracy of a benchmark, plus each source's when it combines several (ext240). Only the rows the
    read-out scores count (every draw of a sampled read-out, the greedy root of a fork read-out)."""
    graded = evaluation.accuracy_rows(graded)
    out = {benchmark: sum(g["correct"] for g in graded) / len(graded)}
    sources = sorted({g["source"] for g in graded})
    if len(sources) > 1:
        for source in sources:
            part = [g["correct"] for g in graded if g["source"] == source]
            out[f"{benchmark}/{source}"] = sum(part) / len(part)
    return out


def _log_summary(info: dict) -> None:
    acc = info.get("accuracy", {})
    parts = [f"{phase} {name} {value:.3f}" for phase, by_name in acc.items() for name, value in by_name.items()]
    log.info("finished %s seed %s in %.1fs: %s", info["arm"], info["seed"], info["wall_seconds"], ", ".join(parts))

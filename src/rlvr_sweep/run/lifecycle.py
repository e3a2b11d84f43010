"""One run, top to bottom: check, lock, load, resume, read out, train, read out, keep the model, seal.

`run(cfg)` is the whole life of a run folder. Everything that can be checked is checked before
anything is written (`plan`: the settings, the data files and benchmark names, where the model comes
from, prompts that fit the model's context), and the run's identity names its folder; then the run
takes its folder's lock (one writer per run), loads the model, resumes from its checkpoint (or, during
its base read-out, from the benchmarks already graded) or starts over, and logs to `logs/run.log` and
the configured experiment loggers. A
training run (`task=train`) reads out the base policy, trains (`train.train_loop`), keeps the final
policy as `model/` and reads it out; `task=evaluate` only reads out `model.path` (phase `eval`). The
folder is sealed with a manifest before its `DONE` marker. A run that fails records its failure in
run.json, after freeing what it can (its temporary files: on a full disk, they are what fills it).
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import logging
import shutil
import tempfile
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from rlvr_sweep import data, evaluation, store
from rlvr_sweep.config import Config, LoggerConfig, paper_arm, scaled_length
from rlvr_sweep.plugins import PluginCodeChanged, compiled_now, plugin_frame, unrecorded_code
from rlvr_sweep.plugins.kept import keep_code
from rlvr_sweep.policy import load_policy
from rlvr_sweep.policy.loading import checkpoint_activations
from rlvr_sweep.policy.adapter import ADAPTER, AdapterOff, adapter_record
from rlvr_sweep.policy.adapter import MARK as ADAPTER_MARK
from rlvr_sweep.reward import get_grader, grading
from rlvr_sweep.rollout import static_engine, vllm_engine
from rlvr_sweep.run import checkpoint, folder, ranks, readouts, train
from rlvr_sweep.run.disk import full_disk
from rlvr_sweep.run.keep import save_adapter_folder, save_model_folder
from rlvr_sweep.run.memory import needs_reference, size_words
from rlvr_sweep.run.plan import Plan, data_canonical, plan
from rlvr_sweep.run.loggers import check_loggers, open_loggers
from rlvr_sweep.run.progress import Progress
from rlvr_sweep.store import beacon
from rlvr_sweep.store.identity import changed_inputs, model_digest
from rlvr_sweep.update import TailAverage, make_adamw

log = logging.getLogger(__name__)
LOGS = "logs"
MODEL = "model"


def run(cfg: Config) -> dict:
    """Train and evaluate one run (or read out one checkpoint); a finished run folder is skipped.
    Returns the run summary (run.json)."""
    check_loggers(cfg.logger)
    return run_plan(plan(cfg))


def run_plan(p: Plan, lead_dir: Path | None = None) -> dict:
    """Run the plan. Over several ranks (`run.ranks`) rank 0 runs it as one process would; another rank follows it
    in a scratch folder of its own (`lead_dir`: the leader's run folder, which it reads only)."""
    w = ranks.world()
    if w.size > 1 and lead_dir is None:
        refused = ranks.refusals(p.cfg, w)
        if refused:
            raise ranks.RanksError("; ".join(refused))
        ranks.start(w, p.cfg.model.device)
        if not w.lead:
            return _follow(p, w)
    cfg, run_dir, identity = p.cfg, p.run_dir, p.identity
    if store.is_finished(run_dir):
        return folder.skip_finished(run_dir)
    with store.run_lock(run_dir, wait=cfg.run.wait_for_lock):
        if store.is_finished(run_dir):  # finished by the process this one waited for
            return folder.skip_finished(run_dir)
        if cfg.train.num_threads:
            torch.set_num_threads(cfg.train.num_threads)
        hf_logging.disable_progress_bar()  # the run reports its own progress
        policy = load_policy(cfg.model, p.model_folder, lora=cfg.lora, seed=cfg.seed)
        if not gc.isenabled():  # the command line's startup (`sweep.cli.main`): what it made is never scanned again
            gc.freeze()
            gc.enable()
        if w.size > 1:
            ranks.shard(policy.model)
        if lead_dir is None:
            resume = folder.resume_or_start(cfg, run_dir, identity)
            ranks.barrier()  # the leader's folder is ready: a follower may read what it resumes from
        else:
            ranks.barrier()
            resume = folder.resume_as(cfg, lead_dir, run_dir, identity)
        resumed_at = resume["progress"]["step"] if resume and not resume.get("from_grades") else None
        with _run_log(run_dir / LOGS / "run.log"), beacon.beacon_for(run_dir, phase="starting",
                                                                     checkpoint_step=resumed_at) as signal:
            info = _run_info(cfg, run_dir, policy, resume, identity)
            if p.memory is not None:  # the preflight's estimate, beside the measured peak (CUDA) at the end
                info["memory"] = {"estimate": p.memory.record()}
                log.info("memory: %s", p.memory.words())
            loggers = None
            try:
                missed = keep_code(run_dir, identity.inputs.get("plugins"))  # checkable after an edit
                if missed:
                    info["plugin_code_not_kept"] = missed
                    log.warning("plugin files not kept beside the run (changed since they were recorded): %s", missed)
                store.atomic_write_json(run_dir / store.RUN_JSON, info)
                log.info("run %s -> %s", cfg.arm, run_dir)
                _name_earlier_inputs(run_dir, identity)
                loggers = open_loggers(cfg.logger if lead_dir is None else LoggerConfig(), run_dir / LOGS, resume["progress"].get("step") if resume else None,
                                       run_id=f"{cfg.arm}-{identity.run}-s{cfg.seed}", name=run_dir.name)
                if not resume:
                    loggers.log_config(store.config_dict(cfg))
                body = _evaluate_checkpoint if cfg.task == "evaluate" else _train_and_evaluate
                compiled = compiled_now()
                info.update(body(cfg, policy, p.train_rows, p.eval_sets, run_dir, resume, loggers, identity))
                unrecorded = unrecorded_code(identity.inputs.get("plugins"), compiled)
                if unrecorded:  # its results would be credited to code that did not produce them
                    raise PluginCodeChanged("the plugin code that ran is not the code the run's identity holds: "
                                            + "; ".join(unrecorded))
                info["status"] = "finished"
            except BaseException as err:
                store.remove_temp_files(run_dir)  # free what can be freed first: on a full disk it is these
                full = full_disk(run_dir, err)
                info.update(status="failed", error=str(full) if full else repr(err), traceback=traceback.format_exc())
                frame = plugin_frame(err.__traceback__)
                if frame is not None:  # raised in a researcher's own code: say where
                    info["error_in"] = f"plugin {frame}"
                if full:
                    raise full from err
                raise
            finally:
                measured = peak_measured(policy.device)
                if measured is not None:
                    info.setdefault("memory", {})["measured_peak"] = measured
                info["finished_at"] = time.time()
                info["wall_seconds"] = info["finished_at"] - info["started_at"]
                store.atomic_write_json(run_dir / store.RUN_JSON, info)
                if loggers is not None:
                    loggers.close()
                static_engine.release(policy.model)  # the fast engines' caches and graphs
                vllm_engine.release(policy.model)
            signal.remove()  # a sealed folder holds no progress file
            store.finish(run_dir)
            folder.tidy(run_dir)
            _log_summary(info)
    return info


def _follow(p: Plan, w) -> dict:
    """A rank other than 0: the leader's steps in a scratch folder of its own, removed after (`run.ranks`)."""
    if store.is_finished(p.run_dir):
        return {**store.read_run_json(p.run_dir), "skipped": True}
    scratch = Path(tempfile.mkdtemp(prefix=f"rlvr_sweep-rank{w.rank}-")) / p.run_dir.name
    try:
        return run_plan(dataclasses.replace(p, run_dir=scratch), lead_dir=p.run_dir)
    finally:
        shutil.rmtree(scratch.parent, ignore_errors=True)


def peak_measured(device: torch.device) -> int | None:
    """The most memory torch's allocator held on a CUDA device during the run (None elsewhere: the CPU's allocator
    keeps no such count; `bench/memory_estimate.py` measures the estimate's terms there)."""
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def _name_earlier_inputs(run_dir: Path, identity) -> None:
    """Say so when a finished run beside this one has the same settings but read other inputs (changed
    data rows or model files): this is a new run, not that one resumed."""
    for sibling in sorted(run_dir.parent.glob(f"{run_dir.name.rsplit('_', 1)[0]}_*")):
        if sibling == run_dir or not store.is_finished(sibling):
            continue
        try:
            other = store.read_run_json(sibling)
        except (OSError, ValueError):
            continue
        if other.get("settings_hash") == identity.settings:
            changed = changed_inputs(other.get("inputs") or {}, identity.inputs)
            log.warning("%s has the same settings but read other inputs (%s changed): this is a new run, %s",
                        sibling.name, ", ".join(changed), run_dir.name)


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


def _run_info(cfg: Config, run_dir, policy, resume, identity) -> dict:
    scale = cfg.profile.length_scale
    info = {**identity.record(),
        "status": "running", "task": cfg.task, "arm": cfg.arm, "paper_arm": paper_arm(cfg), "seed": cfg.seed,
        "horizon": cfg.horizon.tokens, "profile": cfg.profile.name, "length_scale": scale,
        "rollout_cap": scaled_length(cfg.horizon.tokens, scale),
        "readout_cap": scaled_length(cfg.eval.max_new_tokens, scale),
        "optimizer_step": cfg.optimizer_step.name, "accumulate_questions": cfg.train.accumulate_questions,
        "objective_passes": cfg.objective.passes,  # verify's backward-token law counts each pass
        "run_dir": str(run_dir.resolve()), "model_source": policy.source,
        "model_digest": identity.inputs["model"]["sha256"], "data_canonical": data_canonical(identity.inputs),
        "started_at": time.time(), "code": store.code_version(),
        "params": _model_size(policy),  # P of the FLOP proxies
    }
    if policy.adapter:
        info["adapter"] = adapter_record(policy.model)
    if ranks.world().size > 1:
        info["world_size"] = ranks.world().size  # FSDP2 over the ranks (`run.ranks`): not part of the identity  # what trains: its parameter count, layers and peft config
    plugin_lengths = _plugin_lengths(cfg)
    if plugin_lengths:
        info["plugin_lengths"] = plugin_lengths  # beside rollout_cap and readout_cap: what the run used
    if resume and cfg.task == "train" and not resume.get("from_grades"):
        info["resumed_from_step"] = resume["progress"]["step"]
    if cfg.task == "evaluate":
        info["eval_name"] = cfg.eval.name
        of = store.checkpoint_of(cfg.model.path)
        if of:
            info["readout_of"] = of  # the run whose checkpoint this reads out (shown by its summary)
    return info


def _model_size(policy) -> int:
    """P, the parameters a token's forward pass multiplies: those trained (every one, in full fine-tuning); an
    adapter run's base model (its adapter's are in run.json's `adapter`)."""
    if policy.adapter:
        return sum(p.numel() for name, p in policy.model.named_parameters() if ADAPTER_MARK not in name)
    return sum(p.numel() for p in policy.model.parameters() if p.requires_grad)


def _plugin_lengths(cfg: Config) -> dict:
    """{"<group>.params.<name>": its value in this profile's tokens} of each length parameter (`param(...,
    length=True)`) of the run's chosen options, as the option was bound with it."""
    from rlvr_sweep.config.options import REGISTRIES

    out = {}
    for registry in REGISTRIES:
        group = getattr(cfg, registry.group, None)
        name = getattr(group, registry.key, None) if group is not None else None
        if not isinstance(name, str) or name not in registry:
            continue
        given = getattr(group, "params", None) or {}
        for key, declared in registry[name].params.items():
            value = given.get(key, declared.default)
            if declared.length and isinstance(value, int):
                out[f"{registry.group}.params.{key}"] = scaled_length(value, cfg.profile.length_scale)
    return out


# ---------------------------------------------------------------------------------------------
# what a run does


def _read_out(cfg: Config, policy, eval_sets: dict, phase: str, grade, progress, run_dir, keys: dict,
              loggers, step: int) -> None:
    """Read out every benchmark not yet read out in `phase`, writing the grades table after each
    (`progress`: the run's state, its `grades` and `accuracy`)."""
    done = {(g["phase"], g["benchmark"]) for g in progress.grades}
    for name, rows in eval_sets.items():
        if (phase, name) in done:
            continue
        bar = Progress(len(rows), f"read-out {phase} {name}", "item")
        graded = readouts.read_out(cfg, policy, rows, benchmark=name, phase=phase, grade=grade,
                                   on_batch=lambda items, tokens: bar.update(items, tokens))
        bar.close()
        progress.grades.extend(graded)
        store.write_table(run_dir, "grades", progress.grades, keys)
    for name in eval_sets:
        accuracy = _accuracy_by_source(name, [g for g in progress.grades if (g["phase"], g["benchmark"]) == (phase, name)])
        progress.accuracy.setdefault(phase, {}).update(accuracy)
        loggers.log_accuracy(step, phase, accuracy)
        log.info("%s %s: %s", phase, name, ", ".join(f"{k} {v:.3f}" for k, v in accuracy.items()))


def _evaluate_checkpoint(cfg: Config, policy, train_rows, eval_sets, run_dir, resume, loggers, identity) -> dict:
    """task=evaluate: read out the checkpoint in `model.path` on every benchmark (phase `eval`)."""
    grader_before = grading.stats()
    state = train.TrainState(run_hash=identity.run, grades=resume["progress"]["grades"] if resume else [])
    _read_out(cfg, policy, eval_sets, "eval", get_grader(cfg.grader.name), state, run_dir,
              store.run_keys(cfg, identity.run), loggers, step=0)
    return {"eval_max_new_tokens": scaled_length(cfg.eval.max_new_tokens, cfg.profile.length_scale),
            "accuracy": state.accuracy,
            "grader": {k: v - grader_before.get(k, 0) for k, v in grading.stats().items()}}


def _train_and_evaluate(cfg: Config, policy, train_rows, eval_sets, run_dir, resume, loggers, identity) -> dict:
    grader_before = grading.stats()
    if cfg.train.activation_checkpointing:
        checkpoint_activations(policy.model)
    grading.warm_up()  # start the sympy workers now, not inside the first timed step
    torch.manual_seed(cfg.seed)
    t = cfg.train
    params = [p for p in policy.model.parameters() if p.requires_grad]
    reference = None
    if needs_reference(cfg.objective) and policy.adapter:  # the base alone: the initial policy, B = 0
        reference = AdapterOff(policy.model)
        log.info("the KL reference is the base model with the adapter switched off (no copy of the weights)")
    elif needs_reference(cfg.objective):  # the initial weights: copied before a resume restores any
        reference = frozen_copy(policy.model)
        size = sum(p.numel() * p.element_size() for p in reference.parameters())
        log.info("keeping a frozen copy of the initial weights as the KL reference: %s", size_words(size))
    optimizer = make_adamw(params, t.lr, t.betas, t.adam_eps, t.weight_decay)
    generator = torch.Generator(device=policy.device).manual_seed(cfg.seed)
    tail = TailAverage(params, *t.tail_average) if t.tail_average else None
    state = train.TrainState(run_hash=identity.run)
    if resume and resume.get("from_grades"):  # killed during the base read-out, before any checkpoint
        state.grades = resume["progress"]["grades"]
    elif resume:
        state.load_state_dict(checkpoint.restore(resume, model=policy.model, optimizer=optimizer,
                                                 generator=generator, tail=tail))
        log.info("resuming from step %d", state.step)
    lengths = train.scaled_lengths(cfg)
    grade = get_grader(cfg.grader.name)
    keys = store.run_keys(cfg, identity.run)

    def save(state: train.TrainState) -> None:
        checkpoint.save(run_dir, model=policy.model, optimizer=optimizer, generator=generator, tail=tail,
                        progress=state.state_dict())
        if beacon.current():
            beacon.current().update(checkpoint_step=state.step)  # what a relaunch after a kill resumes from

    if cfg.eval.before and not state.base_done:
        _read_out(cfg, policy, eval_sets, "base", grade, state, run_dir, keys, loggers, step=0)
        state.base_done = True
        save(state)
    trainer = train.make_trainer(cfg, policy, params, optimizer, train_rows, generator, tail, grade,
                                 write=lambda s: train.write_ledger(run_dir, s, keys), save=save, loggers=loggers,
                                 start_step=state.step, reference=reference, peers=ranks.world())
    train.train_loop(trainer, state)
    if tail:
        tail.load_into(params)
    saved = None
    if t.save_model:
        if policy.adapter:
            save_adapter_folder(policy, run_dir / ADAPTER)
        save_model_folder(policy, run_dir / MODEL)
        if (run_dir / MODEL).is_dir():  # a follower rank keeps none
            saved = model_digest(run_dir / MODEL)["sha256"]  # a read-out of these weights is this run's
    if cfg.eval.after:
        _read_out(cfg, policy, eval_sets, "trained", grade, state, run_dir, keys, loggers, step=state.step)
    return {
        "horizon_tokens": lengths["horizon"], "gate_chars": lengths["gate"],
        "overlong_penalty": cfg.reward.overlong_penalty if lengths["overlong_buffer"] else None,
        "eval_max_new_tokens": scaled_length(cfg.eval.max_new_tokens, cfg.profile.length_scale),
        "lengths": lengths, "accuracy": state.accuracy, "totals": train.totals(state.steps),
        "tail_average_steps": tail.count if tail else None, "model_dir": MODEL if t.save_model else None,
        **({"adapter_dir": ADAPTER if t.save_model else None} if policy.adapter else {}),
        "saved_model_digest": saved,
        "grader": {k: v - grader_before.get(k, 0) for k, v in grading.stats().items()},  # this run's timeouts etc.
    }


def frozen_copy(model):
    """The run's initial weights, frozen: the reference policy of a KL term (as much memory again as the weights;
    over several ranks, their share of it)."""
    if ranks.is_sharded(model):
        return ranks.sharded_copy(model)
    reference = copy.deepcopy(model)
    reference.requires_grad_(False)
    return reference.eval()


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

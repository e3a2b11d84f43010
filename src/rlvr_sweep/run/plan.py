"""What a run will compute from, and so which run it is, worked out before anything is written.

`plan(cfg)` checks the settings (`config.check_config`; then `run.choices`: each named choice against
its registry and each setting against the options that read it), reads the data (the training rows the run uses, every benchmark's
rows), finds the model folder (`model.path`, or the hub cache's snapshot of `model.hub_id`), refuses
a prompt longer than the model's context (naming the file and line) and a run whose estimated peak memory is more
than its device holds (`run.memory_plan`), digests the inputs and names the run folder from the identity
(`store.identity`). `run(cfg)` runs the plan; `status`, the sweep
preflight and the tests call `plan` to find a command's run folder without running it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from rlvr_sweep import data, store
from rlvr_sweep.config import Config, check_config
from rlvr_sweep.plugins import chosen_plugins, code_record, environment_plugins, resolve_plugins
from rlvr_sweep.data.canonical import is_canonical
from rlvr_sweep.policy import ModelLoadError, resolve_model_folder
from rlvr_sweep.policy.architecture import EXPECTED, check_architecture
from rlvr_sweep.run import memory_plan, ranks
from rlvr_sweep.store.identity import Identity, identify, model_digest, rows_digest
from rlvr_sweep.store.manifest import CHECKPOINT

log = logging.getLogger(__name__)


@dataclass
class Plan:
    cfg: Config
    train_rows: list[dict]
    eval_sets: dict[str, list[dict]]  # benchmark -> rows, in read-out order
    model_folder: Path
    identity: Identity
    run_dir: Path
    memory: object = None  # the estimated peak (`memory_plan.Estimate`), once `plan` has checked it fits


def plan(cfg: Config, shards: int | None = None, located: Plan | None = None) -> Plan:
    """`shards`: the ranks the run's policy will be sharded over (`run.ranks`); None: this process's world.
    `located`: what `locate(cfg)` already gave for this `cfg` (not read and digested again)."""
    check_config(cfg)
    from rlvr_sweep.run.choices import check_choices  # the registries: torch

    check_choices(cfg)  # every named choice against its registry, every setting against what reads it
    located = located if located is not None and located.cfg is cfg else locate(cfg)
    context_problems(cfg, located.model_folder, located.train_rows, located.eval_sets)
    located.memory = memory_plan.estimate(cfg, located.model_folder, located.train_rows, located.eval_sets,
                                          shards=shards or ranks.world().size)
    memory_plan.check_fits(cfg, located.memory)  # a run that cannot fit its device is refused before anything
    return located


def locate(cfg: Config) -> Plan:
    """What the run computes from and where it lives: the settings checked, the data rows read, the
    model folder found and its architecture checked, the identity and the run folder. Imports neither
    torch nor transformers, so a relaunch sees that a run is finished in well under a second
    (`finished_as_left`); `plan` adds the check of every choice and of the prompts' lengths."""
    check_config(cfg)
    if cfg.plugins or environment_plugins():  # a researcher's own options: imported (with the registries: torch)
        from rlvr_sweep.run.choices import check_choices  # the registries: torch

        check_choices(resolve_plugins(cfg))  # what the plugins' code will be asked to do, checked first
    train_rows = data.training_rows(cfg.data) if cfg.task == "train" else []
    eval_sets = {b: data.benchmark_rows(b, cfg.data, cfg.eval.limit) for b in cfg.eval.benchmarks}
    folder = resolve_model_folder(cfg.model)  # a missing folder or unreachable hub fails here, in seconds
    check_model_folder(cfg, folder)
    identity = identify(cfg, inputs_of(cfg, folder, train_rows, eval_sets))
    return Plan(cfg, train_rows, eval_sets, folder, identity, store.run_dir_for(cfg, identity.run))


def finished_as_left(run_dir: Path) -> dict | None:
    """A finished run's run.json (with `skipped`) when nothing is left to tidy in its folder (no
    checkpoint or temporary file a kill left after DONE: `run_plan` removes those); else None."""
    if not store.is_finished(run_dir) or (run_dir / CHECKPOINT).exists() or any(run_dir.glob(".*.tmp-*")):
        return None
    log.info("skipping finished run %s", run_dir)
    return {**store.read_run_json(run_dir), "skipped": True}


def check_model_folder(cfg: Config, folder: Path) -> None:
    """A model whose name has an expected architecture (`policy.architecture.EXPECTED`: the paper's
    Qwen3-0.6B-Base) must find it in its folder, and `model.engine=static` (Qwen3's decode step) a Qwen3
    model: checked from the files, before anything is loaded."""
    if cfg.model.engine == "static":
        try:
            model_type = json.loads((folder / "config.json").read_text()).get("model_type")
        except (OSError, ValueError, AttributeError):
            model_type = None
        if model_type is not None and model_type != "qwen3":
            raise ModelLoadError(f"model.engine=static decodes Qwen3 models only (its step is Qwen3's decoder layer); "
                                 f"{folder} holds model_type {model_type!r}: use model.engine=reference, or auto "
                                 "(which picks the engine that can decode it)")
    expected = EXPECTED.get(cfg.model.name)
    if expected is None:
        return
    problems = check_architecture(folder, expected)
    if problems:
        raise ModelLoadError(f"model {cfg.model.name} ({cfg.model.path or cfg.model.hub_id}): {folder} does not hold "
                             f"{expected.hub_id}: {'; '.join(problems)} (another model: set model=... or model.name)")


def inputs_of(cfg: Config, folder: Path, train_rows: list[dict], eval_sets: dict) -> dict:
    """{input name: its digest and what it was}: "train", "benchmark/<name>", "model" and, for a run that
    loads plugins, "plugins" (their source files' digests, `plugins.code_record`; `readouts`: whether
    a plugin option decides how the run reads out, so its base read-out computed from the plugins too)."""
    def where(files) -> dict:
        """The files and, for each the study has a canonical version of, whether it is that version
        (`data.canonical`; a data set of one's own has none)."""
        known = {str(f): is_canonical(f) for f in files}
        return {"files": [str(f) for f in files], "canonical": {f: v for f, v in known.items() if v is not None}}

    inputs = {}
    if cfg.task == "train":
        file = data.training_file(cfg.data)
        inputs["train"] = {"sha256": rows_digest(train_rows), "rows": len(train_rows), "data": cfg.data.name,
                           **where([file] if file else [])}
    for name, rows in eval_sets.items():
        inputs[f"benchmark/{name}"] = {"sha256": rows_digest(rows), "rows": len(rows),
                                       **where(data.benchmark_files(name, cfg.data))}
    inputs["model"] = {**model_digest(folder), "source": cfg.model.path or cfg.model.hub_id, "folder": str(folder)}
    code = code_record(cfg.plugins)
    if code is not None:
        used = {key: option.name for key, option in chosen_plugins(cfg).items()}
        inputs["plugins"] = {**code, "options": used, "readouts": _plugin_readouts(cfg)}
    return inputs


def _plugin_readouts(cfg: Config) -> bool:
    """Whether a plugin's option takes part in the read-outs (the read-out, its schedule, the engine, the
    task of a benchmark read out)."""
    return any(key in ("eval.name", "eval.schedule", "model.engine") or key.startswith("eval.benchmarks.")
               for key in chosen_plugins(cfg))


def data_canonical(inputs: dict) -> bool | None:
    """True when every data file the run read is the study's canonical file, False when one is not,
    None when it read none that has a canonical version (the toy task, a data set of one's own)."""
    verdicts = [v for part in inputs.values() for v in (part.get("canonical") or {}).values()]
    return all(verdicts) if verdicts else None


MAX_TOKEN_BYTES = 256  # no BPE vocabulary of ours has a longer token (Qwen3's longest is 128 bytes)


def context_problems(cfg: Config, folder: Path, train_rows: list[dict], eval_sets: dict) -> None:
    """Refuse a prompt longer than the model's context (`max_position_embeddings`), naming its file and
    line. A byte-level BPE token holds at least one byte, so a rendered prompt of at most `context`
    bytes fits without tokenizing; one of more than `context * MAX_TOKEN_BYTES` bytes cannot fit and is
    refused before any tokenizer sees it (a tokenizer given 30 MB of text exhausts memory); the few in
    between are tokenized with the model's own tokenizer."""
    context = _context_length(folder)
    if context is None:
        return
    task = data.task_of(cfg.data.name)
    parts = [("training row", train_rows, [data.training_file(cfg.data)], task)] if train_rows else []
    parts += [(f"{name} item", rows, data.benchmark_files(name, cfg.data), data.benchmark_task(name))
              for name, rows in eval_sets.items()]
    tokenizer = None
    for what, rows, files, task in parts:
        for row in rows:
            size = len(task.render(row["problem"]).encode())
            if size <= context:
                continue
            if size > context * MAX_TOKEN_BYTES:
                raise data.DataError(_too_long(what, row, files, f"{size:,} bytes", context))
            if tokenizer is None:
                from transformers import AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(folder)
            length = len(data.encode_prompts(tokenizer, [row["problem"]], task.prompt)[0])
            if length > context:
                raise data.DataError(_too_long(what, row, files, f"{length:,} tokens", context))


def _too_long(what: str, row: dict, files: list, size: str, context: int) -> str:
    where = next((f"{f}:{n}" for f in files if f for n in [_line_of(f, row)] if n), None)
    return (f"{where or what}: {what} {row.get('id')!r}: the prompt is {size}, longer than the model's "
            f"context of {context:,} tokens (max_position_embeddings); remove or shorten that row")


def _line_of(path: Path, row: dict) -> int | None:
    """The line of `path` that holds `row`'s problem (only looked up to name a refused row)."""
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if line.strip() and json.loads(line).get("problem") == row["problem"]:
                    return number
    except (OSError, ValueError):
        return None
    return None


def _context_length(folder: Path) -> int | None:
    try:
        value = json.loads((folder / "config.json").read_text()).get("max_position_embeddings")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value > 0 else None

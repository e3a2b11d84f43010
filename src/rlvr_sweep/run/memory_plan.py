"""A run's peak memory, estimated before it starts from its settings and its model folder's config (no weight is
read), and the refusal of a run that cannot fit its device.

The peak is what stays for the whole run plus the largest of three working sets:

- kept: the weights at `model.dtype` (an untied head counted once more); what trains, its gradients and AdamW's two
  moments at the trained parameters' dtype (all weights in full fine-tuning; a LoRA adapter's, in float32); a frozen
  copy of the weights for a KL reference (`run.memory.needs_reference`; none for an adapter run, whose reference is
  its base); the tail average's float32 copy of what trains.
- the training pass: one backward chunk (`train.backward_micro_batch` rollouts, or a question's group) of prompt +
  horizon tokens. Per token and layer the saved activations are b (4.5 H + 4 I + 3 Hq d + 3 Hkv d) + 4 (2.5 H + Hq d
  + Hkv d) bytes (b the weights' bytes; RMSNorm keeps float32 copies), fitted to what autograd saves in transformers'
  Qwen3 on torch 2.13 (`bench/memory_estimate.py` measures it); with `train.activation_checkpointing` only each
  layer's input stays, plus one layer's activations while it is recomputed. A LoRA layer adds its input in float32 and
  its rank-r output. The output head adds the logits at b bytes over the chunk and two float32 copies over its
  completion tokens (the log-softmax and its gradient).
- decoding: the KV cache of the largest batch a run decodes (the rollouts' K x B or G rows at prompt + horizon, or
  a read-out's `eval.batch_size` rows at prompt + the read-out cap), 2 Hkv d b bytes per token and layer, and the
  sampling's float32 logits.
- the optimizer step: torch's foreach AdamW makes two temporaries as large as the moments.

Prompt lengths are the longest rendered prompts' tokens by the model's own `tokenizer.json` (`tokenizers`, without
torch). The device's memory is `model.device_memory_gb` where set (a SLURM partition's GPUs), else a CUDA device's
own; on the CPU nothing is refused unless that setting is given. A run sharing its GPU with others
(`model.memory_share`) is checked against its share of that memory, the cap its allocator runs under.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from pathlib import Path

from rlvr_sweep.config import Config, ConfigError, scaled_length
from rlvr_sweep.run.memory import DTYPE_BYTES, needs_reference, parameter_count, size_words

LONGEST = 16  # prompts tokenized per data set: the longest by bytes
LORA_INPUTS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class DoesNotFit(ConfigError):
    """The run's estimated peak memory is more than its device holds; names the largest term and what would fit."""


@dataclass(frozen=True)
class Shape:
    hidden: int
    intermediate: int
    layers: int
    q_heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool

    @classmethod
    def of(cls, folder: Path) -> "Shape | None":
        try:
            c = json.loads((Path(folder) / "config.json").read_text())
            heads = c["num_attention_heads"]
            return cls(c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], heads,
                       c.get("num_key_value_heads") or heads, c.get("head_dim") or c["hidden_size"] // heads,
                       c["vocab_size"], bool(c.get("tie_word_embeddings", False)))
        except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
            return None

    def linear(self, name: str) -> tuple[int, int]:
        """(in, out) features of a decoder layer's linear layer."""
        h, q, kv, i = self.hidden, self.q_heads * self.head_dim, self.kv_heads * self.head_dim, self.intermediate
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h), "gate_proj": (h, i),
                "up_proj": (h, i), "down_proj": (i, h)}[name]


@dataclass(frozen=True)
class Estimate:
    kept: dict[str, int]  # term -> bytes held the whole run
    working: dict[str, int]  # phase -> its working set's bytes
    inputs: tuple = dataclasses.field(default=(), repr=False, compare=False)  # (shape, params, prompts) it came from

    @property
    def phase(self) -> str:
        return max(self.working, key=self.working.get)

    @property
    def peak(self) -> int:
        return sum(self.kept.values()) + self.working[self.phase]

    def largest(self) -> tuple[str, int]:
        terms = {**self.kept, self.phase: self.working[self.phase]}
        name = max(terms, key=terms.get)
        return name, terms[name]

    def words(self) -> str:
        """`about 21.3 GiB at the peak (the training pass): weights 1.40 GiB, gradients 1.40 GiB, ...`."""
        terms = {**{k: v for k, v in self.kept.items() if v}, self.phase: self.working[self.phase]}
        parts = ", ".join(f"{k} {size_words(v)}" for k, v in sorted(terms.items(), key=lambda kv: -kv[1]))
        return f"about {size_words(self.peak)} at the peak ({self.phase}): {parts}"

    def record(self) -> dict:
        return {"peak": self.peak, "phase": self.phase, "kept": dict(self.kept), "working": dict(self.working)}


def estimate(cfg: Config, folder: Path, train_rows: list[dict], eval_sets: dict, shards: int = 1) -> Estimate | None:
    """The run's peak memory on each of its `shards` ranks from its settings and model folder; None when the
    folder's config lacks a shape."""
    shape = Shape.of(folder)
    if shape is None:
        return None
    prompts = _prompt_tokens(cfg, folder, train_rows, eval_sets)
    try:
        params = parameter_count(folder)
    except Exception:  # noqa: BLE001  (an unreadable weights file fails where the run loads it, named there)
        params = None
    return estimate_for(cfg, shape, params, prompts, shards)


def estimate_for(cfg: Config, shape: Shape, params: int | None, prompts: dict[str, int], shards: int = 1) -> Estimate:
    """`estimate` from a shape, the folder's parameter count (None: from the shape), the longest prompt of
    training (`train`) and of the read-outs (`eval`), and the ranks the weights are sharded over (`run.ranks`:
    weights, gradients and moments divided among them, one decoder layer and the embedding and head gathered whole
    for a forward)."""
    b = DTYPE_BYTES[cfg.model.dtype]
    inputs = (shape, params, prompts, shards)
    if params is None:
        params = _shape_parameters(shape)
    if shape.tied and cfg.model.untie_embeddings:
        params += shape.vocab * shape.hidden
    lora = cfg.lora
    adapter = _adapter_parameters(shape, lora) if lora.enabled else 0
    trained, trained_bytes = (adapter, 4) if lora.enabled else (params, b)
    kept = {"weights": params * b + adapter * 4, "gradients": trained * trained_bytes,
            "AdamW moments": 2 * trained * trained_bytes,
            "KL reference copy": params * b if needs_reference(cfg.objective) and not lora.enabled else 0,
            "tail average": trained * 4 if cfg.train.tail_average else 0}
    if shards > 1:
        kept = {k: -(-v // shards) for k, v in kept.items()}
        s = shape
        layer = s.hidden * (2 * s.q_heads + 2 * s.kv_heads) * s.head_dim + 3 * s.hidden * s.intermediate
        kept["weights gathered for a forward"] = (layer + 2 * s.vocab * s.hidden) * b
    split = shards > 1 and cfg.train.rollout_seeding == "per_rollout"  # each rank decodes its share, weights whole
    working = {"the training pass": _training_pass(cfg, shape, prompts.get("train", 0), b, shards)
               if cfg.task == "train" else 0,
               "decoding": _decoding(cfg, shape, prompts, b, shards if split else 1) + (params * b if split else 0),
               "the optimizer step": 2 * trained * trained_bytes if cfg.task == "train" else 0}
    return Estimate(kept, working, inputs)


def _training_pass(cfg: Config, shape: Shape, prompt: int, b: int, shards: int = 1) -> int:
    s = shape
    rows = min(cfg.train.backward_micro_batch or 10**9, _rollout_rows(cfg, shards))
    completion = scaled_length(cfg.horizon.tokens, cfg.profile.length_scale)
    tokens, generated = rows * (prompt + completion), rows * completion
    qd, kvd = s.q_heads * s.head_dim, s.kv_heads * s.head_dim
    layer = b * (4.5 * s.hidden + 4 * s.intermediate + 3 * qd + 3 * kvd) + 4 * (2.5 * s.hidden + qd + kvd)
    if cfg.lora.enabled:
        layer += sum((s.linear(n)[0] * 4 * (b != 4)) + cfg.lora.rank * 4 for n in _lora_targets(cfg.lora))
    if cfg.train.activation_checkpointing:
        body = tokens * (s.layers * s.hidden * b + layer)
    else:
        body = tokens * s.layers * layer
    head = tokens * s.vocab * b + 2 * generated * s.vocab * 4
    return int(body + head)


def _decoding(cfg: Config, shape: Shape, prompts: dict[str, int], b: int, shards: int = 1) -> int:
    per_token = 2 * shape.layers * shape.kv_heads * shape.head_dim * b
    scale = cfg.profile.length_scale
    batches = []
    if cfg.task == "train":
        batches.append((_rollout_rows(cfg, shards), prompts.get("train", 0) + scaled_length(cfg.horizon.tokens, scale)))
    if cfg.eval.benchmarks and (cfg.task == "evaluate" or cfg.eval.before or cfg.eval.after):
        rows = cfg.eval.slots or cfg.eval.batch_size
        if cfg.eval.name == "sampled_k3":
            rows = max(rows, cfg.eval.draws)
        batches.append((rows, prompts.get("eval", 0) + scaled_length(cfg.eval.max_new_tokens, scale)))
    return max((rows * (length * per_token + shape.vocab * 4 * 2) for rows, length in batches), default=0)


def _rollout_rows(cfg: Config, shards: int = 1) -> int:
    """The rows a question's group decodes and trains at once: G, or a tree's K x B leaves; over several ranks, the
    largest rank's share (`rollout.seeding.share`)."""
    s = cfg.sampler
    rows = s.group_size if s.name == "flat" else max(s.group_size, s.K * s.B)
    if shards == 1:
        return rows
    from rlvr_sweep.rollout.seeding import share  # here: it brings torch, which a one-rank preflight never needs

    return len(share(rows, 0, shards, multiple=2))


def _lora_targets(lora) -> tuple[str, ...]:
    if list(lora.target_modules) == ["all-linear"]:
        return LORA_INPUTS
    return tuple(n for n in lora.target_modules if n in LORA_INPUTS)


def _adapter_parameters(shape: Shape, lora) -> int:
    return shape.layers * sum(lora.rank * sum(shape.linear(n)) for n in _lora_targets(lora))


def _shape_parameters(shape: Shape) -> int:
    s = shape
    layer = (s.hidden * (2 * s.q_heads + 2 * s.kv_heads) * s.head_dim + 3 * s.hidden * s.intermediate + 2 * s.hidden
             + 2 * s.head_dim)  # the q and k norms
    return s.layers * layer + s.vocab * s.hidden * (1 if s.tied else 2) + s.hidden


def _prompt_tokens(cfg: Config, folder: Path, train_rows: list[dict], eval_sets: dict) -> dict[str, int]:
    """The longest prompt of the training rows the run can draw (step s takes row s % rows) and of the read-outs, in
    the model's tokens."""
    from rlvr_sweep import data

    encode = _encoder(str(folder))
    out = {}
    task = data.task_of(cfg.data.name)
    drawn = cfg.train.max_steps if cfg.train.active_steps else cfg.train.steps
    parts = {"train": [(task, train_rows[:drawn])],
             "eval": [(data.benchmark_task(name), rows) for name, rows in eval_sets.items()]}
    for part, sets in parts.items():
        longest = 0
        for t, rows in sets:
            texts = sorted((t.render(r["problem"]) for r in rows), key=lambda x: -len(x.encode()))[:LONGEST]
            longest = max([longest, *(encode(x) for x in texts)])
        out[part] = longest
    return out


@functools.lru_cache(maxsize=8)
def _encoder(folder: str):
    """Token counts by the folder's tokenizer: its `tokenizer.json` through `tokenizers` (no torch), else
    transformers' own loading of it (vocab.json and merges.txt), else bytes (an upper bound for a byte-level BPE)."""
    try:
        from tokenizers import Tokenizer

        fast = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
        return lambda text: len(fast.encode(text, add_special_tokens=False).ids)
    except Exception:  # noqa: BLE001  (no fast tokenizer file)
        pass
    try:
        from transformers import AutoTokenizer

        slow = AutoTokenizer.from_pretrained(folder)
        return lambda text: len(slow(text, add_special_tokens=False)["input_ids"])
    except Exception:  # noqa: BLE001  (no tokenizer at all: the context check says so where it matters)
        return lambda text: len(text.encode())


def capacity(cfg: Config) -> tuple[int, str] | None:
    """(bytes, what) of the memory the run may take: its share (`model.memory_share`) of what its device holds,
    `model.device_memory_gb`, else a CUDA device's own; None where neither is known (the CPU without that setting)."""
    held = _device_capacity(cfg)
    share = cfg.model.memory_share
    if held is None or share is None:
        return held
    return int(held[0] * share), f"model.memory_share={share:g} of {held[1]}"


def _device_capacity(cfg: Config) -> tuple[int, str] | None:
    if cfg.model.device_memory_gb is not None:
        return int(cfg.model.device_memory_gb * 2**30), f"model.device_memory_gb={cfg.model.device_memory_gb:g}"
    import torch

    device = cfg.model.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return None
    index = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(index)
    return props.total_memory, f"cuda:{index} ({props.name})"


def check_fits(cfg: Config, est: Estimate | None) -> None:
    """Refuse a run whose estimate is more than its device holds, in one line: the estimate, the largest term, and
    the settings that would make it fit (each with its own estimate)."""
    if est is None:
        return
    held = capacity(cfg)
    if held is None or est.peak <= held[0]:
        return
    name, size = est.largest()
    fixes = [f"{what} (about {size_words(e.peak)})" for what, e in _alternatives(cfg, est, held[0]) if e.peak <= held[0]]
    raise DoesNotFit(f"this run needs {est.words()}, more than {held[1]} holds ({size_words(held[0])}); the largest "
                     f"term is {name} ({size_words(size)}); "
                     + (f"it would fit with {'; or '.join(fixes)}" if fixes else
                        "none of lora.rank=16, train.activation_checkpointing=true or train.backward_micro_batch=1 "
                        "makes it fit: use a device with more memory or a smaller model"))


def _alternatives(cfg: Config, est: Estimate, held: int):
    """(settings, their estimate) for each change that lowers the peak: an adapter, activation checkpointing, one
    rollout per backward chunk, all of them together, and the fewest ranks (2, 4 or 8) that hold the run sharded."""
    changes = []
    if not cfg.lora.enabled:
        changes.append(("lora.rank=16", "lora", {"rank": 16}))
    if not cfg.train.activation_checkpointing:
        changes.append(("train.activation_checkpointing=true", "train", {"activation_checkpointing": True}))
    if cfg.train.backward_micro_batch != 1:
        changes.append(("train.backward_micro_batch=1", "train", {"backward_micro_batch": 1}))
    if len(changes) > 1:
        changes.append((" and ".join(what for what, _, _ in changes), None, None))
    shape, params, prompts, shards = est.inputs
    sharded = []
    if shards == 1 and not cfg.lora.enabled:
        for n in (2, 4, 8):
            e = estimate_for(cfg, shape, params, prompts, n)
            if e.peak <= held:
                sharded = [(f"sharding over {n} ranks (torchrun --nproc-per-node {n}, or "
                            f"hydra.launcher.tasks_per_node={n})", e)]
                break

    def changed(section, values):
        if section is not None:
            return dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **values)})
        out = cfg
        for _, part, vals in changes[:-1]:
            out = dataclasses.replace(out, **{part: dataclasses.replace(getattr(out, part), **vals)})
        return out

    return [(what, estimate_for(changed(section, values), *est.inputs)) for what, section, values in changes] + sharded

"""One run over several processes: `torchrun --nproc-per-node N -m rlvr_sweep ...`, or N SLURM tasks of a job
(`hydra.launcher.tasks_per_node=N`, the rendezvous from submitit's own `TorchDistributedEnvironment`).

The policy's weights, gradients and AdamW state are sharded over the ranks with torch's FSDP2 (`fully_shard` on
each decoder layer and on the model), so the kept memory of `run.memory_plan` is divided by N.

The work is split where the result allows it:
- the backward: each rank backpropagates a contiguous share of each question's rollouts (`update.step.shared`,
  fork pairs kept whole) and FSDP2 sums the shares' gradients (a plain sum, not its default mean: a question's
  gradient is whole once its backward is done, so `train.unit_question_grad` scales it as one process does); a
  rank with fewer chunks runs zero-weight ones, as every chunk's forward and backward gather and reduce across the
  ranks.
  The loss, token counts, health signals and behaviour log-probs are the ranks' together (`World.exchange`).
- the decoding, with `train.rollout_seeding=per_rollout` (`rollout.seeding`): each rank decodes its share of each
  decoding call, every row from its own keyed generator, with the layers gathered whole for the call
  (`World.decoding`), and the ranks exchange the rows. With the baseline's one stream (`stream`, the default) a
  row's draws depend on every row before it, so every rank decodes the whole group from the same generator.
- the behaviour and KL-reference log-probs of a rank's rollouts are taken by that rank, in its backward's chunks
  (the two forwards then round alike: no KL before the policy moves, as on one process). The KL reference is a
  frozen copy sharded alike (`sharded_copy`).
- the rest (scoring, credit, the read-outs) is computed alike on every rank.

So the rollouts, rewards and credit do not depend on N (with per-rollout seeds: the same logits at any batch, as
float32 on the CPU gives; tests/run/test_ranks.py); the weights agree with a one-process run to rounding (the
gradient is summed in another order: the first update's loss and gradient norm to 1e-5, and Adam's sign-like
first steps can turn a rounding-level gradient element into an lr-sized step), and the world size is recorded in
run.json, not in the identity.

Rank 0 leads: it owns the run folder (lock, tables, checkpoints, the kept model) exactly as a one-process run does.
Every other rank follows in a scratch folder of its own, removed at the end: it runs the same steps (each
collective needs every rank), resumes from the leader's checkpoint, and keeps nothing.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass

from rlvr_sweep.config import ConfigError


class RanksError(ConfigError):
    """A setting a run over several ranks cannot take (yet); names it."""


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def lead(self) -> bool:
        return self.rank == 0

    def exchange(self, value) -> list:
        """Every rank's `value` (JSON: numbers, strings, lists, dicts), in rank order; every rank calls it."""
        if self.size == 1:
            return [value]
        import torch
        import torch.distributed as dist

        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
        mine = torch.frombuffer(bytearray(json.dumps(value).encode()), dtype=torch.uint8).to(device)
        sizes = [torch.zeros(1, dtype=torch.long, device=device) for _ in range(self.size)]
        dist.all_gather(sizes, torch.tensor([mine.numel()], device=device))
        longest = int(max(s.item() for s in sizes))
        padded = torch.zeros(longest, dtype=torch.uint8, device=device)
        padded[: mine.numel()] = mine
        every = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(self.size)]
        dist.all_gather(every, padded)
        return [json.loads(bytes(e[: int(n.item())].cpu().tolist())) for e, n in zip(every, sizes)]

    @contextmanager
    def decoding(self, model):
        """Each rank decodes its own rows with the whole model: every sharded layer is gathered once on entry
        (all ranks enter together) and kept whole until exit, so a rank's forwards need no other rank."""
        if not is_sharded(model):
            yield
            return
        from torch.distributed.fsdp import FSDPModule

        sharded = [m for m in model.modules() if isinstance(m, FSDPModule)]
        for m in sharded:
            m.set_reshard_after_forward(False, recurse=False)
            m.unshard()
        try:
            yield
        finally:
            for m in sharded:
                m.reshard()
                m.set_reshard_after_forward(m is not model, recurse=False)  # fully_shard's own: the root stays whole


def world() -> World:
    """This process's place: torchrun's RANK / WORLD_SIZE / LOCAL_RANK, else a SLURM job's tasks (exported the way
    submitit's `TorchDistributedEnvironment` does), else one process."""
    if "RANK" not in os.environ and int(os.environ.get("SLURM_NTASKS", "1")) > 1 and "SLURM_JOB_ID" in os.environ:
        from submitit.helpers import TorchDistributedEnvironment

        TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
    return World(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                 int(os.environ.get("LOCAL_RANK", 0)))


def start(w: World, device: str) -> None:
    """Join the ranks' process group (NCCL on CUDA, gloo on the CPU), once per process."""
    import torch
    import torch.distributed as dist

    if w.size == 1 or dist.is_initialized():
        return
    cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if cuda:
        torch.cuda.set_device(w.local_rank)
    dist.init_process_group("nccl" if cuda else "gloo", rank=w.rank, world_size=w.size)


def refusals(cfg, w: World) -> list[str]:
    """What a run over several ranks cannot take yet, one phrase each."""
    if w.size == 1:
        return []
    why = {"lora.rank": cfg.lora.enabled,
           f"model.engine={cfg.model.engine} (it reads unsharded weights; use reference or auto)":
               cfg.model.engine in ("static", "vllm")}
    return [f"{what} is not supported over {w.size} ranks yet" for what, refused in why.items() if refused]


def shard(model):
    """FSDP2 over the ranks: each decoder layer, then the model (its embedding, norm and head)."""
    from torch.distributed.fsdp import fully_shard

    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    # each rank backpropagates its share of the loss: the gradient is the ranks' sum (a plain SUM: gloo has no
    # pre-multiplied one)
    for module in (*model.model.layers, model):
        module.set_gradient_divide_factor(1.0)
        module.set_force_sum_reduction_for_comms(True)
    return model


def sharded_copy(model):
    """A frozen copy of a sharded model, sharded alike (FSDP2 modules cannot be deep-copied): built on the meta device,
    sharded, given memory, then each rank copies its own shards and the (whole) buffers: no collective, and never the
    whole weights on one rank."""
    import torch
    from transformers import AutoModelForCausalLM

    weights = next(model.parameters())
    with torch.device("meta"):
        copy = AutoModelForCausalLM.from_config(model.config, dtype=weights.dtype)
    shard(copy)
    copy.to_empty(device=weights.device)
    with torch.no_grad():
        for (name, mine), (_, theirs) in zip(copy.named_parameters(), model.named_parameters(), strict=True):
            mine.to_local().copy_(theirs.to_local())
        for mine, theirs in zip(copy.buffers(), model.buffers(), strict=True):
            mine.copy_(theirs)
    copy.requires_grad_(False)
    return copy.eval()


def is_sharded(model) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def barrier() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()


def full_model_state(model) -> dict:
    """The whole model's state, gathered onto rank 0's CPU (every rank must call it; the others get {})."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def full_optimizer_state(model, optimizer) -> dict:
    """AdamW's state, gathered onto rank 0's CPU, keyed by parameter name (every rank calls it)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def load_full_state(model, optimizer, model_state: dict, optimizer_state: dict) -> None:
    """A whole state (a checkpoint's) into a sharded or unsharded model and its AdamW: each rank keeps its share.
    `optimizer_state` keyed by parameter name, or by index as `optimizer.state_dict()` keys it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict, set_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True)
    set_model_state_dict(model, model_state, options=options)
    set_optimizer_state_dict(model, optimizer, by_name(model, optimizer_state), options=options)


def whole_tail(tail) -> dict:
    """The tail average's state with its sharded means gathered whole onto the CPU (every rank calls it)."""
    return {"mean": [m.full_tensor().cpu() for m in tail.mean], "count": tail.count}


def tail_in_shards(state: dict, tail) -> dict:
    """A whole tail-average state (a checkpoint's) as this rank's shards of the live means (no collective: every
    rank holds the whole state)."""
    from torch.distributed.tensor import distribute_tensor

    return {"mean": [distribute_tensor(whole.to(m.device), m.device_mesh, m.placements, src_data_rank=None)
                     for whole, m in zip(state["mean"], tail.mean, strict=True)], "count": state["count"]}


def by_name(model, state: dict) -> dict:
    """An optimizer state keyed by parameter index (`optimizer.state_dict()`, over the model's trained parameters
    in order) keyed by parameter name instead; a state keyed by name is returned as it is."""
    if not state.get("state") or all(isinstance(k, str) for k in state["state"]):
        if all(isinstance(p, str) for g in state.get("param_groups", []) for p in g["params"]):
            return state
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    return {"state": {names[i]: s for i, s in state["state"].items()},
            "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in state["param_groups"]]}

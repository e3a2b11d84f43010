"""Checkpoints that let a killed run resume where it stopped (preemption, time limit, kill -9).

One file, `checkpoint.pt` in the run folder, replaced atomically every `train.checkpoint_every`
steps (written, flushed to disk, then renamed; so there is never more than one to prune): model and
AdamW state (of an adapter run: the adapter's parameters and their AdamW state only), the sampling generator's and torch's global RNG states, the Polyak tail average, the
loop counters and the ledger rows so far. Restored on a CPU, a resumed run writes the same ledger as
an uninterrupted one.

Loading never unpickles arbitrary objects: `torch.load(weights_only=True)` accepts tensors and
plain data (dicts, lists, numbers, strings) only, so a replaced file cannot run code. A file that
does not load, or that another run wrote, raises `CheckpointError` naming the file.
"""

from __future__ import annotations

from pathlib import Path

import torch

from rlvr_sweep.io import atomic_write
from rlvr_sweep.policy.adapter import has_adapter, load_trained_state, trained_state
from rlvr_sweep.run import ranks
from rlvr_sweep.store.manifest import CHECKPOINT  # noqa: F401  (the file this module writes)


class CheckpointError(RuntimeError):
    """The checkpoint cannot be used (unreadable, not plain data, or another run's); names the file."""


def save(run_dir: Path, *, model, optimizer, generator: torch.Generator, tail, progress: dict) -> None:
    """Write the checkpoint. A model sharded over ranks (`run.ranks`) is gathered whole onto rank 0, which alone
    writes it, with AdamW's state keyed by parameter name; every rank must call this."""
    tail_state = tail.state() if tail else None
    if ranks.is_sharded(model):
        model_state, optimizer_state = ranks.full_model_state(model), ranks.full_optimizer_state(model, optimizer)
        tail_state = ranks.whole_tail(tail) if tail else None
        if not ranks.world().lead:
            return
    else:
        model_state = trained_state(model) if has_adapter(model) else model.state_dict()
        optimizer_state = optimizer.state_dict()
    payload = {
        "model": model_state, "optimizer": optimizer_state, "generator": generator.get_state(),
        "torch_rng": torch.get_rng_state(), "tail": tail_state, "progress": progress,
        "run_hash": progress["run_hash"],
    }
    atomic_write(Path(run_dir) / CHECKPOINT, lambda f: torch.save(payload, f))


def load(run_dir: Path, run_hash: str) -> dict | None:
    """The run folder's checkpoint (None if there is none); CheckpointError if it cannot be used."""
    path = Path(run_dir) / CHECKPOINT
    if not path.is_file():
        return None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated, empty, not a torch file, or objects beyond plain data
        first_line = (str(err).splitlines() or ["no detail"])[0][:200]
        raise CheckpointError(f"{path} cannot be loaded ({type(err).__name__}: {first_line})") from err
    if not isinstance(payload, dict) or payload.get("run_hash") != run_hash:
        found = payload.get("run_hash") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"{path} was written by another run ({found} != {run_hash})")
    return payload


def restore(payload: dict, *, model, optimizer, generator: torch.Generator, tail) -> dict:
    """Load the saved states into live objects; returns the saved progress. A model sharded over ranks takes its
    share of the whole state; a checkpoint written by sharded ranks (AdamW's state keyed by name) loads into one."""
    by_name = any(isinstance(k, str) for k in payload["optimizer"].get("state", {}))
    if ranks.is_sharded(model) or by_name:
        ranks.load_full_state(model, optimizer, payload["model"], payload["optimizer"])
    elif has_adapter(model):
        load_trained_state(model, payload["model"])
    else:
        model.load_state_dict(payload["model"])
    if not (ranks.is_sharded(model) or by_name):
        optimizer.load_state_dict(payload["optimizer"])
    generator.set_state(payload["generator"])
    torch.set_rng_state(payload["torch_rng"])
    if tail and payload["tail"]:
        tail.load_state(ranks.tail_in_shards(payload["tail"], tail) if ranks.is_sharded(model) else payload["tail"])
    return payload["progress"]


def remove(run_dir: Path) -> None:
    """Drop the checkpoint of a finished run (its results are complete)."""
    (Path(run_dir) / CHECKPOINT).unlink(missing_ok=True)

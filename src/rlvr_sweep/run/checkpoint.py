"""Checkpoints that let a killed run resume where it stopped (preemption, time limit, kill -9).

One file, `checkpoint.pt` in the run folder, replaced atomically every `train.checkpoint_every`
steps (so there is never more than one to prune): model and AdamW state, the sampling generator's
and torch's global RNG states, the Polyak tail average, the loop counters and the ledger rows so
far. Restored on a CPU, a resumed run writes the same ledger as an uninterrupted one.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

CHECKPOINT = "checkpoint.pt"


def save(run_dir: Path, *, model, optimizer, generator: torch.Generator, tail, progress: dict) -> None:
    payload = {
        "model": model.state_dict(), "optimizer": optimizer.state_dict(), "generator": generator.get_state(),
        "torch_rng": torch.get_rng_state(), "tail": tail.state() if tail else None, "progress": progress,
        "config_hash": progress["config_hash"],
    }
    path = Path(run_dir) / CHECKPOINT
    tmp = path.with_name(f".{CHECKPOINT}.tmp-{os.getpid()}")
    torch.save(payload, tmp)
    os.replace(tmp, path)


def load(run_dir: Path, config_hash: str) -> dict | None:
    """The run folder's checkpoint, if there is one written by this same config."""
    path = Path(run_dir) / CHECKPOINT
    if not path.is_file():
        return None
    payload = torch.load(path, map_location="cpu", weights_only=False)
    if payload.get("config_hash") != config_hash:
        raise RuntimeError(f"{path} was written by another config ({payload.get('config_hash')} != {config_hash})")
    return payload


def restore(payload: dict, *, model, optimizer, generator: torch.Generator, tail) -> dict:
    """Load the saved states into live objects; returns the saved progress."""
    model.load_state_dict(payload["model"])
    optimizer.load_state_dict(payload["optimizer"])
    generator.set_state(payload["generator"])
    torch.set_rng_state(payload["torch_rng"])
    if tail and payload["tail"]:
        tail.load_state(payload["tail"])
    return payload["progress"]


def remove(run_dir: Path) -> None:
    """Drop the checkpoint of a finished run (its results are complete)."""
    (Path(run_dir) / CHECKPOINT).unlink(missing_ok=True)

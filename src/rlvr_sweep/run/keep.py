"""What a finished training run keeps of its policy (`train.save_model`): `model/`, a `save_pretrained` folder that
`model.path=<run>/model` loads (a LoRA run's adapter merged into the base weights), and a LoRA run's `adapter/` as
peft saves one. Each is written beside its place and renamed into it whole; a model sharded over ranks is gathered
onto rank 0, which alone writes it.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from rlvr_sweep.policy.adapter import merged_state, save_adapter
from rlvr_sweep.run import ranks

log = logging.getLogger(__name__)


def save_model_folder(policy, folder: Path) -> None:
    """The final policy as a `save_pretrained` folder (weights, config, tokenizer; an adapter merged into the base
    weights), written beside and renamed into place whole; `model.path=<run>/model` loads it."""
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    if ranks.is_sharded(policy.model):  # gathered whole onto rank 0 (every rank takes part), which alone keeps it
        whole = {"state_dict": ranks.full_model_state(policy.model)}
        if not ranks.world().lead:
            return
    else:
        whole = {"state_dict": merged_state(policy.model)} if policy.adapter else {}
    policy.model.save_pretrained(tmp, safe_serialization=True, **whole)
    policy.tokenizer.save_pretrained(tmp)
    if folder.exists():  # a copy saved by this same unfinished run before it was killed
        shutil.rmtree(folder)
    tmp.rename(folder)
    log.info("saved the final policy to %s", folder)


def save_adapter_folder(policy, folder: Path) -> None:
    """An adapter run's adapter as peft saves one, written beside and renamed into place whole."""
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    save_adapter(policy.model, tmp, policy.source)
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)
    log.info("saved the adapter to %s", folder)

"""Run folders: where a run lives, what defines it, and how its files are written (DESIGN "Results").

A run folder is named from the run's identity, not the launch time:
`{out_root}/{profile}/{arm}/h{horizon}_s{seed}_{hash}` where `hash` is the run's identity: a short
digest of its settings (not the bookkeeping ones), the data rows it reads and the model it starts
from (`store.identity`). It holds `config.yaml`, the parquet tables, `run.json` and, last, the
`DONE` marker.
Every file is written atomically (temporary file, then rename), so a reader never sees half a
file; a folder without `DONE` is unfinished.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rlvr_sweep.io import atomic_write_bytes, atomic_write_json  # noqa: F401  (re-exported by store)
from rlvr_sweep.store import schema
from rlvr_sweep.store.manifest import MANIFEST, manifest_bytes
from rlvr_sweep.store.walk import STALE_MARK, is_stale  # noqa: F401  (is_stale: re-exported)

if TYPE_CHECKING:  # the writers below take a Config; the readers of run folders need no Hydra or OmegaConf
    from rlvr_sweep.config import Config

DONE_MARKER = "DONE"
RUN_JSON = "run.json"
RUN_KEYS = schema.RUN_KEYS


class UnfinishedRunError(RuntimeError):
    """A run folder exists without its done marker and the config says not to restart it."""


def config_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)


def run_dir_for(cfg: Config, run_hash: str) -> Path:
    """`{out_root}/{profile}/{arm}/h{horizon}_s{seed}_{run_hash}`; the horizon is in paper tokens (the
    rollouts of a profile with `length_scale` < 1 are shorter: see `rollout_cap` in every table). A
    read-out of a checkpoint (task=evaluate) goes to
    `{out_root}/{profile}/evaluate/{label}_{eval.name}_b{eval.batch_size}_s{seed}_{run_hash}`, `label` being
    the arm when one is set, else the checkpoint folder's name (its run's, for a `<run>/model` folder),
    so the read-outs of one checkpoint are told apart by name; a finished read-out made before the eval
    name and batch were in the name stays where it is (`{label}_s{seed}_{run_hash}`).
    `run.plan(cfg).run_dir` finds a command's folder."""
    if cfg.task == "evaluate":
        folder = Path(cfg.model.path or "checkpoint")
        label = cfg.arm if cfg.arm != "custom" else (folder.parent.name if folder.name == "model" else folder.name)
        home = Path(cfg.run.out_root) / cfg.profile.name / "evaluate"
        earlier = home / f"{label}_s{cfg.seed}_{run_hash}"
        if is_finished(earlier):
            return earlier
        return home / f"{label}_{cfg.eval.name}_b{cfg.eval.batch_size}_s{cfg.seed}_{run_hash}"
    return Path(cfg.run.out_root) / cfg.profile.name / cfg.arm / f"h{cfg.horizon.tokens}_s{cfg.seed}_{run_hash}"


def checkpoint_of(model_path) -> dict | None:
    """For a read-out of a run's saved model (`<run>/model`): that run's arm, paper arm, horizon, seed and
    hash (from its run.json), which the read-out's summary shows; None for any other folder."""
    if not model_path:
        return None
    folder = Path(str(model_path))
    if folder.name != "model" or not (folder.parent / RUN_JSON).is_file():
        return None
    try:
        info = read_run_json(folder.parent)
    except (OSError, ValueError):
        return None
    return {k: info.get(k) for k in ("arm", "paper_arm", "horizon", "seed", "run_hash", "profile")}


def is_finished(run_dir: Path) -> bool:
    return (run_dir / DONE_MARKER).is_file()


def read_run_json(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / RUN_JSON).read_text())


def prepare_run_dir(cfg: Config, run_dir: Path, why: str = "holds an unfinished run") -> Path | None:
    """Create the folder for a new run (the caller holds the run's lock). An unfinished folder is moved
    aside (returned), never reused or deleted; with `run.on_unfinished=error` it stops the run instead."""
    from omegaconf import OmegaConf

    moved = None
    if run_dir.exists():
        if cfg.run.on_unfinished == "error":
            raise UnfinishedRunError(f"{run_dir} {why}; move it away or rerun with run.on_unfinished=restart")
        moved = stale_name(run_dir)
        run_dir.rename(moved)
    run_dir.mkdir(parents=True)
    atomic_write_bytes(run_dir / "config.yaml", OmegaConf.to_yaml(OmegaConf.structured(cfg)).encode())
    return moved


def stale_name(run_dir: Path) -> Path:
    """A free `<name>.stale-<time>-<pid>[-n]` beside the folder (never an existing one)."""
    base = f"{run_dir.name}{STALE_MARK}{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    candidate, n = run_dir.with_name(base), 1
    while candidate.exists():
        candidate, n = run_dir.with_name(f"{base}-{n}"), n + 1
    return candidate


def remove_temp_files(run_dir: Path) -> list[Path]:
    """Delete the `.<name>.tmp-<pid>` files and folders a killed writer left (never results: those
    are renamed into place whole). Returns what was removed."""
    removed = sorted(Path(run_dir).glob(".*.tmp-*"))
    for p in removed:
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return removed


def finish(run_dir: Path) -> None:
    """Seal a run: its manifest (every file's size and sha256), then the `DONE` marker."""
    atomic_write_bytes(run_dir / MANIFEST, manifest_bytes(run_dir))
    mark_done(run_dir)


def mark_done(run_dir: Path) -> None:
    atomic_write_bytes(run_dir / DONE_MARKER, b"")


def code_version() -> dict:
    """The git commit of the code that ran, and whether tracked files had uncommitted changes (an
    untracked file, such as a data folder, does not make the code dirty)."""
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    if commit.returncode != 0:
        return {"commit": None, "dirty": None}
    return {"commit": commit.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def run_keys(cfg: Config, run_hash: str) -> dict:
    """The columns every table of the run carries: its identity, the paper arm it reproduces, and the
    lengths it actually used in this profile's tokens (`horizon` is in paper tokens)."""
    from rlvr_sweep.config import paper_arm, scaled_length

    scale = cfg.profile.length_scale
    return {"arm": cfg.arm, "horizon": cfg.horizon.tokens, "seed": cfg.seed, "run_hash": run_hash,
            "paper_arm": paper_arm(cfg), "rollout_cap": scaled_length(cfg.horizon.tokens, scale),
            "readout_cap": scaled_length(cfg.eval.max_new_tokens, scale)}

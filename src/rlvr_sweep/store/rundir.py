"""Run folders: where a run lives, what defines it, and how its files are written (DESIGN "Results").

A run folder is named from the run's identity, not the launch time:
`{out_root}/{profile}/{arm}/h{horizon}_s{seed}_{hash}` where `hash` is a short digest of the
resolved config (without `run.*`, `data.root`, `data.splits_dir` and the `paper_arms` label, which do
not change the experiment). It holds `config.yaml`, the parquet tables, `run.json` and, last, the `DONE` marker.
Every file is written atomically (temporary file, then rename), so a reader never sees half a
file; a folder without `DONE` is unfinished.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

from omegaconf import OmegaConf

from rlvr_sweep.config import Config, paper_arm
from rlvr_sweep.store import schema

DONE_MARKER = "DONE"
RUN_JSON = "run.json"
RUN_KEYS = schema.RUN_KEYS


class UnfinishedRunError(RuntimeError):
    """A run folder exists without its done marker and the config says not to restart it."""


def config_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)


def config_hash(cfg: Config) -> str:
    """Short digest of everything that defines the experiment."""
    identity = config_dict(cfg)
    identity.pop("run")
    identity.pop("paper_arms")  # a label of (arm, horizon), not a setting
    identity["data"].pop("root")  # where the files live does not change the experiment
    identity["data"].pop("splits_dir")
    blob = json.dumps(identity, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:8]


def run_dir_for(cfg: Config) -> Path:
    name = f"h{cfg.horizon.tokens}_s{cfg.seed}_{config_hash(cfg)}"
    return Path(cfg.run.out_root) / cfg.profile.name / cfg.arm / name


def is_finished(run_dir: Path) -> bool:
    return (run_dir / DONE_MARKER).is_file()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def atomic_write_json(path: Path, obj: dict) -> None:
    atomic_write_bytes(path, json.dumps(obj, indent=2, sort_keys=True, default=str).encode())


def read_run_json(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / RUN_JSON).read_text())


def prepare_run_dir(cfg: Config, run_dir: Path) -> Path | None:
    """Create the folder for a new run. An unfinished folder is moved aside (returned), never reused
    or deleted; with `run.on_unfinished=error` it stops the run instead."""
    moved = None
    if run_dir.exists():
        if cfg.run.on_unfinished == "error":
            raise UnfinishedRunError(
                f"{run_dir} holds an unfinished run; move it away or rerun with run.on_unfinished=restart"
            )
        if cfg.run.on_unfinished != "restart":
            raise ValueError(f"unknown run.on_unfinished {cfg.run.on_unfinished!r}; valid: ['restart', 'error']")
        moved = run_dir.with_name(f"{run_dir.name}.stale-{time.strftime('%Y%m%d-%H%M%S')}")
        run_dir.rename(moved)
    run_dir.mkdir(parents=True)
    atomic_write_bytes(run_dir / "config.yaml", OmegaConf.to_yaml(OmegaConf.structured(cfg)).encode())
    return moved


def mark_done(run_dir: Path) -> None:
    atomic_write_bytes(run_dir / DONE_MARKER, b"")


def code_version() -> dict:
    """The git commit of the code that ran, and whether the tree had uncommitted changes."""
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=here, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    if commit.returncode != 0:
        return {"commit": None, "dirty": None}
    return {"commit": commit.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def run_keys(cfg: Config) -> dict:
    """The columns every table of the run carries: its identity and the paper arm it reproduces."""
    return {"arm": cfg.arm, "horizon": cfg.horizon.tokens, "seed": cfg.seed, "config_hash": config_hash(cfg),
            "paper_arm": paper_arm(cfg)}

"""Run folders and their tables (DESIGN "Results").

A run folder is named from the run's identity, not the launch time:
`{out_root}/{profile}/{arm}/h{horizon}_s{seed}_{hash}` where `hash` is a short digest of the
resolved config (without `run.*`, `data.root` and `data.splits_dir`, which do not change the experiment). It holds
`config.yaml`, `steps.parquet`, `rollouts.parquet`, `pairs.parquet` (the per-pair ledger),
`grades.parquet`, `run.json` and, last, the
`DONE` marker. Every file is written atomically (temporary file, then rename), so a reader never
sees half a table; a folder without `DONE` is unfinished.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from rlvr_sweep.config import Config

TABLES = ("steps", "rollouts", "pairs", "grades")
DONE_MARKER = "DONE"
RUN_JSON = "run.json"


class UnfinishedRunError(RuntimeError):
    """A run folder exists without its done marker and the config says not to restart it."""


def config_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)


def config_hash(cfg: Config) -> str:
    """Short digest of everything that defines the experiment."""
    identity = config_dict(cfg)
    identity.pop("run")
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


def write_table(run_dir: Path, name: str, rows: list[dict]) -> None:
    """(Re)write one parquet table atomically from its rows so far."""
    if name not in TABLES:
        raise ValueError(f"unknown table {name!r}; valid: {list(TABLES)}")
    tmp = run_dir / f".{name}.parquet.tmp-{os.getpid()}"
    pd.DataFrame(rows).to_parquet(tmp, index=False)
    os.replace(tmp, run_dir / f"{name}.parquet")


def read_table(run_dir: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(Path(run_dir) / f"{name}.parquet")


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


RUN_KEYS = ("arm", "horizon", "seed", "config_hash")


def run_infos(root, finished_only: bool = True) -> list[dict]:
    """The run.json of every run folder under `root` (finished ones only by default)."""
    paths = sorted(Path(root).rglob(RUN_JSON))
    # run_dir is where the folder is now (it may have been moved since it was written)
    return [{**json.loads(p.read_text()), "run_dir": str(p.parent)} for p in paths
            if not finished_only or is_finished(p.parent)]


def collect(root, finished_only: bool = True) -> dict[str, pd.DataFrame]:
    """Every run's tables under `root`, concatenated, with the run keys as leading columns.

    Returns {"runs": one row per run (run.json, flattened), "steps", "rollouts", "grades"}.
    """
    runs, tables = run_infos(root, finished_only), {name: [] for name in TABLES}
    for info in runs:
        run_dir = Path(info["run_dir"])
        keys = {k: info.get(k) for k in RUN_KEYS}
        for name in TABLES:
            if (run_dir / f"{name}.parquet").is_file():
                frame = read_table(run_dir, name)
                tables[name].append(frame.assign(**keys)[[*RUN_KEYS, *frame.columns]])
    out = {"runs": pd.json_normalize(runs) if runs else pd.DataFrame(columns=list(RUN_KEYS))}
    for name, frames in tables.items():
        out[name] = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(RUN_KEYS))
    return out

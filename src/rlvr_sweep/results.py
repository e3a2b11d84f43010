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
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from omegaconf import OmegaConf

from rlvr_sweep import schema
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


def write_table(run_dir: Path, name: str, rows: list[dict], keys: dict | None = None) -> None:
    """(Re)write one parquet table atomically from its rows so far, with the run keys as columns."""
    frame = pd.DataFrame(rows)
    if keys:
        frame = frame.assign(**keys)[[*keys, *frame.columns]] if len(frame) else pd.DataFrame(columns=[*keys])
    if len(frame):
        schema.check_columns(name, frame.columns, str(run_dir))
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), schema.METADATA_KEY: str(schema.SCHEMA_VERSION).encode()})
    tmp = run_dir / f".{name}.parquet.tmp-{os.getpid()}"
    pq.write_table(table, tmp)
    os.replace(tmp, run_dir / f"{name}.parquet")


def read_table(run_dir: Path, name: str) -> pd.DataFrame:
    path = Path(run_dir) / f"{name}.parquet"
    table = pq.read_table(path)
    schema.check_version(table.schema.metadata, str(path))
    return table.to_pandas()


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


RUN_KEYS = schema.RUN_KEYS


def run_keys(cfg: Config) -> dict:
    return {"arm": cfg.arm, "horizon": cfg.horizon.tokens, "seed": cfg.seed, "config_hash": config_hash(cfg)}


def finished_run_dirs(root) -> list[Path]:
    """Run folders under a sweep root (fixed depth profile/arm/run) that have their DONE marker."""
    return sorted(p.parent for p in Path(root).glob(f"*/*/*/{DONE_MARKER}"))


def run_infos(root, finished_only: bool = True) -> list[dict]:
    """The run.json of every run folder under `root` (finished ones only by default)."""
    paths = [d / RUN_JSON for d in finished_run_dirs(root)] if finished_only else sorted(Path(root).glob(f"*/*/*/{RUN_JSON}"))
    # run_dir is where the folder is now (it may have been moved since it was written)
    return [{**json.loads(p.read_text()), "run_dir": str(p.parent)} for p in paths]


def collect(root, finished_only: bool = True) -> dict[str, pd.DataFrame]:
    """Every run's tables under `root`, concatenated (one pyarrow dataset scan per table).

    Returns {"runs": one row per run (run.json, flattened), "steps", "rollouts", "pairs", "grades"}.
    """
    infos = run_infos(root, finished_only)
    out = {"runs": pd.json_normalize(infos) if infos else pd.DataFrame(columns=list(RUN_KEYS))}
    for name in TABLES:
        files = [str(Path(i["run_dir"]) / f"{name}.parquet") for i in infos]
        files = [f for f in files if os.path.exists(f)]
        if not files:
            out[name] = pd.DataFrame(columns=list(RUN_KEYS))
            continue
        schemas = [pq.read_schema(f) for f in files]
        for f, s in zip(files, schemas):
            schema.check_version(s.metadata, f)
        dataset = pads.dataset(files, schema=pa.unify_schemas([s.remove_metadata() for s in schemas]), format="parquet")
        out[name] = dataset.to_table().to_pandas()
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m rlvr_sweep.results collect ROOT --out FILE`: one parquet file per table."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m rlvr_sweep.results")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="gather every finished run's tables under ROOT")
    c.add_argument("root")
    c.add_argument("--out", required=True, help="output prefix: writes OUT.<table>.parquet")
    c.add_argument("--all", action="store_true", help="include unfinished runs")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not Path(args.root).is_dir():
        print(f"no such folder: {args.root}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    tables = collect(args.root, finished_only=not args.all)
    for name, frame in tables.items():
        path = Path(f"{args.out}.{name}.parquet")
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_parquet(path, index=False)
        print(f"{name}: {len(frame)} rows -> {path}")
    print(f"collected {len(tables['runs'])} runs in {time.perf_counter() - started:.2f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A run's folder across processes and kills: a finished run is skipped (its leftovers tidied), an unfinished one
resumes from its checkpoint or, during its first read-out, from the benchmarks already graded; one with neither is
moved aside, never deleted (`run.on_unfinished`). `run.lifecycle` calls these under the folder's lock."""

from __future__ import annotations

import logging
from pathlib import Path

from rlvr_sweep import store
from rlvr_sweep.config import Config
from rlvr_sweep.run import checkpoint
from rlvr_sweep.store.schema import TABLE_KEYS

log = logging.getLogger(__name__)


def skip_finished(run_dir) -> dict:
    """A finished run is never moved or rewritten; a checkpoint or temporary file that a kill left
    after its DONE marker is removed (when no other process holds the run)."""
    log.info("skipping finished run %s", run_dir)
    if (run_dir / checkpoint.CHECKPOINT).exists() or any(run_dir.glob(".*.tmp-*")):
        try:
            with store.run_lock(run_dir):
                tidy(run_dir)
        except store.RunBusyError:
            pass
    return {**store.read_run_json(run_dir), "skipped": True}


def tidy(run_dir) -> None:
    checkpoint.remove(run_dir)
    store.remove_temp_files(run_dir)


def resume_or_start(cfg: Config, run_dir, identity) -> dict | None:
    """What to resume from, or None after preparing a fresh folder: the checkpoint; before the first
    checkpoint, the benchmarks the base read-out already graded (a read-out of a checkpoint resumes
    the same way, benchmark by benchmark). An unfinished folder with neither is moved aside, never
    deleted (or stops the run: on_unfinished=error)."""
    if not run_dir.exists():
        store.prepare_run_dir(cfg, run_dir)
        return None
    for path in store.remove_temp_files(run_dir):
        log.info("removed %s, left by a killed writer", path)
    try:
        resume = checkpoint.load(run_dir, identity.run)
        why = "holds an unfinished run without a checkpoint"
    except checkpoint.CheckpointError as err:
        log.error("%s", err)
        resume, why = None, f"has an unusable checkpoint ({err})"
    if resume is None and (run_dir / checkpoint.CHECKPOINT).exists() is False:
        resume = _from_grades(run_dir)
        if resume is not None:
            graded = resume["progress"]["grades"]
            log.info("resuming the %s read-out after %d graded benchmark(s)", graded[0]["phase"],
                     len({g["benchmark"] for g in graded}))
            return resume
    if resume is None:
        moved = store.prepare_run_dir(cfg, run_dir, why)
        log.warning("%s %s: moved it aside to %s and started over", run_dir, why, moved)
    return resume


def graded_so_far(run_dir: Path) -> list[dict]:
    """The rows of the first read-out (a training run's base read-out, an evaluate run's only one) that a
    killed run left: written whole after each benchmark, so every benchmark they hold is complete."""
    if not (run_dir / "grades.parquet").is_file() or (run_dir / "steps.parquet").is_file():
        return []
    try:
        frame = store.read_table(run_dir, "grades")
        rows = frame.drop(columns=[c for c in TABLE_KEYS if c in frame.columns]).to_dict("records")
    except Exception as err:  # a damaged table: start over rather than trust it
        log.error("%s/grades.parquet cannot be read (%s): starting over", run_dir, err)
        return []
    return rows if {r["phase"] for r in rows} <= {"base", "eval"} else []


def resume_as(cfg: Config, lead_dir: Path, run_dir: Path, identity) -> dict | None:
    """What the leader resumed from, read from its folder (after it prepared it): its checkpoint, or the
    benchmarks its first read-out graded; a follower's own folder starts fresh."""
    store.prepare_run_dir(cfg, run_dir)
    resume = checkpoint.load(lead_dir, identity.run)
    return _from_grades(lead_dir) if resume is None else resume


def _from_grades(run_dir: Path) -> dict | None:
    """A resume point at the first read-out's graded benchmarks (`graded_so_far`); None without any."""
    graded = graded_so_far(run_dir)
    return {"progress": {"step": 0, "grades": graded}, "from_grades": True} if graded else None

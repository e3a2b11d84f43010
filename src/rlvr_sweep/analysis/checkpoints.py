"""Test-time read-outs grouped by the checkpoint they read (seed paper §5.5-§5.6, Tables 4, 5B).

A sampled or forked read-out is made either by a training run (`eval=sampled_k3` / `eval=fork3`: its
base and trained policies) or by a `task=evaluate` run of a saved checkpoint (`model.path=<run>/model`,
phase `eval`). `readouts_of(sweep, name)` returns one `Readout` per (run, phase) with the checkpoint it
read. A `task=evaluate` read-out is credited by its weights, never by a folder's name: it belongs to a
training run's trained checkpoint exactly when the digest of the model it read (`model_digest`, every
weight, config and tokenizer file) equals the digest of the model that run saved (`saved_model_digest`;
among runs that trained alike and saved the same weights, the one whose folder it read), so its Table 4 row carries the run's training cost and its Table 5B row meets the batch audit of the
same checkpoint. Any other read-out is its own checkpoint (`model:<digest>`), named by the evaluate
run's arm or the folder's name; `verify` re-derives every attribution from the digests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rlvr_sweep.analysis.source import Sweep, benchmark_order
from rlvr_sweep.config import scaled_length

MDL_MIN_LEN = 15  # paper tokens: MDL's eligibility window is 15 <= L < cap (§5.5)


@dataclass
class Readout:
    key: str  # the checkpoint read (a training run's folder name, '#base' for its untrained policy)
    label: str  # printable checkpoint
    phase: str
    readout: str  # eval.name: greedy, sampled_k3, fork3
    run_dir: str  # the run that made the read-out
    batch_size: int | None
    cap: int  # the read-out cap in the profile's tokens
    min_len: int  # MDL's 15 tokens, scaled
    seed: int  # the seed of the run that made the read-out (sampled: draws seeded 1000 + seed)
    train_run: pd.Series | None  # the training run that produced the checkpoint, when the sweep has it
    rows: pd.DataFrame

    def benchmarks(self) -> list[str]:
        return sorted(self.rows["benchmark"].unique(), key=benchmark_order)

    def of(self, benchmark: str) -> pd.DataFrame:
        return self.rows[self.rows["benchmark"] == benchmark]


def _name(path) -> str:
    return Path(str(path)).name if path else ""


def checkpoint_of(sweep: Sweep, run: pd.Series, phase: str) -> tuple[str, str, pd.Series | None]:
    """(key, label, training run) of the policy a read-out read."""
    if run["task"] != "evaluate":
        suffix = "" if phase in ("trained", "eval") else f"#{phase}"
        label = f"{run['label']} seed {run['seed']}" + ("" if not suffix else f" ({phase})")
        return _name(run["run_dir"]) + suffix, label, run if not suffix else None
    model = run.get("model_source") if isinstance(run.get("model_source"), str) else run.get("model_path")
    model = str(model or "")
    owner = owner_of(sweep, run.get("model_digest"), model)
    if owner is not None:
        return checkpoint_of(sweep, owner, "trained")
    folder = Path(model)
    name = folder.parent.name if folder.name == "model" else (folder.name or model)
    label = run["arm"] if run["arm"] != "custom" else name
    digest = run.get("model_digest")
    if isinstance(digest, str):  # no run of the sweep saved these weights: the label says whose they are
        label = f"{label} [model {digest[:8]}, not a run of this sweep]"
    return f"model:{digest[:16] if isinstance(digest, str) else model}", label, None


def owner_of(sweep: Sweep, digest, folder: str = "") -> pd.Series | None:
    """The training run of the sweep that saved the model with this digest, or None. Runs that trained
    alike (an ad-hoc run that only reads out other benchmarks) save the same weights: the read-out then
    belongs to the one whose `model/` folder it read, else to the first of them in the tables' order."""
    if not isinstance(digest, str) or not len(sweep.runs) or "saved_model_digest" not in sweep.runs:
        return None
    owners = sweep.runs[sweep.runs["saved_model_digest"] == digest]
    if len(owners) > 1 and folder:
        read = _real(folder)
        named = owners[[_real(Path(str(d)) / "model") == read for d in owners["run_dir"]]]
        owners = named if len(named) else owners
    return owners.iloc[0] if len(owners) else None


def _real(path) -> str:
    return os.path.realpath(str(path))


def run_label(sweep: Sweep, digest, fallback: str) -> str:
    """The sweep's label of the trained checkpoint with this model digest ("12. stopped_tree h1024 seed 7"),
    else `fallback`."""
    owner = owner_of(sweep, digest)
    return f"{owner['label']} seed {owner['seed']}" if owner is not None else fallback


def readouts_of(sweep: Sweep, readout: str | None = None) -> list[Readout]:
    """Every read-out in `sweep.readouts` (only those named `readout` when given), in run order."""
    rows = sweep.readouts
    if not len(rows):
        return []
    if readout is not None:
        rows = rows[rows["readout"] == readout]
    runs = pd.concat([sweep.runs, sweep.eval_runs], ignore_index=True)
    out = []
    for (run_dir, phase), part in rows.groupby(["run_dir", "phase"], sort=False):
        run = runs[runs["run_dir"] == run_dir].iloc[0]
        key, label, train = checkpoint_of(sweep, run, phase)
        scale = float(run.get("length_scale", 1.0) or 1.0)
        batch = run.get("eval_batch_size")
        out.append(Readout(key, label, phase, part["readout"].iloc[0], run_dir,
                           None if pd.isna(batch) else int(batch), readout_cap(part, run),
                           scaled_length(MDL_MIN_LEN, scale), int(run["seed"]), train, part))
    return out


def readout_cap(rows: pd.DataFrame, run: pd.Series) -> int:
    """The read-out cap the rows were decoded under (their `readout_cap`, else the run's record)."""
    if "readout_cap" in rows and rows["readout_cap"].notna().all():
        return int(rows["readout_cap"].iloc[0])
    return int(run["eval_max_new_tokens"])

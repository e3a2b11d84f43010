"""PASS 1 re-derives each step's std from its stored rewards: an edited std, re-sealed into the manifest so
the folder still looks intact, is named; the columns it cannot re-derive are said to be so."""

from __future__ import annotations

import math
import shutil

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rlvr_sweep import store
from rlvr_sweep.store.manifest import manifest_bytes
from rlvr_sweep.verify import passes
from rlvr_sweep.verify.step_stats import std_of, std_problems


def test_the_std_by_hand():
    assert std_of([1.0, 0.0, 0.0, 0.0]) == 0.5  # mean 1/4: (9/16 + 3/16) / 3 = 1/4
    assert std_of([1.0] * 8) == 0.0 and math.isnan(std_of([1.0]))
    frame = pd.DataFrame({"step": [0, 1, 2], "rewards": [[1.0, 0.0, 0.0, 0.0], [0.0] * 4, [1.0]],
                          "std": [0.5, 0.1, float("nan")]})
    checked, found = std_problems(frame)
    assert checked == 3 and found == [{"key": {"step": 1}, "diffs": {"std": {"stored": 0.1, "recomputed": 0.0}}}]
    assert std_problems(frame.drop(columns=["std"])) == (0, [])


def test_a_resealed_std_edit_fails_pass1(tmp_path, finished_run):
    root = tmp_path / "runs"
    run_dir = root / "smoke" / "ra_flat" / finished_run.name
    shutil.copytree(finished_run, run_dir)
    clean = passes.pass1(root, jobs=1)
    assert clean.ok and "2 step stds re-derived (grad_norm, loss, seconds: the update's own measurements, not " \
                         "re-derivable)" in clean.summary
    table = pq.read_table(run_dir / "steps.parquet")
    steps = table.to_pandas()
    steps.loc[steps["step"] == 1, "std"] += 0.25
    steps.loc[steps["step"] == 0, "grad_norm"] = 123.0  # not re-derivable: said so, not caught
    pq.write_table(pa.Table.from_pandas(steps, schema=table.schema, preserve_index=False), run_dir / "steps.parquet")
    (run_dir / store.MANIFEST).write_bytes(manifest_bytes(run_dir))  # re-sealed: the folder looks intact
    edited = passes.pass1(root, jobs=1)
    assert "1/1 run folders intact" in edited.summary
    assert len(edited.problems) == 1 and edited.problems[0].startswith(f"DISAGREE smoke/ra_flat/{finished_run.name} "
                                                                        "steps [step=1]: std stored=")

"""The paper path (launchers/paper_path.sh, docs/paper-path.md) end to end on the smoke profile against
the local SLURM cluster: upstream files -> data files, splits and their check -> two arms x two seeds on
SLURM -> the sampled, fork and batch-64 read-outs and the probe -> collect, tables, figures -> verify all."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import REPO
from tests.data.upstream import write_upstream
from tests.sweep.test_slurm import require_controller

pytestmark = pytest.mark.slow


def test_the_paper_path_runs_end_to_end_on_the_smoke_profile(tmp_path):
    require_controller()
    raw = write_upstream(tmp_path / "raw")
    env = {**os.environ, "PROFILE": "smoke", "ROOT": str(tmp_path / "out"), "RAW": str(raw), "DATA": str(tmp_path / "data"),
           "LAUNCH": f"hydra/launcher=slurm_debug hydra.launcher.submitit_folder={tmp_path}/submitit/%j",
           "EXTRA": "train.steps=4 eval.limit=16",
           "SWEEPS": "+arm=stopped_tree horizon=1024 seed=42,7;+arm=stopped_tree_accum seed=42,7",
           "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([str(REPO / "launchers/paper_path.sh")], env=env, capture_output=True, text=True, timeout=1500)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert [line.split("] ", 1)[1][:3] for line in out.splitlines() if line.startswith("== [")][:8] == \
        ["1/8", "2/8", "3/8", "4/8", "5/8", "6/8", "7/8", "8/8"]
    assert "7 of 7 files canonical" in out
    assert "== verify all: 4/4 passes ok" in out
    tables = (tmp_path / "out/analysis/tables.md").read_text()
    for title in ("## Table 1", "## Table 4", "## Table 5B", "## §3.1 diagnostics"):
        assert title in tables
    assert "probe items re-derived" in out  # PASS 4 read the probe folder (no discordant item in 16: no Table 5A)
    assert (tmp_path / "out/runs/smoke/probes/arm12_s42_to_s7/DONE").is_file()
    trained = [p for p in (tmp_path / "out/runs/smoke").glob("*/h*_s*_*/DONE") if p.parts[-3] != "evaluate"]
    assert len(trained) == 4
    assert len(list((tmp_path / "out/runs/smoke/evaluate").glob("*/DONE"))) == 4

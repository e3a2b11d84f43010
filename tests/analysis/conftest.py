"""A small real smoke sweep, built once per test session with the README's command and shared by the
analysis and verify tests: 2 arms (flat baseline, stopped tree) x 2 seeds at the 1,024-token horizon
(128 smoke tokens, so the 512-token prefix audit has long rollouts), 4 steps, 16 read-out items."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_cli

SWEEP_ARGS = ["+arm=baseline,stopped_tree", "horizon=1024", "profile=smoke", "train.steps=4", "eval.limit=16",
              "sampler.bifurcate_after_active=1"]  # one flat warmup step, then trees
SEEDS = "seed=42,101"
RUNS = 4


@pytest.fixture(scope="session")
def smoke_sweep(tmp_path_factory) -> Path:
    """The sweep root (…/runs). A second conftest importing this fixture finds the runs done and reuses them."""
    base = tmp_path_factory.getbasetemp() / "analysis_smoke_sweep"
    root = base / "runs"
    if len(list(root.glob("*/*/*/DONE"))) < RUNS:
        base.mkdir(exist_ok=True)
        proc = run_cli([*SWEEP_ARGS, f"run.out_root={root}", "-m", SEEDS], cwd=base, timeout=900)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert len(list(root.glob("*/*/*/DONE"))) == RUNS
    return root

"""The real sweeps the slow tier shares, each built once per test session (a pytest plugin that the
root conftest loads, so every module that asks for one gets the same fixture, not a copy).

`smoke_sweep`: the README's sweep commands, small: 2 arms (flat baseline, stopped tree with one flat
warmup step) x 2 seeds at the 1,024-token horizon (128 smoke tokens, so the 512-token prefix audit has
long rollouts), 4 steps, 16 read-out items. `testtime_sweep`: a copy of it with every test-time mode, built with the README's
commands:

- `task=evaluate eval=sampled_k3` of stopped_tree seed 42's model (Table 4, single-seed row);
- `task=evaluate eval=fork3` of stopped_tree seed 101's model, and a greedy read-out of it at batch 64
  (Table 5B and its batch audit against the run's own batch-32 read-out);
- training runs read out with `eval=sampled_k3` (ra_flat) and `eval=fork3` (gate_flat), base and trained;
- a prefix-splice probe into stopped_tree seed 42 from a donor that is the shipped tiny model with seeded
  weight noise (a `save_pretrained` folder: it answers some items the recipient misses).

A test that asks for either (directly or through another fixture) belongs to the slow tier
(`tests/conftest.py`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO
from tests.helpers import run_cli

COMMON = ["horizon=1024", "profile=smoke", "train.steps=4", "eval.limit=16"]
SWEEPS = [["+arm=baseline", *COMMON],
          ["+arm=stopped_tree", *COMMON, "sampler.bifurcate_after_active=1"]]  # one flat warmup step, then trees
SEEDS = "seed=42,101"
# the tree row's name: what it changes from Arm 12's preset beyond what both rows change (docs/analysis.md)
TREE = "12. stopped_tree h1024 [sampler.bifurcate_after_active=1]"
RUNS = 4
SWEEP_FIXTURES = ("smoke_sweep", "testtime_sweep")  # the slow tier's shared sweeps
TINY = "pkg:rlvr_sweep.policy/assets/tiny_qwen3"


def cli(module: str, *args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=env,
                          timeout=600, cwd=cwd)


def row_name(root: Path, arm: str) -> str:
    """The name the tables give the one arm row of `arm` under `root`."""
    from rlvr_sweep.analysis import load_sweep

    sweep = load_sweep(root)
    (unit,) = [u for u in sweep.units() if sweep.names_of(u)[2] == arm]
    return sweep.label(unit)


def run_of(root: Path, arm: str, seed: int) -> Path:
    return next(root.glob(f"smoke/{arm}/h*_s{seed}_*"))


@pytest.fixture(scope="session")
def smoke_sweep(tmp_path_factory) -> Path:
    """The sweep root (…/runs), built with the README's sweep command."""
    base = tmp_path_factory.mktemp("analysis_smoke_sweep")
    root = base / "runs"
    for args in SWEEPS:
        proc = run_cli([*args, f"run.out_root={root}", "-m", SEEDS], cwd=base, timeout=900)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert len(list(root.glob("*/*/*/DONE"))) == RUNS
    return root


def noisy_donor(folder: Path, scale: float = 0.05, seed: int = 1) -> Path:
    """The tiny model with N(0, (scale * mean|w|)^2) noise on every weight, saved with its tokenizer."""
    from rlvr_sweep.config import ModelConfig
    from rlvr_sweep.policy import load_policy

    policy = load_policy(ModelConfig(name="tiny", hub_id=None, path=TINY, dtype="float32", device="cpu"))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale * p.abs().mean())
    policy.model.save_pretrained(folder)
    policy.tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def testtime_sweep(smoke_sweep, tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("testtime_sweep")
    root = base / "runs"
    shutil.copytree(smoke_sweep, root)
    s42, s101 = run_of(root, "stopped_tree", 42), run_of(root, "stopped_tree", 101)
    common = ["profile=smoke", f"run.out_root={root}"]
    for args in (
        ["task=evaluate", f"model.path={s42}/model", "eval=sampled_k3", "eval.limit=16", "seed=42"],
        ["task=evaluate", f"model.path={s101}/model", "eval=fork3", "eval.limit=16", "seed=101"],
        ["task=evaluate", f"model.path={s101}/model", "eval.batch_size=64", "eval.limit=16", "seed=101"],
        ["+arm=ra_flat", "train.steps=2", "eval=sampled_k3", "eval.limit=6", "seed=42"],
        ["+arm=gate_flat", "train.steps=2", "eval=fork3", "eval.limit=6", "seed=42"],
    ):
        proc = run_cli([*args, *common], cwd=base, timeout=600)
        assert proc.returncode == 0, (" ".join(args) + "\n" + proc.stdout + proc.stderr)[-4000:]
    donor = noisy_donor(base / "noisy_donor")
    proc = cli("rlvr_sweep.evaluation", "probe", str(donor), str(s42), "--limit", "40",
               "--out", str(root / "smoke" / "probes" / "noisy_to_s42"), cwd=base)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return root

"""A smoke sweep with every test-time mode, built once per session on a copy of the analysis smoke sweep
(2 arms x seeds 42 / 101, 4 steps, 16 read-out items, saved models), with the README's commands:

- `task=evaluate eval=sampled_k3` of stopped_tree seed 42's model (Table 4, single-seed row);
- `task=evaluate eval=fork3` of stopped_tree seed 101's model, and a greedy read-out of it at batch 64
  (Table 5B and its batch audit against the run's own batch-32 read-out);
- training runs read out with `eval=sampled_k3` (ra_flat) and `eval=fork3` (gate_flat), base and trained;
- a prefix-splice probe into stopped_tree seed 42 from a donor that is the shipped tiny model with seeded
  weight noise (a `save_pretrained` folder: it answers some items the recipient misses).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.analysis.conftest import smoke_sweep  # noqa: F401  (the shared smoke sweep)
from tests.conftest import REPO
from tests.helpers import run_cli

TINY = "pkg:rlvr_sweep.policy/assets/tiny_qwen3"


def cli(module: str, *args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=env,
                          timeout=600, cwd=cwd)


def run_of(root: Path, arm: str, seed: int) -> Path:
    return next(root.glob(f"smoke/{arm}/h*_s{seed}_*"))


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
def testtime_sweep(smoke_sweep, tmp_path_factory) -> Path:  # noqa: F811
    base = tmp_path_factory.getbasetemp() / "testtime_sweep"
    root = base / "runs"
    if (root / "smoke" / "probes" / "noisy_to_s42" / "DONE").is_file():
        return root
    shutil.rmtree(base, ignore_errors=True)
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

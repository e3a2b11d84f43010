"""Helpers shared by the tests: compose a config as the entrypoint does, run the entrypoint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore

from rlvr_sweep.config import Config, build_config, register_configs
from rlvr_sweep.plugins import ENV
from rlvr_sweep.sweep.cli import normalize_overrides
from rlvr_sweep.sweep.preflight import job_configs
from tests.conftest import CONF_DIR, REPO


def compose_cfg(overrides: list[str]) -> Config:
    """The config a job builds from `overrides`: composed as the preflight composes a sweep's jobs
    (`sweep.preflight.job_configs`, tested to equal Hydra's composition: Hydra composes once per set of
    group choices, shared with earlier calls, and the values are set on a copy), converted, checked (ranges,
    combinations) and its choices checked against their registries, as `run.plan` does before anything is
    written."""
    from rlvr_sweep.run import check_choices

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        made = job_configs([normalize_overrides(overrides)], shared_compositions())
        return check_choices(build_config(next(made)))


_COMPOSITIONS: dict[str, tuple] = {}  # RLVR_SWEEP_PLUGINS -> (Hydra's stored options then, the compositions)


def shared_compositions() -> dict:
    """The compositions `compose_cfg` shares: those made under the same RLVR_SWEEP_PLUGINS since the
    options in Hydra's ConfigStore (where a plugin's options are stored) last changed."""
    def stored(tree: dict, path: str = ""):
        for key, value in tree.items():
            yield from stored(value, f"{path}{key}/") if isinstance(value, dict) else [(path + key, value)]

    options = list(stored(ConfigStore.instance().repo))
    plugins = os.environ.get(ENV, "")
    seen, shared = _COMPOSITIONS.get(plugins, (None, None))
    if seen != options:  # ConfigNodes compare by their content
        shared = {}
        _COMPOSITIONS[plugins] = (options, shared)
    return shared


def run_dir_of(cfg: Config) -> Path:
    """The folder the run of `cfg` lives in (its identity: settings, data rows, model files)."""
    from rlvr_sweep.run import plan

    return plan(cfg).run_dir


def run_hash_of(cfg: Config) -> str:
    from rlvr_sweep.run import plan

    return plan(cfg).identity.run


def same_inputs_identity(cfg: Config) -> str:
    """The identity `cfg` would have on one fixed set of inputs (data rows, model files): equal for two
    configs exactly when their settings define the same experiment, whether or not the data and
    weights are on this machine (the paper profile's are not)."""
    from rlvr_sweep.store import identify

    inputs = {"train": {"sha256": "t"}, "model": {"sha256": "m"},
              **{f"benchmark/{b}": {"sha256": b} for b in cfg.eval.benchmarks}}
    return identify(cfg, inputs).run


def run_cli(args: list[str], cwd: Path, env_extra: dict | None = None, timeout: int = 600):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env_extra or {})}
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "rlvr_sweep", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def run_killed_at(cfg: Config, step: int) -> None:
    """Run `cfg` and stop it as a kill would when it reaches `step` (after its last checkpoint);
    the run folder is left as a killed run leaves it."""
    import pytest

    from rlvr_sweep.run import run, train

    real = train.step_row

    def crash(at, *args):
        if at == step:
            raise KeyboardInterrupt(f"simulated kill at step {step}")
        return real(at, *args)

    train.step_row = crash
    try:
        with pytest.raises(KeyboardInterrupt):
            run(cfg)
    finally:
        train.step_row = real

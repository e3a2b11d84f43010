"""The package works installed without -e: configs and the tiny model ship inside the wheel, and the
`rlvr-sweep` console command is `python -m rlvr_sweep`."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", str(out), str(REPO)],
                   check=True, capture_output=True, text=True, timeout=300)
    (path,) = out.glob("rlvr_sweep-*.whl")
    return path


@pytest.mark.slow
def test_the_wheel_carries_configs_model_and_console_command(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "rlvr_sweep/conf/config.yaml" in names and "rlvr_sweep/conf/arm/stopped_tree.yaml" in names
    assert "rlvr_sweep/conf/hydra/launcher/submitit_slurm.yaml" in names
    assert "rlvr_sweep/policy/assets/tiny_qwen3/model.safetensors" in names
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "rlvr-sweep = rlvr_sweep.sweep.cli:main" in entry_points


@pytest.mark.slow
def test_an_installed_copy_runs_from_anywhere(wheel, tmp_path):
    """Unpacked (as pip installs it) outside the repository, the package composes and runs a smoke run
    from a folder that has no conf/ of its own."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1"}
    where = subprocess.run([sys.executable, "-c", "import rlvr_sweep; print(rlvr_sweep.__file__)"], env=env,
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(site))
    proc = subprocess.run([sys.executable, "-m", "rlvr_sweep", "+arm=ra_flat", "profile=smoke", "train.steps=1",
                           "eval.limit=2", "run.out_root=runs"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_json,) = (tmp_path / "runs").rglob("run.json")
    assert json.loads(run_json.read_text())["status"] == "finished"


def test_the_console_command_is_the_entrypoint(tmp_path):
    command = shutil.which("rlvr-sweep", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    if command is None:
        pytest.skip("rlvr-sweep is not on PATH: the package is not installed in this environment (pip install -e .)")
    proc = subprocess.run([command, "+arm=stopped_tree", "horizon=1024", "--cfg", "job"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "arm: stopped_tree" in proc.stdout and "tokens: 1024" in proc.stdout


def test_the_torch_requirement_is_a_floor_not_a_pin():
    """A cluster node keeps its own CUDA build: the project asks for torch >= 2.11 (tested on 2.11.0 and
    2.13.0), never an exact version."""
    import tomllib
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (torch_dep,) = [d for d in deps if d.split(">")[0].split("=")[0].strip() == "torch"]
    assert torch_dep.replace(" ", "") == "torch>=2.11"


@pytest.mark.slow
def test_installing_the_project_keeps_the_torch_already_there(wheel, tmp_path):
    """A venv that sees an installed torch (this environment's) installs the project without touching it:
    pip freeze shows the same torch, and no torch lands in the venv. The venv sees this environment's
    packages through a `.pth` file, not `--system-site-packages`, which would show the base interpreter's
    rather than those of a venv the tests run in."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site_packages = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (Path(site_packages) / "this_environment.pth").write_text("".join(f"{p}\n" for p in ours))
    freeze = lambda: [l for l in subprocess.run([str(python), "-m", "pip", "freeze", "--all"], capture_output=True,  # noqa: E731
                                                text=True, check=True).stdout.splitlines() if l.lower().startswith("torch==")]
    before = freeze()
    assert before, "this environment has no torch installed"
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert freeze() == before
    assert not list((venv / "lib").glob("python*/site-packages/torch"))


def test_one_version_everywhere_and_printed():
    """`__version__`, pyproject, CITATION.cff and the changelog's newest release name the same version,
    and `--version` prints it (both console forms) before Hydra is involved."""
    import tomllib

    from rlvr_sweep import __version__

    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"] == __version__
    citation = (REPO / "CITATION.cff").read_text()
    assert f"\nversion: {__version__}\n" in citation and "license: Apache-2.0" in citation
    releases = [line for line in (REPO / "CHANGELOG.md").read_text().splitlines()
                if line.startswith("## [") and line != "## [Unreleased]"]  # changes not yet released: above
    assert releases[0].startswith(f"## [{__version__}] - ")
    assert "Apache License" in (REPO / "LICENSE").read_text()[:200]
    for command in ([sys.executable, "-m", "rlvr_sweep", "--version"], [sys.executable, "-m", "rlvr_sweep", "-V"]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO)
        assert (done.returncode, done.stdout, done.stderr) == (0, f"rlvr_sweep {__version__}\n", "")

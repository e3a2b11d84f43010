"""The packages the GPU machine's image lacks, carried as wheels and installed there offline (`gpu_check.py`).

The image has Python 3.12, torch, transformers, pandas, pyarrow, sympy, PyYAML, cloudpickle and
typing_extensions, but not hydra-core, omegaconf, antlr4-python3-runtime, submitit or
hydra-submitit-launcher (../shared/research/gpu_wheels.md), nor peft and what it needs beyond transformers
(accelerate, psutil: psutil's wheel is a compiled abi3 one, for the image's x86_64 Linux). `fetch(folder)` (here, where PyPI answers)
downloads them as wheels pinned to the versions this project is tested with, one version each,
and builds antlr4's (published as a source archive only); `install(wheels, target)` (there, with no
network) puts them into a folder of their own with pip's `--no-index --no-deps --target`, which the check
then puts first on `PYTHONPATH`. `blocker(target, folder)` writes a `sitecustomize.py` that lets those
packages be imported from `target` (and the project's `src/`) only: the dry run on a CPU machine, where
they are also installed, proves with it that the carried set is complete.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# name -> version: the project's pins (pyproject: hydra-core>=1.3,<1.4; omegaconf>=2.3,<2.4; submitit>=1.5;
# hydra-submitit-launcher>=1.2,<1.3), at the versions CI installs; antlr4 is what omegaconf 2.3 requires
WHEELS = {"hydra-core": "1.3.8", "omegaconf": "2.3.1", "submitit": "1.5.4", "hydra-submitit-launcher": "1.2.0",
          "peft": "0.21.2", "accelerate": "1.16.0", "psutil": "7.2.2"}  # peft (and what it needs): lora.rank
BUILT_HERE = {"antlr4-python3-runtime": "4.9.3"}  # no published wheel: `pip wheel` builds it from its source
# the top-level modules they provide, which the blocker keeps to the carried copies
MODULES = ("hydra", "omegaconf", "antlr4", "submitit", "hydra_plugins", "peft", "accelerate", "psutil")
PLATFORM = ["--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
            "--platform", "manylinux2014_x86_64"]


def fetch(folder: Path) -> list[Path]:
    """Download (and build) the wheels into `folder`; the wheel files. Raises RuntimeError naming what failed."""
    folder.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip"]
    pinned = [f"{name}=={version}" for name, version in WHEELS.items()]
    steps = [[*pip, "download", "-q", "--no-deps", "--only-binary=:all:", *PLATFORM, "-d", str(folder), *pinned],
             *([*pip, "wheel", "-q", "--no-deps", "-w", str(folder), f"{name}=={version}"]
               for name, version in BUILT_HERE.items())]
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"{' '.join(cmd[3:5])} failed (exit {proc.returncode}): {last}")
    return wheels_in(folder)


def wheels_in(folder: Path) -> list[Path]:
    """The carried wheels: exactly one of each package, at its pinned version (else a RuntimeError)."""
    found = sorted(Path(folder).glob("*.whl"))
    by_name: dict[str, list[str]] = {}
    for wheel in found:
        name, version = wheel.name.split("-")[:2]
        by_name.setdefault(name.lower().replace("_", "-"), []).append(version)
    wanted = {**WHEELS, **BUILT_HERE}
    wrong = {n: v for n, v in by_name.items() if n in wanted and v != [wanted[n]]}
    missing = sorted(set(wanted) - set(by_name))
    if wrong or missing:
        raise RuntimeError(f"{folder}: wheels missing {missing} or not one of each at its pinned version {wrong}")
    return found


def install(folder: Path, target: Path, timeout: float = 300) -> list[str]:
    """pip install the carried wheels into `target`, offline; the lines pip printed."""
    wheels = wheels_in(folder)
    target.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir",
           "--upgrade", "--target", str(target), *map(str, wheels)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(timeout, 1))
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"pip install --no-index --target {target} failed (exit {proc.returncode}): {last}")
    return proc.stdout.splitlines()


BLOCKER = '''"""Written by bench/offline_site.py: {modules} import from {allowed} only (the dry run's proof)."""
import importlib.machinery
import sys

_ALLOWED = {allowed!r}
_MODULES = {modules!r}


class _CarriedOnly:
    def find_spec(self, name, path=None, target=None):
        if "." in name or name not in _MODULES:
            return None  # a submodule is found through its parent's path, which is already a carried one
        spec = importlib.machinery.PathFinder.find_spec(name, _ALLOWED)
        if spec is None:
            raise ModuleNotFoundError(f"{{name}} is not among the carried wheels ({{_ALLOWED}})", name=name)
        return spec


sys.meta_path.insert(0, _CarriedOnly())
'''


def blocker(target: Path, src: Path, folder: Path) -> Path:
    """A folder holding a `sitecustomize.py` that keeps `MODULES` to `target` and `src`; put it first on
    PYTHONPATH of the processes that must prove it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(BLOCKER.format(modules=MODULES, allowed=[str(target), str(src)]))
    return folder

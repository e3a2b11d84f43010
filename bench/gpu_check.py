"""The GPU check, in one call: on a machine with one NVIDIA GPU and its own torch (nothing downloaded).

    python bench/gpu_check.py                 # on the GPU machine, from the repository root (< 8 minutes)
    python bench/gpu_check.py --dry-run       # the same sequence on the CPU at the smallest sizes

Before the call, put what the machine cannot fetch inside the repository, in the ignored folder
`.gpu_check/` (and carry it): the Qwen3 tokenizer (`.gpu_check/tokenizer/`, from ../shared/tokenizers/qwen3)
and the MATH files (`.gpu_check/data/`: math_train.jsonl, math500.jsonl); `--prepare` copies them from
../shared. The sequence, each part timed, a failing part reported and the rest still run:

1. install: `pip install --no-deps --no-build-isolation -e .` (the machine's torch is left as it is:
   its version is printed before and after) and every dependency imported;
2. GPU tests: tests/rollout/test_gpu.py (CUDA-graph capture, static vs reference agreement in bf16
   and float32, the candidate top-p on CUDA tensors, `model.engine=auto`), test_vllm_engine.py (when
   vLLM imports) and test_top_p.py;
3. `bench/bench_engine.py`'s GPU mode (`--cpu --quick` in the dry run): decode ms per step at batch 8
   per engine, Arm 1 step seconds, read-out projections;
4. a real 5-step Arm 1 run of the paper profile (`+arm=baseline`, bf16, MATH-500 read-out of
   `--readout-items` items) on a randomly initialised Qwen3-0.6B-shaped folder with the real
   tokenizer (the dry run: a 2-layer folder of the same vocabulary, 2 steps, lengths scaled 1/32).

Output: `key=value` lines, the summary last: decode ms per step at batch 8 per engine, seconds per
training step, and the projected 50-step run + 950-item read-out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / ".gpu_check"
DEPENDENCIES = ("torch", "transformers", "hydra", "omegaconf", "sympy", "pandas", "pyarrow", "submitit",
                "safetensors", "yaml", "numpy")
GPU_TESTS = ("tests/rollout/test_gpu.py", "tests/rollout/test_vllm_engine.py", "tests/rollout/test_top_p.py")
figures: dict[str, str] = {}


def out(key: str, value) -> None:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    figures[key] = text
    print(f"{key}={text}", flush=True)


def sh(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **kw.pop("env", {})}
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, **kw)


def part(name: str, fn) -> None:
    started = time.perf_counter()
    try:
        fn()
        out(f"{name}_ok", True)
    except Exception as err:  # noqa: BLE001 - one expensive call: report and go on
        out(f"{name}_ok", False)
        out(f"{name}_error", repr(err)[:400].replace("\n", " "))
    out(f"{name}_s", time.perf_counter() - started)


def prepare(tokenizer: Path, data: Path) -> None:
    """Copy the tokenizer and the MATH files into the work folder (to carry to the GPU machine)."""
    (WORK / "data").mkdir(parents=True, exist_ok=True)
    shutil.copytree(tokenizer, WORK / "tokenizer", dirs_exist_ok=True)
    for name in ("math_train.jsonl", "math500.jsonl"):
        shutil.copy2(data / name, WORK / "data" / name)


def install(dry_run: bool) -> None:
    before = sh([sys.executable, "-c", "import torch; print(torch.__version__)"], 120).stdout.strip()
    out("torch_before", before)
    if not dry_run:
        proc = sh([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q", "-e", "."], 300)
        out("pip_install_rc", proc.returncode)
        if proc.returncode:
            raise RuntimeError(proc.stderr[-600:])
    after = sh([sys.executable, "-c", "import torch; print(torch.__version__, torch.cuda.is_available())"], 120)
    out("torch_after", after.stdout.strip())
    missing = [m for m in DEPENDENCIES if sh([sys.executable, "-c", f"import {m}"], 120).returncode]
    out("dependencies_missing", ",".join(missing) or "none")
    if before != after.stdout.split()[0] or missing:
        raise RuntimeError(f"torch changed ({before} -> {after.stdout.strip()}) or missing: {missing}")


def gpu_tests() -> None:
    proc = sh([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *GPU_TESTS], 360)
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-300:]
    out("gpu_tests", tail)
    for line in proc.stdout.splitlines():
        if line.startswith(("FAILED", "SKIPPED", "ERROR")):
            print(f"  {line}", flush=True)
    if proc.returncode:
        raise RuntimeError(f"pytest exit {proc.returncode}")


def engine_bench(dry_run: bool) -> None:
    args = ["--cpu", "--quick"] if dry_run else ["--time-limit-s", "200", "--fixed-readout-budget-s", "40"]
    proc = sh([sys.executable, "bench/bench_engine.py", *args], 150 if dry_run else 260)
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        if re.fullmatch(r"[a-z0-9_]+", key) and value:
            out(f"engine.{key}", value)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-600:])


def model_folder(dry_run: bool, dtype: str) -> Path:
    """A randomly initialised Qwen3 folder of Qwen3-0.6B's shape (2 layers of width 64 in the dry run)
    with the real tokenizer."""
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    from rlvr_sweep.policy.architecture import QWEN3_0_6B_CONFIG

    shape = dict(QWEN3_0_6B_CONFIG)
    if dry_run:
        shape.update(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16)
    folder = WORK / ("model_small" if dry_run else "model_0.6b")
    if not (folder / "config.json").is_file():
        torch.manual_seed(0)
        model = Qwen3ForCausalLM(Qwen3Config(**{k: v for k, v in shape.items() if k != "architectures"}))
        model.to(getattr(torch, dtype)).save_pretrained(folder)
        AutoTokenizer.from_pretrained(WORK / "tokenizer").save_pretrained(folder)
    return folder


def arm1_run(dry_run: bool, readout_items: int) -> None:
    dtype = "float32" if dry_run else "bfloat16"
    folder = model_folder(dry_run, dtype)
    steps = 2 if dry_run else 5
    root = WORK / ("runs_dry" if dry_run else "runs")
    overrides = ["+arm=baseline", f"model.path={folder}", f"model.dtype={dtype}", f"train.steps={steps}",
                 f"data.root={WORK / 'data'}", "eval.benchmarks=[math500]", f"eval.limit={readout_items}",
                 f"run.out_root={root}", f"hydra.run.dir={root}/hydra"]
    overrides += (["model.name=random_small", "model.device=cpu", "profile.length_scale=0.03125"] if dry_run
                  else ["model.device=cuda"])
    proc = sh([sys.executable, "-m", "rlvr_sweep", *overrides], 150 if dry_run else 300)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-800:])
    info = json.loads(next(root.glob("*/baseline/*/run.json")).read_text())
    step_s = info["totals"]["seconds"] / max(info["totals"]["steps"], 1)
    readout_s = max(info["wall_seconds"] - info["totals"]["seconds"], 0.0) / 2  # base and trained read-outs
    out("arm1_steps", info["totals"]["steps"])
    out("train_step_s", step_s)
    out("readout_s_per_item", readout_s / readout_items)
    out("projected_50_steps_plus_950_readout_s", 50 * step_s + 950 * readout_s / readout_items)


def main(argv=None) -> int:
    global WORK
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true", help="the same sequence on the CPU, smallest sizes")
    p.add_argument("--prepare", action="store_true", help="copy the tokenizer and MATH files in first")
    p.add_argument("--tokenizer", default=str(REPO.parent / "shared" / "tokenizers" / "qwen3"), help="for --prepare")
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"), help="for --prepare")
    p.add_argument("--work", default=str(WORK), help="the work folder (default .gpu_check/ in the repository)")
    p.add_argument("--readout-items", type=int, default=None, help="MATH-500 items read out (GPU 64, dry run 2)")
    p.add_argument("--skip", default="", help="parts to leave out: install,tests,engine,arm1")
    args = p.parse_args(argv)
    WORK = Path(args.work).resolve()
    started = time.perf_counter()
    if args.prepare:
        prepare(Path(args.tokenizer), Path(args.data))
    if not (WORK / "tokenizer").is_dir() or not (WORK / "data" / "math500.jsonl").is_file():
        print(f"{WORK} lacks tokenizer/ or data/: run with --prepare where ../shared is", file=sys.stderr)
        return 2
    skip = set(filter(None, args.skip.split(",")))
    out("mode", "dry_run_cpu" if args.dry_run else "gpu")
    for name, fn in (("install", lambda: install(args.dry_run)), ("tests", gpu_tests),
                     ("engine", lambda: engine_bench(args.dry_run)),
                     ("arm1", lambda: arm1_run(args.dry_run, args.readout_items or (2 if args.dry_run else 64)))):
        if name not in skip:
            part(name, fn)
    print("== summary", flush=True)
    for key in sorted(k for k in figures if k.startswith("engine.decode_ms_per_step_b8_")):
        out(key.removeprefix("engine."), figures[key])
    for key in ("train_step_s", "projected_50_steps_plus_950_readout_s"):
        if key in figures:
            out(key, figures[key])
    out("elapsed_s_total", time.perf_counter() - started)
    return 0 if all(figures.get(f"{n}_ok") == "True" for n in ("install", "tests", "engine", "arm1") if n not in skip) else 1


if __name__ == "__main__":
    sys.exit(main())

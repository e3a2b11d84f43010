"""The GPU check, in one call on a machine with one NVIDIA GPU, its own torch, and no network.

    python bench/gpu_check.py --prepare        # here, where ../shared and PyPI are: fills .gpu_check/, runs nothing
    python bench/gpu_check.py                  # there, from the repository root, carrying .gpu_check (< 9 minutes)
    python bench/gpu_check.py --dry-run        # here: the same sequence on the CPU at the smallest sizes

`--prepare` copies the Qwen3 tokenizer and the MATH files into `.gpu_check/` (ignored by git) and fetches the
wheels the GPU image lacks into `.gpu_check/wheels/` (`offline_site.py`: hydra-core, omegaconf, antlr4,
submitit, hydra-submitit-launcher, peft, accelerate, psutil; about 1.9 MB). The check itself runs these parts, in the order of the
value of their figures, each a process given its share of one overall deadline (`--deadline-s`, default
540) and cut off cleanly at it; every figure is printed as a `key=value` line and the summary rewritten
under `--out` (default `$OUT`, else `.gpu_check/`) as it goes, so a cut run still returns every figure it
made:

1. install: the carried wheels into `.gpu_check/site` with pip, offline (`--no-index --no-deps --target`),
   which goes first on every later part's `PYTHONPATH` with the project's `src/` (nothing is installed into
   the machine's own environment; its torch is printed before and after); every dependency imported, each
   from where it was found. The dry run installs into a clean folder the same way and blocks these
   packages from anywhere else (`offline_site.blocker`), so it proves the carried set is complete;
2. engine: `bench/bench_engine.py`'s GPU mode on a randomly initialised Qwen3-0.6B-shaped model in bf16: first
   a `torch.profiler` trace of 20 replays of the batch-8 step graph at a ~400-token context (kernels a step, their
   summed time against the wall time, the ten largest) and the graph at batch 1 / 8 / 32 and windows 256 / 1,024;
   decode ms per step for `reference` and `static` (CUDA graphs), and static drawing each token inside its step's
   graph (`decode_in_graph`), and where a static step's time goes (the
   graph replay, top-p sampling, the loop's own host work: `step_split`), greedy tokens of static against the
   reference in bf16 and in float32 (with the reference's logit margin where rows part), the Arm 1 replay,
   and the read-out schedules on 320 of the 950 items (`--cpu --quick` in the dry run);
3. arm1: a real 50-step Arm 1 run of the paper profile through `python -m rlvr_sweep` (`+arm=baseline`, bf16,
   `model.engine=static`) on that random folder with the real tokenizer, read-out included (32 MATH-500 items:
   a random model never emits EOS, so every rollout and answer runs to its cap, and the figures are upper
   bounds, labelled so): its first step, its steps, its training and wall time;
4. share: k = 1, 2, 4 short Arm 1 runs at once on the one GPU, each its own process with the same seed and its
   memory capped to 0.9 / k (`model.memory_share`): runs per hour at each k, each run's measured peak, and whether
   each run's rollouts equal the run's alone (issue 50, item 4); then k = 2 and 4 under a CUDA MPS daemon of the
   check's own, where the image has `nvidia-cuda-mps-control` and the part's time allows;
5. bigger: a Qwen3-1.7B-shaped run (random weights, bf16, 2 steps at a 256-token horizon, the reference engine, no
   read-out) in full fine-tuning with activation checkpointing and through a rank-32 LoRA adapter: each run's
   preflight memory estimate (`run.memory_plan`) beside its measured peak (`torch.cuda.max_memory_allocated`), both
   from its run.json, and its step seconds;
6. tests: the GPU-only tests (tests/rollout/test_gpu.py, test_vllm_engine.py); a run in which none of
   them passed fails (on the dry run's CPU they all skip, which is reported as that failure and expected).

Each figure the issue sets a floor for is printed beside it as a ratio (`FLOORS`; H200 bf16, 4.8 TB/s: a
decode step of Qwen3-0.6B 0.25 ms; with its KV cache 0.33 ms at batch 8, 1.03 ms at batch 32; a 50-step
Arm 1 run 7.3 s; the read-out in batches of 32, 1.03 ms a step, 23.5 s for all 950 items). A part that
fails says why in one line (the exception's type and message). Exit 0 when every part did its work (the
dry run: all but the GPU tests, which it expects to skip), 1 otherwise, 2 for bad input.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import offline_site  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / ".gpu_check"
DEPENDENCIES = ("torch", "transformers", "hydra", "omegaconf", "antlr4", "submitit", "hydra_plugins.hydra_submitit_launcher",
                "peft", "accelerate", "psutil",
                "sympy", "pandas", "pyarrow", "safetensors", "yaml", "numpy", "rlvr_sweep")
GPU_TESTS = ("tests/rollout/test_gpu.py", "tests/rollout/test_vllm_engine.py")
GPU_ONLY = "tests/rollout/test_gpu.py"  # every test of it must run and pass on the GPU (vLLM's may skip: no vLLM)
SHARES = {"install": 0.04, "engine": 0.30, "arm1": 0.30, "share": 0.12, "bigger": 0.14, "tests": 0.10}  # in order
# (seen on the H200, 2026-12-04, of 480 s: install 17-21 s; engine ~290 s with the 950-item read-out, which
# its parts' times put at about 200 s with 320 items and the float32 agreement (estimated, not yet run whole);
# arm1 82 s at 5 steps; tests 18-28 s; bigger and share (added 2026-12-05) and arm1's 50 steps (2026-12-05) not yet
# run on a GPU, their shares from their sizes)
SHARE_PROCESSES = (1, 2, 4)  # Arm 1 runs at once on the one GPU (the dry run: 1 and 2)
ENGINE_READOUT_ITEMS = 320  # of the 950: ten fixed batches of 32 (the first measured, the rest projected) and refill
FLOORS = {  # H200 bf16 (4.8 TB/s, ~790 TFLOP/s), from the arithmetic: weights + KV cache read per step
    "engine.decode_ms_per_step_b8_static": 0.33, "engine.decode_ms_per_step_b8_reference": 0.33,  # ~400-token context
    "engine.decode_ms_per_step_b32_static": 1.03, "engine.decode_ms_per_step_b32_reference": 1.03,  # ~1,024 tokens
    "engine.readout_fixed32_ms_per_step": 1.03,  # a decode step at batch 32 (the 950-item read-out: 23.5 s)
    "arm1_step_s": 7.3 / 50, "arm1_projected_50_steps_upper_bound_s": 7.3, "arm1_train_s": 7.3}
figures: dict[str, str] = {}
summary_file: Path | None = None


def out(key: str, value) -> None:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    figures[key] = text
    print(f"{key}={text}", flush=True)
    if summary_file is not None:  # rewritten whole at every figure: a cut run leaves every figure it made
        tmp = summary_file.with_name(f".{summary_file.name}.tmp")
        tmp.write_text("".join(f"{k}={v}\n" for k, v in figures.items()))
        tmp.replace(summary_file)


def one_line(text: str) -> str:
    """The line of a process's error output that names the exception (its type and message), else its last."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    raised = [line for line in lines
              if re.match(r"^(rlvr_sweep: )?[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*:", line)]
    said = [line for line in lines if line.startswith("rlvr_sweep: ")]  # e.g. "this is a bug ..." after it
    return (raised or said or lines or ["no output"])[-1][:500]


class Cut(Exception):
    """A part ran to the end of its share of the deadline."""


def sh(cmd: list[str], timeout: float, env: dict | None = None, prefix: str = "") -> subprocess.CompletedProcess:
    """Run `cmd` from the repository root; on its timeout, the figures it printed so far are kept (under
    `prefix`, as its caller would have kept them) and `Cut` is raised."""
    if timeout <= 1:
        raise Cut("no time left before the deadline")
    try:
        return subprocess.run(cmd, cwd=REPO, env=env or os.environ.copy(), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as err:
        text = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        keep_figures(text, prefix)
        raise Cut(f"cut at its share of the deadline ({timeout:.0f} s)") from None


def keep_figures(stdout: str, prefix: str = "") -> None:
    for line in stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[a-z0-9_.]+", key) and value:
            out(prefix + key, value)


class Check:
    def __init__(self, args):
        self.args, self.dry = args, args.dry_run
        self.site, self.wheels = WORK / ("site_dry" if self.dry else "site"), WORK / "wheels"
        self.deadline = time.monotonic() + args.deadline_s

    def env(self) -> dict:
        """The environment of every part after install: the carried packages and src/ first (the dry run also
        blocks them from anywhere else)."""
        paths = [str(self.site), str(REPO / "src")]
        if self.dry:
            paths.insert(0, str(offline_site.blocker(self.site, REPO / "src", WORK / "blocker")))
        return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]),
                "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}

    def left(self, share: float) -> float:
        return min(share * self.args.deadline_s, self.deadline - time.monotonic() - 5)

    # --- the parts ------------------------------------------------------------------------------

    def install(self, budget: float) -> None:
        before = sh([sys.executable, "-c", "import torch; print(torch.__version__)"], budget).stdout.strip()
        out("torch_before", before)
        shutil.rmtree(self.site, ignore_errors=True)  # a clean target: only what is carried
        offline_site.install(self.wheels, self.site, timeout=self.left(SHARES["install"]))
        out("wheels_installed", len(list(self.site.glob("*.dist-info"))))
        probe = ("import importlib, json, torch; found = {}\n"
                 f"for m in {DEPENDENCIES!r}:\n"
                 "    try: found[m] = importlib.import_module(m).__file__ or 'namespace'\n"
                 "    except Exception as e: found[m] = f'MISSING {type(e).__name__}: {e}'\n"
                 "print(json.dumps({'torch': f'{torch.__version__} {torch.cuda.is_available()}', 'found': found}))")
        proc = sh([sys.executable, "-c", probe], self.left(SHARES["install"]), self.env())
        if proc.returncode:
            raise RuntimeError(one_line(proc.stderr))
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
        out("torch_after", seen["torch"])
        missing = [m for m, where in seen["found"].items() if where.startswith("MISSING")]
        out("dependencies_missing", ",".join(missing) or "none")
        carried = [m for m in ("hydra", "omegaconf", "antlr4", "submitit", "peft") if str(self.site) in seen["found"][m]]
        out("dependencies_from_carried_wheels", ",".join(carried))
        if before != seen["torch"].split()[0] or missing or len(carried) < 5:
            raise RuntimeError(f"torch changed ({before} -> {seen['torch']}), missing {missing}, or not carried: "
                               f"{ {m: w for m, w in seen['found'].items() if m in ('hydra', 'omegaconf')} }")

    def engine(self, budget: float) -> None:
        args = ["--cpu", "--quick"] if self.dry else [
            "--time-limit-s", str(int(budget * 0.85)), "--fixed-readout-budget-s", str(int(budget * 0.12)),
            "--readout-items", str(ENGINE_READOUT_ITEMS)]
        proc = sh([sys.executable, "bench/bench_engine.py", *args], budget, self.env(), prefix="engine.")
        keep_figures(proc.stdout, "engine.")
        if proc.returncode:
            raise RuntimeError(one_line(proc.stderr))

    def arm1(self, budget: float) -> None:
        dtype = "float32" if self.dry else "bfloat16"
        folder = self.model_folder(dtype, budget)
        steps = 2 if self.dry else 50
        root = WORK / ("runs_dry" if self.dry else "runs")
        shutil.rmtree(root, ignore_errors=True)  # a fresh run, never a skipped one
        overrides = ["+arm=baseline", f"model.path={folder}", "model.name=random_qwen3", f"model.dtype={dtype}",
                     f"train.steps={steps}", f"data.root={WORK / 'data'}", "eval.benchmarks=[math500]",
                     f"eval.limit={self.args.readout_items or (1 if self.dry else 32)}", f"run.out_root={root}",
                     f"hydra.run.dir={root}/hydra"]
        overrides += (["model.device=cpu", "model.engine=reference", "profile.length_scale=0.03125"] if self.dry
                      else ["model.device=cuda", "model.engine=static"])
        started = time.perf_counter()
        proc = sh([sys.executable, "-m", "rlvr_sweep", *overrides], self.left(SHARES["arm1"]), self.env())
        if proc.returncode:
            raise RuntimeError(one_line(proc.stderr))
        out("arm1_command_s", time.perf_counter() - started)
        run_dir = next(root.glob("*/baseline/*/run.json")).parent
        info = json.loads((run_dir / "run.json").read_text())
        import pandas as pd  # the image has it; read only once the run wrote its table

        seconds = pd.read_parquet(run_dir / "steps.parquet", columns=["step", "seconds"]).sort_values("step")["seconds"]
        later = seconds.iloc[1:] if len(seconds) > 1 else seconds
        out("arm1_steps", len(seconds))
        out("arm1_first_step_s", float(seconds.iloc[0]))
        out("arm1_step_s", float(later.mean()))
        out("arm1_train_s", float(seconds.sum()))
        out("arm1_run_wall_s", float(info["wall_seconds"]))
        out("arm1_rollout_cap", info.get("rollout_cap"))
        out("arm1_projected_50_steps_upper_bound_s", float(seconds.iloc[0] + 49 * later.mean()))

    def share(self, budget: float) -> None:
        """Item 4 of issue 50: k short Arm 1 runs at once on the one GPU (k = `SHARE_PROCESSES`), each a process of
        its own with the same seed and its memory capped to its share (`model.memory_share`, 0.9 / k: each process's
        CUDA context lies outside the cap); runs per hour at each k, each run's measured peak, and whether every run's
        rollouts (tokens, rewards, credit, every column but none of time) equal those of the run alone. Then, where
        the image has CUDA MPS and the part's time allows, k = 2 and 4 again under an MPS daemon of its own."""
        ends = time.monotonic() + budget
        if self.dry:  # the code path, cheaply: the shipped tiny model on the toy task
            overrides = ["+arm=baseline", "profile=smoke", "train.steps=2", "eval=none"]
        else:
            folder = self.model_folder("bfloat16", budget)
            overrides = ["+arm=baseline", f"model.path={folder}", "model.name=random_qwen3", "model.dtype=bfloat16",
                         "train.steps=3", f"data.root={WORK / 'data'}", "eval=none", "model.device=cuda",
                         "model.engine=static", "profile.length_scale=0.25"]
        ks = SHARE_PROCESSES[:2] if self.dry else SHARE_PROCESSES
        alone, walls = None, {}
        for k in ks:
            alone, walls[k] = self._share_round(k, overrides, self.env(), "share", alone, ends)
        mps = self._mps_env()
        if mps is None:
            return
        env, control = mps
        try:
            for k in ks[1:]:
                if ends - time.monotonic() < 1.5 * walls[k]:
                    out(f"share_mps_k{k}", "not run: the part's time is spent")
                    continue
                try:
                    self._share_round(k, overrides, env, "share_mps", alone, ends)
                except RuntimeError as err:  # MPS is what the image allows: its failure is a figure, not the part's
                    out(f"share_mps_k{k}_error", one_line(str(err)))
        finally:
            subprocess.run([control], input="quit\n", env=env, capture_output=True, text=True, timeout=30)

    def _share_round(self, k: int, overrides: list[str], env: dict, tag: str, alone, ends: float):
        """k runs at once; prints `<tag>_k<k>_*` figures. Returns (the first rollouts table seen, the round's wall)."""
        import pandas as pd  # the image has it

        roots = [WORK / f"runs_{tag}{'_dry' if self.dry else ''}_{k}_{i}" for i in range(k)]
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)
        capped = [f"model.memory_share={0.9 / k:.3f}"] if k > 1 else []
        started = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-m", "rlvr_sweep", *overrides, *capped, f"run.out_root={root}",
                                   f"hydra.run.dir={root}/hydra"], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for root in roots]
        errors = []
        try:
            for p in procs:
                _, err = p.communicate(timeout=max(1.0, ends - time.monotonic() - 1))
                errors.append(err if p.returncode else "")
        finally:
            for p in procs:
                p.kill()
        wall = time.perf_counter() - started
        if any(errors):
            raise RuntimeError(f"k={k}: {one_line(next(e for e in errors if e))}")
        out(f"{tag}_k{k}_wall_s", wall)
        out(f"{tag}_k{k}_runs_per_hour", k * 3600 / wall)
        runs = [next(root.glob("**/baseline/*/run.json")).parent for root in roots]
        tables = [pd.read_parquet(run / "rollouts.parquet") for run in runs]
        alone = tables[0] if alone is None else alone
        out(f"{tag}_k{k}_results_unchanged", all(t.equals(alone) for t in tables))
        peaks = [json.loads((run / "run.json").read_text()).get("memory", {}).get("measured_peak") for run in runs]
        if all(peaks):
            out(f"{tag}_k{k}_peak_gib_max", max(peaks) / 2**30)
        return alone, wall

    def _mps_env(self) -> tuple[dict, str] | None:
        """(the runs' environment, the control binary) with a CUDA MPS daemon of this check's own started; None, and
        a `share_mps` line saying why, where none can be."""
        control = shutil.which("nvidia-cuda-mps-control")
        if self.dry or control is None:
            out("share_mps", "not run: " + ("the dry run has no GPU" if self.dry else "no nvidia-cuda-mps-control"))
            return None
        import tempfile  # a short path: the daemon's pipes are Unix sockets (at most 108 bytes a path)

        base = Path(tempfile.mkdtemp(prefix="gpu_check_mps_"))
        pipe, logs = base / "pipe", base / "log"
        for folder in (pipe, logs):
            folder.mkdir()
        env = {**self.env(), "CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_MPS_LOG_DIRECTORY": str(logs)}
        proc = subprocess.run([control, "-d"], env=env, capture_output=True, text=True, timeout=30)
        if proc.returncode:
            out("share_mps", f"not run: nvidia-cuda-mps-control -d exit {proc.returncode}: "
                             f"{one_line(proc.stdout + proc.stderr)}")
            return None
        out("share_mps", "daemon started")
        return env, control

    def bigger(self, budget: float) -> None:
        dtype = "float32" if self.dry else "bfloat16"
        folder = self.model_folder(dtype, budget, "qwen3_1_7b_base")
        for case, extra in (("full", ["train.activation_checkpointing=true"]), ("lora", ["lora.rank=32"])):
            root = WORK / f"runs_{case}{'_dry' if self.dry else ''}"
            shutil.rmtree(root, ignore_errors=True)
            overrides = ["+arm=baseline", f"model.path={folder}", "model.name=random_qwen3_1_7b", f"model.dtype={dtype}",
                         "train.steps=2", f"data.root={WORK / 'data'}", "eval=none", "model.engine=reference",
                         f"run.out_root={root}", f"hydra.run.dir={root}/hydra", *extra]
            overrides += ["model.device=cpu", "profile.length_scale=0.03125"] if self.dry else \
                ["model.device=cuda", "profile.length_scale=0.5"]
            proc = sh([sys.executable, "-m", "rlvr_sweep", *overrides], self.left(SHARES["bigger"]) / 2, self.env())
            if proc.returncode:
                raise RuntimeError(f"{case}: {one_line(proc.stderr)}")
            info = json.loads(next(root.glob("*/baseline/*/run.json")).read_text())
            memory = info.get("memory", {})
            estimate = memory.get("estimate", {}).get("peak")
            out(f"bigger_{case}_estimate_gib", estimate / 2**30 if estimate else None)
            out(f"bigger_{case}_estimate_phase", memory.get("estimate", {}).get("phase"))
            measured = memory.get("measured_peak")
            out(f"bigger_{case}_measured_peak_gib", measured / 2**30 if measured else None)
            if estimate and measured:
                out(f"bigger_{case}_estimate_over_measured", estimate / measured)
            out(f"bigger_{case}_run_wall_s", info["wall_seconds"])

    def model_folder(self, dtype: str, budget: float, name: str = "qwen3_0_6b_base") -> Path:
        """A randomly initialised Qwen3 folder of the shape of `name` (a `policy.architecture.CONFIGS` entry; 2 layers
        of width 64 in the dry run), the real tokenizer beside it; made in a process of its own (the parts never
        import torch here)."""
        folder = WORK / (f"model_small_{name}" if self.dry else f"model_{name}")
        if (folder / "config.json").is_file():
            return folder
        small = "dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, " \
                "num_key_value_heads=2, head_dim=16)" if self.dry else "{}"
        code = ("import torch; from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM\n"
                "from rlvr_sweep.policy.architecture import CONFIGS\n"
                f"shape = {{**dict(CONFIGS[{name!r}]), **{small}}}; shape.pop('architectures', None)\n"
                "torch.manual_seed(0)\n"
                f"Qwen3ForCausalLM(Qwen3Config(**shape)).to(torch.{dtype}).save_pretrained({str(folder)!r})\n"
                f"AutoTokenizer.from_pretrained({str(WORK / 'tokenizer')!r}).save_pretrained({str(folder)!r})")
        proc = sh([sys.executable, "-c", code], budget, self.env())
        if proc.returncode:
            raise RuntimeError(f"the random model folder: {one_line(proc.stderr)}")
        return folder

    def tests(self, budget: float) -> None:
        report = WORK / "gpu_tests.xml"
        report.unlink(missing_ok=True)
        proc = sh([sys.executable, "-m", "pytest", "-q", "-rs", "-o", "addopts=", "-p", "no:cacheprovider",  # serial: no xdist there
                   f"--junitxml={report}",
                   *GPU_TESTS], budget, self.env())
        outcomes = test_outcomes(report) if report.is_file() else {}
        counts = {k: sum(v == k for v in outcomes.values()) for k in ("passed", "failed", "skipped")}
        out("gpu_tests", ", ".join(f"{n} {k}" for k, n in counts.items()) if outcomes else one_line(proc.stdout + proc.stderr))
        for line in proc.stdout.splitlines():
            if line.startswith(("FAILED", "SKIPPED", "ERROR")):
                print(f"  {line}", flush=True)
        gpu_only = {t: o for t, o in outcomes.items() if t.startswith(GPU_ONLY.removesuffix(".py").replace("/", "."))}
        out("gpu_only_tests", ", ".join(f"{t.rsplit('.', 1)[-1]} {o}" for t, o in sorted(gpu_only.items())))
        if proc.returncode not in (0, 5) or counts["failed"]:
            raise RuntimeError(f"pytest exit {proc.returncode}: {one_line(proc.stdout + proc.stderr)}")
        if not gpu_only or any(o != "passed" for o in gpu_only.values()):
            raise RuntimeError(f"{sum(o == 'skipped' for o in gpu_only.values())} of {len(gpu_only)} tests of "
                               f"{GPU_ONLY} skipped or failed: a GPU check whose GPU tests did not run checked nothing")

    # --- the whole sequence ---------------------------------------------------------------------

    def run(self) -> int:
        out("mode", "dry_run_cpu" if self.dry else "gpu")
        skip = set(filter(None, self.args.skip.split(",")))
        for name in SHARES:
            if name in skip:
                continue
            started, budget = time.perf_counter(), self.left(SHARES[name])
            try:
                getattr(self, name)(budget)
                out(f"{name}_ok", True)
            except Exception as err:  # noqa: BLE001  (one expensive call: report in one line and go on)
                out(f"{name}_ok", False)
                out(f"{name}_error", f"{type(err).__name__}: {err}".replace("\n", " ")[:500])
            out(f"{name}_s", time.perf_counter() - started)
        print("== summary", flush=True)
        wanted = (r"engine\.(decode_ms_per_step|readout_fixed32_ms|readout_s|readout_tokens_per_s|arm1_projected|trace_|"
                  r"graph_ms_per_step|in_graph_sampling_speedup|compile_first_call|compiled_step_speedup|"
                  r"greedy_|peak_gpu|cuda_graph_speedup|static_vs_hf|step_split)")
        for key in sorted(k for k in figures if re.match(wanted, k)):
            out(key, figures[key])
        for key, floor in FLOORS.items():
            if key in figures:
                out(f"{key}_over_floor", float(figures[key]) / floor)
        out("elapsed_s_total", self.args.deadline_s - (self.deadline - time.monotonic()))
        expected = {n for n in SHARES if n not in skip} - ({"tests"} if self.dry else set())
        return 0 if all(figures.get(f"{n}_ok") == "True" for n in expected) else 1


def test_outcomes(report: Path) -> dict[str, str]:
    """{classname.name: passed | failed | skipped} from pytest's junit XML report."""
    import xml.etree.ElementTree as ET

    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        outcome = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        outcomes[f"{case.get('classname')}.{case.get('name')}"] = outcome
    return outcomes


def prepare(tokenizer: Path, data: Path) -> None:
    """Fill the work folder to carry: the tokenizer, the MATH files, the wheels the image lacks."""
    missing = [p for p in (tokenizer / "vocab.json", data / "math500.jsonl", data / "math_train.jsonl") if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"--prepare: {', '.join(map(str, missing))} not found (--tokenizer, --data)")
    (WORK / "data").mkdir(parents=True, exist_ok=True)
    shutil.copytree(tokenizer, WORK / "tokenizer", dirs_exist_ok=True)
    for name in ("math_train.jsonl", "math500.jsonl"):
        shutil.copy2(data / name, WORK / "data" / name)
    shutil.rmtree(WORK / "wheels", ignore_errors=True)  # one version of each, never an older one beside
    wheels = offline_site.fetch(WORK / "wheels")
    size = sum(w.stat().st_size for w in wheels)
    print(f"prepared {WORK}: tokenizer, data, {len(wheels)} wheels ({size / 1024:.0f} KiB): "
          + ", ".join(w.name for w in wheels), flush=True)


def main(argv=None) -> int:
    global WORK, summary_file
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true", help="the same sequence on the CPU, smallest sizes")
    p.add_argument("--prepare", action="store_true", help="only fill the work folder (tokenizer, data, wheels)")
    p.add_argument("--tokenizer", default=str(REPO.parent / "shared" / "tokenizers" / "qwen3"), help="for --prepare")
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"), help="for --prepare")
    p.add_argument("--work", default=str(WORK), help="the work folder (default .gpu_check/ in the repository)")
    p.add_argument("--out", default=os.environ.get("OUT") or None, help="where the summary is written (default $OUT)")
    p.add_argument("--deadline-s", type=float, default=None,
                   help="the whole check's time (default 540; the dry run's on a CPU, 1500)")
    p.add_argument("--readout-items", type=int, default=None, help="MATH-500 items the Arm 1 run reads out")
    p.add_argument("--skip", default="", help=f"parts to leave out: {','.join(SHARES)}")
    args = p.parse_args(argv)
    WORK = Path(args.work).resolve()
    if args.prepare:
        try:
            prepare(Path(args.tokenizer), Path(args.data))
        except (OSError, RuntimeError) as err:
            print(f"gpu_check: {err}", file=sys.stderr)
            return 2
        return 0
    lacking = [p for p in (WORK / "tokenizer", WORK / "data" / "math500.jsonl", WORK / "wheels") if not p.exists()]
    if lacking:
        print(f"gpu_check: {', '.join(map(str, lacking))} missing: run `python bench/gpu_check.py --prepare` where "
              "../shared and PyPI are, and carry .gpu_check", file=sys.stderr)
        return 2
    args.deadline_s = args.deadline_s or (1500.0 if args.dry_run else 540.0)  # a CPU's parts take longer shares
    summary_file = Path(args.out or WORK) / "gpu_check_summary.txt"
    summary_file.parent.mkdir(parents=True, exist_ok=True)
    return Check(args).run()


if __name__ == "__main__":
    sys.exit(main())

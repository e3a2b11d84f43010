"""rlvr_sweep beside TRL's `GRPOTrainer` on the CPU, paired: seconds per optimizer step of the same training.

TRL is a bench-only extra, never a dependency of rlvr_sweep: where it is not installed this says so in one line and
stops (exit 0). Both sides train the shipped tiny Qwen3 checkpoint (float32, one torch thread) on the toy arithmetic
rows, one question a step, 8 rollouts of up to 64 tokens at temperature 0.8 / top-p 0.9, the verifier's `\\boxed`
correctness reward (rlvr_sweep's `ungated`, called by both), beta = 0, one pass, AdamW at lr 5e-5: rlvr_sweep as a
user runs it (`python -m rlvr_sweep +arm=baseline profile=smoke`, read-outs off, tables and checkpoint written only at
the end), TRL through `GRPOTrainer` with saving and reporting off and two of its defaults turned back to the same
settings (`bf16=False`: float32; `gradient_checkpointing=False`: nothing recomputed). Each round runs each side
once, in its own process, in turn (`--rounds`, alternating which goes first); a side's figure is the median over its
rounds of the median seconds per step after the first `--skip` steps (rlvr_sweep: the steps table's `seconds`, draw
to ledger row; TRL: the gap between consecutive `on_step_end` callbacks). Prints ``key=value`` lines, the ratio
TRL / rlvr_sweep last.

    PYTHONPATH=src python bench/bench_vs_trl.py                 # 3 rounds of 30 steps, a few minutes
    PYTHONPATH=src python bench/bench_vs_trl.py --rounds 1 --steps 12
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = "pkg:rlvr_sweep.policy/assets/tiny_qwen3"
G, MAX_NEW, LR, TEMPERATURE, TOP_P = 8, 64, 5e-5, 0.8, 0.9


def rlvr_side(steps: int, out: Path) -> list[float]:
    """rlvr_sweep through its entrypoint; the steps table's seconds per step."""
    args = [sys.executable, "-m", "rlvr_sweep", "+arm=baseline", "profile=smoke", f"train.steps={steps}",
            "eval.before=false", "eval.after=false", f"train.write_every={steps}", f"train.checkpoint_every={steps}",
            "train.save_model=false", f"run.out_root={out}"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(args, cwd=out, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"rlvr_sweep failed:\n{proc.stderr[-3000:]}")
    import pandas as pd

    (table,) = out.rglob("steps.parquet")
    return pd.read_parquet(table)["seconds"].tolist()


def trl_side(steps: int) -> list[float]:
    """TRL's GRPOTrainer in this process; the seconds between consecutive optimizer steps."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rlvr_sweep.config import ModelConfig
    from rlvr_sweep.data import toy_arith
    from rlvr_sweep.data.prompts import render_prompt
    from rlvr_sweep.policy.source import resolve_model_folder
    from rlvr_sweep.reward import grading
    from rlvr_sweep.reward.gate import ungated

    torch.set_num_threads(1)
    folder = resolve_model_folder(ModelConfig(name="tiny", hub_id=None, path=TINY, dtype="float32", device="cpu"))
    rows = toy_arith.load_split("train", 200)
    data = Dataset.from_list([{"prompt": render_prompt(r["problem"]), "answer": r["answer"]} for r in rows])
    grading.warm_up()

    def reward(prompts, completions, answer, **_):
        return [float(ungated([c], a)[0][0]) for c, a in zip(completions, answer)]

    ends: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            ends.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as tmp:
        config = GRPOConfig(output_dir=tmp, per_device_train_batch_size=G, num_generations=G, max_completion_length=MAX_NEW,
                            temperature=TEMPERATURE, top_p=TOP_P, beta=0.0, num_iterations=1, learning_rate=LR,
                            max_steps=steps, gradient_accumulation_steps=1, use_cpu=True, report_to=[],
                            save_strategy="no", logging_steps=10**6, seed=42, dataloader_num_workers=0,
                            bf16=False, gradient_checkpointing=False)  # float32, nothing recomputed: as rlvr_sweep
        trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32),
                              processing_class=AutoTokenizer.from_pretrained(folder), reward_funcs=reward,
                              args=config, train_dataset=data, callbacks=[Clock()])
        start = time.perf_counter()
        trainer.train()
    return [b - a for a, b in zip([start, *ends], ends)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--skip", type=int, default=2, help="first steps left out of each side's median (warm-up)")
    parser.add_argument("--side", choices=("trl", "rlvr"), help=argparse.SUPPRESS)  # one side, in a process of its own
    a = parser.parse_args()
    if a.side == "trl":
        print(json.dumps(trl_side(a.steps)))
        return
    try:
        import trl
    except ImportError:
        print("bench_vs_trl: TRL is not installed (pip install trl, a bench-only extra): nothing to compare with")
        return
    import torch
    import transformers

    print(f"trl={trl.__version__} transformers={transformers.__version__} torch={torch.__version__} "
          f"rounds={a.rounds} steps={a.steps} skip={a.skip}")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    medians: dict[str, list[float]] = {"trl": [], "rlvr_sweep": []}
    for r in range(a.rounds):
        for side in (("trl", "rlvr_sweep") if r % 2 == 0 else ("rlvr_sweep", "trl")):
            if side == "trl":
                proc = subprocess.run([sys.executable, __file__, "--side", "trl", "--steps", str(a.steps)], env=env,
                                      capture_output=True, text=True)
                if proc.returncode:
                    raise SystemExit(f"TRL failed:\n{proc.stderr[-3000:]}")
                seconds = json.loads(proc.stdout.strip().splitlines()[-1])
            else:
                with tempfile.TemporaryDirectory() as tmp:
                    seconds = rlvr_side(a.steps, Path(tmp))
            medians[side].append(statistics.median(seconds[a.skip:]))
            print(f"round={r} side={side} s_per_step={medians[side][-1]:.4f} steps={len(seconds)}", flush=True)
    trl_s, ours = statistics.median(medians["trl"]), statistics.median(medians["rlvr_sweep"])
    print(f"trl_s_per_step={trl_s:.4f}")
    print(f"rlvr_sweep_s_per_step={ours:.4f}")
    print(f"ratio_trl_over_rlvr_sweep={trl_s / ours:.2f} (goal >= 3)")


if __name__ == "__main__":
    main()

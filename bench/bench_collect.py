"""Collate time of `rlvr_sweep.store.collect` on a synthetic sweep store.

Writes N run folders (default 1000) shaped like real smoke runs: each has 50 steps, 400 rollouts,
200 pairs and 400 grades rows, a run.json and a DONE marker; then times `collect(root)`.

    python bench/bench_collect.py --runs 1000 --root /tmp/bench_store
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from rlvr_sweep import store as results


def fake_run(root: Path, i: int, n_steps: int) -> None:
    arm, seed = f"arm{i % 19}", i
    run_dir = root / "smoke" / arm / f"h512_s{seed}_{i:08x}"
    run_dir.mkdir(parents=True)
    keys = {"arm": arm, "horizon": 512, "seed": seed, "run_hash": f"{i:08x}", "paper_arm": "",
            "rollout_cap": 64, "readout_cap": 256}
    steps = [{"step": s, "question_id": f"q{s}", "rewards": [1.0, 0.0] * 4, "mean_reward": 0.5, "active": True,
              "std": 0.53, "action": "backward_step", "grad_norm": 1.0, "gen_tokens": 400, "prefill_tokens": 80,
              "padded_prefill_tokens": 80, "untrimmed_steps": 400, "bwd_out_tokens": 400, "bwd_full_tokens": 480,
              "seconds": 0.1} for s in range(n_steps)]
    rollouts = [{"step": s, "index": j, "k": j // 2, "b": j % 2, "question_id": f"q{s}", "gold": "7", "prefix_len": 0,
                 "length": 50, "reward": 1.0, "correct": 1.0, "finished": True, "capped": False, "text": "x" * 120,
                 "first_box_token": 40, "audit_prefix_text": None}
                for s in range(n_steps) for j in range(8)]
    pairs = [{"step": s, "k": k, "category": "flat", "tau": 0, "pl0": 0, "pl1": 0, "l0": 50, "l1": 50, "r0": 1.0,
              "r1": 0.0, "stage1_leaf_tokens": 100, "stage2_generated": 0} for s in range(n_steps) for k in range(4)]
    grades = [{"phase": ph, "benchmark": "toy_heldout", "source": "toy_heldout", "item_id": f"t{j}", "length": 40,
               "finished": True, "capped": False, "has_box": True, "capped_unboxed": False, "inc_trunc": False,
               "extracted": "7", "gold": "7", "correct": True, "response": "y" * 80}
              for ph in ("base", "trained") for j in range(200)]
    for name, rows in (("steps", steps), ("rollouts", rollouts), ("pairs", pairs), ("grades", grades)):
        results.write_table(run_dir, name, rows, keys)
    (run_dir / results.RUN_JSON).write_text(json.dumps({**keys, "status": "finished", "run_dir": str(run_dir)}))
    results.finish(run_dir)  # manifest + DONE, as a finished run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--root", default="/tmp/rlvr_bench_store")
    args = parser.parse_args()
    root = Path(args.root)
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    for i in range(args.runs):
        fake_run(root, i, args.steps)
    print(f"wrote {args.runs} runs in {time.perf_counter() - started:.1f}s")
    started = time.perf_counter()
    tables = results.collect(root)
    elapsed = time.perf_counter() - started
    print(" ".join(f"{name}={len(frame)}" for name, frame in tables.items()))
    print(f"collect_seconds={elapsed:.2f} runs={len(tables['runs'])}")


if __name__ == "__main__":
    main()

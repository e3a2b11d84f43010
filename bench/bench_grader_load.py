"""Latency of `rlvr_sweep.reward.grade` under concurrent hostile load.

THREADS threads each make CALLS calls, mixing power towers and huge expansions (which must time out)
with ordinary answers from the baseline spec; every call's latency is measured from the moment it is
called, so time spent waiting for a free sympy worker counts. Prints the latency percentiles, the
worst call, how many calls timed out, and the pool's counters. Then THREADS simultaneous `9**9**9`.
`--cold` skips the warm-up, as a new process's first grades do: the first calls may wait for the first
worker's imports (never charged to their limit), and the latency past that moment is printed too.

    python bench/bench_grader_load.py --threads 8 --calls 200 --limit 5
    python bench/bench_grader_load.py --threads 16 --calls 2 --limit 5 --cold
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from rlvr_sweep.reward import grading

HOSTILE = ["9**9**9", "9^9^9^9", "2**2**2**2**2**2", "(x+1)**100000 - y", "factorial(10**8)"]
ORDINARY = [("2", "2.0"), ("0.5", r"\frac{1}{2}"), ("(3, -1)", "(3,-1)"), ("x^2+2x+1", "(x+1)^2"),
            (r"\sqrt{2}/2", r"\frac{1}{\sqrt{2}}"), ("2", "3"), ("10%", "10"), (r"\$42409", "42409")]


READY_AT: list[float] = []  # --cold: when the first worker finished its imports


def timed(pred: str, gold: str, limit: float) -> tuple[float, bool]:
    start = time.monotonic()
    grading.grade(pred, gold, timeout_s=limit)
    end = time.monotonic()
    return (end - max(start, READY_AT[0]) if READY_AT and args_cold else end - start), pred in HOSTILE


args_cold = False


def watch_ready() -> None:
    """--cold: note when the pool's first worker is ready (its imports are not charged to any call)."""
    while not grading._WORKER._ready:
        time.sleep(0.002)
    READY_AT.append(time.monotonic())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--calls", type=int, default=50, help="calls per thread")
    parser.add_argument("--limit", type=float, default=grading.SYMBOLIC_TIMEOUT_S)
    parser.add_argument("--hostile", type=float, default=0.3, help="fraction of hostile calls")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cold", action="store_true", help="no warm-up: the first calls start the pool")
    args = parser.parse_args()
    global args_cold
    args_cold = args.cold
    rng = random.Random(args.seed)
    calls = [(rng.choice(HOSTILE), "1") if rng.random() < args.hostile else rng.choice(ORDINARY)
             for _ in range(args.threads * args.calls)]
    if args.cold:
        watcher = threading.Thread(target=watch_ready, daemon=True)
        watcher.start()
    else:
        grading.warm_up()
    before = grading.stats()
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.threads) as pool:
        out = list(pool.map(lambda c: timed(*c, args.limit), calls))
    wall = time.monotonic() - started
    if args.cold:
        print(f"cold pool: the first worker was ready {READY_AT[0] - started:.2f} s after the first calls; "
              "latencies below are counted from then for calls made before it")
    lat = sorted(t for t, _ in out)
    q = statistics.quantiles(lat, n=100)
    print(f"{len(out)} calls from {args.threads} threads, limit {args.limit:.1f} s, pool of "
          f"{grading._WORKER.size} workers, {wall:.1f} s wall")
    print(f"latency: p50 {q[49]:.3f} s  p90 {q[89]:.3f} s  p99 {q[98]:.3f} s  max {lat[-1]:.3f} s "
          f"(limit + {lat[-1] - args.limit:+.3f} s)")
    print(f"ordinary calls: max {max((t for t, h in out if not h), default=0):.3f} s; "
          f"hostile calls: max {max((t for t, h in out if h), default=0):.3f} s")
    after = grading.stats()
    print("pool counters:", {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)})
    with ThreadPoolExecutor(max_workers=args.threads) as pool:
        burst = list(pool.map(lambda _: timed("9**9**9", "1", args.limit)[0], range(args.threads)))
    print(f"{args.threads} simultaneous 9**9**9: " + ", ".join(f"{t:.2f}" for t in sorted(burst)) + " s")


if __name__ == "__main__":
    main()

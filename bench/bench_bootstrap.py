"""CPU cost of one bootstrap interval (`analysis.stats.bootstrap_ci`), the unit `analysis tables` repeats for
every arm row and benchmark: 4,000 resamples (the paper's) of a seeds x items grid of 0/1 outcomes, by each
method (two-level, question, flat).

    python bench/bench_bootstrap.py [--seeds 3] [--items 950] [--resamples 4000] [--repeats 5]

Prints one line per method: the first interval's seconds (`s_first`: its random indices drawn) and the
median of the other --repeats (`s_kept_median`: every later arm row of a table reuses the kept draws of
`stats._kept`, so this is what most intervals cost), and the interval itself, so a change that alters the
numbers shows here as well as in the tests.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from rlvr_sweep.analysis.stats import METHODS, bootstrap_ci


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--items", type=int, default=950, help="the Pool950's items")
    p.add_argument("--resamples", type=int, default=4000)
    p.add_argument("--repeats", type=int, default=5, help="intervals per method (the first draws, the rest reuse)")
    args = p.parse_args(argv)
    grid = np.random.default_rng(0).integers(0, 2, size=(args.seeds, args.items)).astype(float)
    print(f"grid={args.seeds}x{args.items} resamples={args.resamples} repeats={args.repeats}", flush=True)
    for method in METHODS:
        seconds = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            ci = bootstrap_ci(grid, method, args.resamples)
            seconds.append(time.perf_counter() - started)
        kept = statistics.median(seconds[1:]) if len(seconds) > 1 else float("nan")
        print(f"{method}: s_first={seconds[0]:.4f} s_kept_median={kept:.4f} mean={ci[0]:.4f} lower={ci[1]:.4f} "
              f"upper={ci[2]:.4f}", flush=True)


if __name__ == "__main__":
    main()

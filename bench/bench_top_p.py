"""CPU cost of the nucleus (top-p) filter per decode step at Qwen3's vocabulary: the full sort against
the candidate set (`rollout.nucleus.top_p_filter`), which returns the same tensor.

    python bench/bench_top_p.py [--batch 8] [--repeats 30]

Prints key=value lines: milliseconds per step (median of --repeats) for a peaked step (a trained
model's usual one: a few tokens hold most of the mass), a step at temperature 1 over a wider
distribution, and a flat one (no small candidate set reaches top_p: the full sort decides, so the
candidate path's cost is the full sort's plus the failed tries).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlvr_sweep.rollout.nucleus import top_p_filter, top_p_sorted

VOCAB = 151_936


def logits_of(kind: str, batch: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(batch, VOCAB, generator=g)
    if kind == "peaked":
        logits[:, :40] += torch.linspace(12, 4, 40)
    elif kind == "wide":
        logits[:, :2000] += torch.linspace(6, 2, 2000)
    elif kind == "flat":
        logits *= 0.01
    return logits.to(torch.bfloat16)


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - t))
    return statistics.median(times)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--top-p", type=float, default=0.9)
    args = p.parse_args(argv)
    print(f"vocab={VOCAB} batch={args.batch} dtype=bfloat16 top_p={args.top_p} threads={torch.get_num_threads()}")
    for kind, temperature in (("peaked", 0.6), ("wide", 1.0), ("flat", 1.0)):
        probs = torch.softmax(logits_of(kind, args.batch) / temperature, dim=-1)
        assert torch.equal(top_p_filter(probs, args.top_p), top_p_sorted(probs, args.top_p))
        full = median_ms(lambda: top_p_sorted(probs, args.top_p), args.repeats)
        cand = median_ms(lambda: top_p_filter(probs, args.top_p), args.repeats)
        print(f"{kind}_full_sort_ms={full:.2f} {kind}_candidates_ms={cand:.2f} {kind}_speedup={full / cand:.1f}x")


if __name__ == "__main__":
    main()

"""CPU cost of the nucleus (top-p) filter per decode step: the full sort (`rollout.nucleus.top_p_sorted`)
against `rollout.nucleus.top_p_filter` (candidate sets where they are cheaper), which returns the same
tensor, at Qwen3's vocabulary (151,936) and the smoke profile's tiny model's (400).

    python bench/bench_top_p.py [--vocab 151936 400] [--batch 8 32] [--dtype bfloat16] [--repeats 30]
    python bench/bench_top_p.py --sweep     # where the candidate path starts to pay: FULL_SORT_MAX_VOCAB

Prints key=value lines, one line per (vocab, batch, distribution): milliseconds per step (median of
--repeats) for a peaked step (a trained model's usual one: a few tokens hold most of the mass), a
step at temperature 1 over a wider distribution, and a flat one (no small candidate set reaches
top_p: the full sort decides). ``--sweep`` times the candidate path itself (the vocabulary gate
lifted) against the full sort over vocabularies from 400 to 151,936, which is how
`nucleus.VOCAB_PER_CANDIDATE` (and so `FULL_SORT_MAX_VOCAB`) was chosen. Every figure's filter is first checked bit for bit
against the full sort.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlvr_sweep.rollout import nucleus
from rlvr_sweep.rollout.nucleus import top_p_filter, top_p_sorted

VOCAB = 151_936
KINDS = (("peaked", 0.6), ("wide", 1.0), ("flat", 1.0))  # (distribution, temperature)


def logits_of(kind: str, batch: int, vocab: int = VOCAB) -> torch.Tensor:
    """float32 (batch, vocab) logits; the caller casts them (the real model's are bf16)."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(batch, vocab, generator=g)
    if kind == "peaked":
        logits[:, :40] += torch.linspace(12, 4, 40)
    elif kind == "wide":
        n = min(2000, vocab // 2)
        logits[:, :n] += torch.linspace(6, 2, n)
    elif kind == "flat":
        logits *= 0.01
    return logits


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - t))
    return statistics.median(times)


def interleaved_ms(fns: dict, repeats: int) -> dict[str, float]:
    """Median ms of each function, the functions run in turn (A B A B ...) so drift hits both."""
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(1000 * (time.perf_counter() - t))
    return {name: statistics.median(ts) for name, ts in times.items()}


def candidates_forced(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """`top_p_filter` with the vocabulary rule lifted: every candidate set smaller than the vocabulary
    is tried."""
    saved = nucleus.FULL_SORT_MAX_VOCAB, nucleus.VOCAB_PER_CANDIDATE
    nucleus.FULL_SORT_MAX_VOCAB, nucleus.VOCAB_PER_CANDIDATE = 0, 1
    try:
        return top_p_filter(probs, top_p)
    finally:
        nucleus.FULL_SORT_MAX_VOCAB, nucleus.VOCAB_PER_CANDIDATE = saved


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab", type=int, nargs="+", default=[VOCAB, 400])
    p.add_argument("--batch", type=int, nargs="+", default=[8, 32])
    p.add_argument("--dtype", choices=("bfloat16", "float32"), nargs="+", default=["bfloat16"])
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--top-p", type=float, default=0.9)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--sweep", action="store_true", help="candidate path vs full sort over small vocabularies")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    gate = getattr(nucleus, "FULL_SORT_MAX_VOCAB", None)
    vocabs = [400, 1024, 2048, 4096, 8192, 16384, 32768, 65536, VOCAB] if args.sweep else args.vocab
    print(f"top_p={args.top_p} threads={torch.get_num_threads()} full_sort_max_vocab={gate}")
    for vocab in vocabs:
        for batch in args.batch:
            for dtype in args.dtype:
                figures = []
                for kind, temperature in KINDS:
                    probs = torch.softmax(logits_of(kind, batch, vocab).to(getattr(torch, dtype)) / temperature, -1)
                    fn = candidates_forced if args.sweep else top_p_filter
                    assert torch.equal(fn(probs, args.top_p), top_p_sorted(probs, args.top_p))
                    ms = interleaved_ms({"full": lambda p=probs: top_p_sorted(p, args.top_p),
                                         "filter": lambda p=probs, f=fn: f(p, args.top_p)}, args.repeats)
                    name = "candidates" if args.sweep else "filter"
                    figures.append(f"{kind}_full_sort_ms={ms['full']:.3f} {kind}_{name}_ms={ms['filter']:.3f} "
                                   f"{kind}_speedup={ms['full'] / ms['filter']:.2f}x")
                print(f"vocab={vocab} batch={batch} dtype={dtype} " + " ".join(figures), flush=True)


if __name__ == "__main__":
    main()

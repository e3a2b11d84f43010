"""The batch-size audit (seed paper §5.6 item 3, Table 5B): one checkpoint read out greedily at two
batch sizes, item by item (the paper: 905/950 grades agree between batches of 32 and 64 on Arm 12 seed 7).

Greedy read-outs of one checkpoint are its training run's own trained read-out (`sweep.grades`) and any
`task=evaluate` greedy read-out of `<run>/model` (or of the same saved folder), e.g.

    python -m rlvr_sweep task=evaluate model.path=<run>/model eval.batch_size=64

For every checkpoint read at two or more batch sizes, the reference is the 32-row read-out (else the
smallest batch) and each other batch size gives one row per benchmark: both accuracies, their paired
difference (other - reference) with a question bootstrap CI, how many items keep their grade
(`agree`) and how many their exact response (`same_response`).
"""

from __future__ import annotations

import pandas as pd

from rlvr_sweep.analysis.checkpoints import MDL_MIN_LEN, Readout, checkpoint_of, readout_cap, readouts_of
from rlvr_sweep.analysis.source import Sweep, benchmark_order
from rlvr_sweep.analysis.stats import bootstrap_ci
from rlvr_sweep.config import scaled_length

REFERENCE_BATCH = 32  # the paper's read-out batch


def greedy_readouts(sweep: Sweep, read_again: bool = False) -> dict[str, list[Readout]]:
    """{checkpoint key: its greedy read-outs}, the training run's own first. `read_again`: only the
    checkpoints that a task=evaluate run read out greedily too (the only ones with two read-outs: a
    training run reads its own checkpoint out once), so a sweep without such runs cuts no run's rows."""
    out: dict[str, list[Readout]] = {}
    evaluated = [r for r in readouts_of(sweep, "greedy") if r.batch_size is not None]
    keys = {r.key for r in evaluated}
    for _, run in sweep.runs.iterrows():
        key, label, _ = checkpoint_of(sweep, run, "trained")
        if read_again and key not in keys:
            continue
        rows = sweep.rows("grades", unit=run["unit"], seed=run["seed"], phase="trained")
        batch = run.get("eval_batch_size")
        if not len(rows) or pd.isna(batch):
            continue
        out.setdefault(key, []).append(Readout(key, label, "trained", "greedy", run["run_dir"], int(batch),
                                               readout_cap(rows, run),
                                               scaled_length(MDL_MIN_LEN, float(run.get("length_scale", 1.0))),
                                               int(run["seed"]), run, rows))
    for r in evaluated:
        out.setdefault(r.key, []).append(r)
    return out


def compare(a: pd.DataFrame, b: pd.DataFrame, n_resamples: int, seed: int) -> dict:
    """Paired comparison of two greedy read-outs' rows (aligned on benchmark and item index)."""
    both = a.merge(b, on=["benchmark", "index"], suffixes=("_a", "_b"))
    ca, cb = both["correct_a"].to_numpy(float), both["correct_b"].to_numpy(float)
    _, lo, hi = bootstrap_ci(cb - ca, "question", n_resamples, seed)
    return {"n": len(both), "acc_a": 100 * ca.mean(), "acc_b": 100 * cb.mean(), "diff": 100 * (cb - ca).mean(),
            "diff_lo": 100 * lo, "diff_hi": 100 * hi, "agree": int((ca == cb).sum()),
            "same_response": int((both["response_a"] == both["response_b"]).sum())}


def batch_audits(sweep: Sweep, n_resamples: int = 4000, seed: int = 0) -> pd.DataFrame:
    """One row per checkpoint, other batch size and benchmark (and `pool` over several benchmarks)."""
    rows = []
    for key, readouts in greedy_readouts(sweep, read_again=True).items():
        sizes = sorted({r.batch_size for r in readouts})
        if len(sizes) < 2:
            continue
        ref_size = REFERENCE_BATCH if REFERENCE_BATCH in sizes else sizes[0]
        ref = next(r for r in readouts if r.batch_size == ref_size)
        for other in sizes:
            if other == ref_size:
                continue
            oth = next(r for r in readouts if r.batch_size == other)
            names = sorted(set(ref.rows["benchmark"]) & set(oth.rows["benchmark"]), key=benchmark_order)
            for b in names + (["pool"] if len(names) > 1 else []):
                a, c = (ref.rows, oth.rows) if b == "pool" else (ref.of(b), oth.of(b))
                rows.append({"key": key, "label": ref.label, "benchmark": b, "batch_a": ref_size, "batch_b": other,
                             **compare(a, c, n_resamples, seed)})
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["key", "label", "benchmark", "batch_a", "batch_b"])

"""Read-outs by `eval.name` (see `readout` for their shared signature)."""

from __future__ import annotations

from collections.abc import Callable

from rlvr_sweep.evaluation.greedy import evaluate_greedy

READOUTS: dict[str, Callable] = {
    "greedy": evaluate_greedy,
}

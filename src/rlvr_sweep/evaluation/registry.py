"""Read-outs by `eval.name` (see `readout` for their shared signature).

- ``greedy``: one greedy response per item (paper §5.2);
- ``sampled_k3``: k (3) sampled draws per item at T 0.6, top-p 0.9 (§5.5, Table 4);
- ``fork3``: the greedy root plus deterministic low-margin forks: MinMargin-Fork@3, FirstGap05-Fork@3,
  their union (Hybrid) and the tie-gated extras (TieGated-FG05) (§5.6 item 3, Table 5B). It takes one
  more keyword, ``tie`` (the vote's tie test), which the run supplies (`run.readouts`).
"""

from __future__ import annotations

from collections.abc import Callable

from rlvr_sweep.evaluation.forks import evaluate_forks
from rlvr_sweep.evaluation.greedy import evaluate_greedy
from rlvr_sweep.evaluation.sampled import evaluate_sampled

READOUTS: dict[str, Callable] = {
    "greedy": evaluate_greedy,
    "sampled_k3": evaluate_sampled,
    "fork3": evaluate_forks,
}
NEEDS_TIE_TEST = ("fork3",)  # read-outs that stop early on a majority and so need the vote's tie test

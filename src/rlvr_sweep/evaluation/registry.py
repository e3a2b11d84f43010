"""Read-outs by `eval.name` (see `readout` for their shared signature).

- ``greedy``: one greedy response per item (paper §5.2);
- ``sampled_k3``: k (3) sampled draws per item at T 0.6, top-p 0.9 (§5.5, Table 4);
- ``fork3``: the greedy root plus deterministic low-margin forks: MinMargin-Fork@3, FirstGap05-Fork@3,
  their union (Hybrid) and the tie-gated extras (TieGated-FG05) (§5.6 item 3, Table 5B).
"""

from __future__ import annotations

from rlvr_sweep.config.options import Option, Registry
from rlvr_sweep.evaluation.forks import evaluate_forks
from rlvr_sweep.evaluation.greedy import evaluate_greedy
from rlvr_sweep.evaluation.sampled import evaluate_sampled

READOUTS = Registry("read-out", group="eval")
SAMPLED = ("draws", "temperature", "top_p", "sample_seed_offset")
FORKED = ("margin_tokens", "fork_start", "fork_end", "fork_threshold", "fork_separation", "tie_forks",
          "continuation_batch_size", "min_continuation")


def _fork_window(cfg) -> list[str]:
    e = cfg.eval
    if e.fork_start < e.fork_end <= e.margin_tokens:
        return []
    return [f"eval.fork_start={e.fork_start}, eval.fork_end={e.fork_end}, eval.margin_tokens={e.margin_tokens}: "
            "fork3 needs fork_start < fork_end <= margin_tokens (forks are picked from the margin pass)"]


def _nothing(policy, rows, **kwargs) -> list[dict]:
    return []


READOUTS.add(Option("greedy", evaluate_greedy, doc="one greedy response per item (paper §5.2)"))
READOUTS.add(Option("sampled_k3", evaluate_sampled, reads=SAMPLED, doc="k sampled draws per item (§5.5)"))
READOUTS.add(Option("fork3", evaluate_forks, reads=FORKED, check=_fork_window,
                    doc="the greedy root and low-margin forks (§5.6 item 3)"))
READOUTS.add(Option("none", _nothing, doc="no read-out"))

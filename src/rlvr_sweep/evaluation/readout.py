"""What every read-out is given, and the registry the `eval` config group names.

A read-out turns a policy and a benchmark's rows into `grades` rows. The run unpacks its config
into `ReadoutSettings` (plain values, already scaled to the profile's lengths) and calls the entry
named by `eval.name`: `fn(policy, rows, *, benchmark, phase, settings, grade, on_batch=None)`.
`on_batch(items, generated_tokens)` reports progress. Every row holds at least the columns of
`store.schema`'s `grades` table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ReadoutSettings:
    max_new_tokens: int  # the read-out cap in this profile's tokens (2048 in the paper)
    batch_size: int = 32
    schedule: str = "fixed"  # evaluation.schedule.SCHEDULES
    slots: int | None = None  # refill rows (None: batch_size)
    engine: str = "reference"  # rollout.ENGINES
    seed: int = 0  # the run's seed (sampled read-outs seed their draws from it)
    length_scale: float = 1.0  # profile.length_scale, for read-outs with paper-unit constants


def get_readout(name: str) -> Callable:
    """The read-out registered as `name`; unknown names list the valid ones."""
    from rlvr_sweep.evaluation.registry import READOUTS

    try:
        return READOUTS[name]
    except KeyError:
        raise ValueError(f"unknown read-out {name!r}; valid: {sorted(READOUTS)}") from None

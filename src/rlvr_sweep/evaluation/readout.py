"""What every read-out is given, and the registry the `eval` config group names.

A read-out turns a policy and a benchmark's rows into `grades` rows. The run unpacks its config
into `ReadoutSettings` (plain values, already scaled to the profile's lengths, and the benchmark's task's
prompt and answer extraction) and calls the entry
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
    # sampled read-outs (paper §5.5): k draws per item at T / top-p, seeded sample_seed_offset + seed
    draws: int = 3
    temperature: float = 0.6
    top_p: float = 0.9
    sample_seed_offset: int = 1000
    # fork read-outs (paper §5.6), lengths in this profile's tokens (paper: 72, [4, 64), 64, 64)
    margin_tokens: int = 72  # teacher-forced margin pass over the root's first tokens
    fork_start: int = 4  # fork window [fork_start, fork_end), zero-based positions
    fork_end: int = 64
    fork_threshold: float = 0.5  # FirstGap05: margin <= threshold (logits: not a length, never scaled)
    fork_separation: int = 2  # second fork at least this far from the first (adjacency: not scaled)
    tie_forks: int = 2  # TieGated-FG05: extra forks on a 3-way tie (0: none)
    continuation_batch_size: int = 64  # fork continuations: length-sorted batches of this many rows
    min_continuation: int = 64  # continuation steps per batch: max(min_continuation, cap - max K)
    # the benchmark's task (`data.Task`): its prompt template (None: the baseline's) and how an answer is
    # read from a response (None: MATH's last \boxed{}, else the last number; strict: the box only)
    prompt: str | None = None
    extract: Callable[[str], str] | None = None
    extract_strict: Callable[[str], str] | None = None

    def __post_init__(self):
        if not 0 <= self.fork_start < self.fork_end:
            raise ValueError(f"fork window [{self.fork_start}, {self.fork_end}) must have 0 <= start < end")
        if self.fork_end > self.margin_tokens:
            raise ValueError(f"fork window end {self.fork_end} lies past the margin pass ({self.margin_tokens} tokens)")


def accuracy_rows(rows: list[dict]) -> list[dict]:
    """The rows a read-out's accuracy averages: every response of a greedy or sampled read-out (Mean@1
    over the draws), only the greedy root of a fork read-out (its other branches are vote candidates)."""
    return [r for r in rows if r.get("branch", 0) == 0]


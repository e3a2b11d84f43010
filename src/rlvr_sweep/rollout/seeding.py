"""Per-rollout seeding (`train.rollout_seeding=per_rollout`), and the group's decoding split over ranks.

The baseline draws every rollout of a run from one generator: a row's tokens depend on every draw made
before it, so on one process they depend on the batch it was decoded in, and over several ranks every rank
must decode the whole group. With ``per_rollout`` each row of each decoding call draws from a generator of
its own, seeded by ``rollout_seed(run seed, step, call, row)``: `call` counts the sampler's decoding calls
within the step (a tree's roots, then its branches), `row` is the row's place in that call. A row's tokens
then depend only on its key and its logits, so the ranks can each decode a contiguous share of a call's rows
(`share`) and exchange them, and the group is the same at any number of ranks: the same tokens wherever the
logits are (a different batch can round a logit differently: float32 on the CPU, the tests' case, gives the
same logits; bf16 on a GPU may part two rows at a near tie, as batching does anywhere).

What is not the same at another rank count: the token accounting of the decoding (`padded_prefill_tokens`,
`untrimmed_steps`: summed over the ranks, each counts what its own batch computed).
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import asdict, fields

import torch

from rlvr_sweep.rollout.engine import Generation

def rollout_seed(seed: int, step: int, call: int, row: int) -> int:
    """A 63-bit seed for one row of one decoding call: blake2b of the four numbers, so neighbouring keys
    give unrelated streams. E.g. ``rollout_seed(42, 0, 0, 0) == 4945949205331585457``."""
    digest = hashlib.blake2b(f"{seed}/{step}/{call}/{row}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


class RowGenerators:
    """One generator per row of a decoding batch, passed where an engine takes its `generator`: row i's
    token is drawn with ``torch.multinomial`` from its own generator (`engine.sample_next_token`)."""

    def __init__(self, seeds: list[int], device) -> None:
        self.generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]

    def __len__(self) -> int:
        return len(self.generators)

    def sample(self, probs: torch.Tensor) -> torch.Tensor:
        """(B,) tokens from (B, V) probabilities, row i from generator i."""
        if probs.shape[0] != len(self.generators):
            raise ValueError(f"{probs.shape[0]} rows to sample but {len(self.generators)} row generators")
        return torch.cat([torch.multinomial(probs[i : i + 1], 1, generator=g)
                          for i, g in enumerate(self.generators)]).squeeze(-1)


def share(n: int, rank: int, size: int, multiple: int = 1) -> range:
    """The contiguous block of `n` rows that `rank` of `size` takes: blocks of ceil(n / size) rows, rounded up
    to `multiple` (a fork pair's two leaves stay on one rank); the last ranks may get fewer, or none.
    E.g. share(8, 1, 2) == range(4, 8); share(3, 1, 2) == range(2, 3); share(2, 1, 4) == range(1, 2)."""
    block = -(-n // size)
    block = -(-block // multiple) * multiple
    return range(min(n, rank * block), min(n, (rank + 1) * block))


class PerRolloutPolicy:
    """A `SamplingPolicy` over a `ModelPolicy` that seeds every row by its key, and over several ranks
    (`peers`: `run.ranks.World`) decodes this rank's share of each call and gathers the rest.
    `at_step(step)` starts a step's numbering of calls (the training loop calls it before each draw)."""

    def __init__(self, inner, seed: int, peers=None) -> None:
        self.inner, self.seed, self.peers = inner, seed, peers
        self.step = self.call = 0

    @property
    def eos_id(self) -> int:
        return self.inner.eos_id

    def has_newline(self, token_id: int) -> bool:
        return self.inner.has_newline(token_id)

    def at_step(self, step: int) -> None:
        self.step, self.call = step, 0

    def generate(self, prompts: list[list[int]], max_new_tokens: int, record_margins: bool = False) -> Generation:
        call, self.call = self.call, self.call + 1
        rank, size = (self.peers.rank, self.peers.size) if self.peers is not None else (0, 1)
        mine = share(len(prompts), rank, size)
        model = self.inner.policy.model
        rows = RowGenerators([rollout_seed(self.seed, self.step, call, i) for i in mine], self.inner.policy.device)
        decoding = self.peers.decoding(model) if self.peers is not None else contextlib.nullcontext()
        with decoding:  # over ranks: each layer's weights gathered once for the call, not once per token
            part = self.inner.generate([prompts[i] for i in mine], max_new_tokens, record_margins, generator=rows) \
                if len(mine) else empty(record_margins, self.inner.record_logprobs)
        if size == 1:
            return part
        return joined([Generation(**g) for g in self.peers.exchange(asdict(part))])


def empty(record_margins: bool, record_logprobs: bool) -> Generation:
    """The decoding of no rows."""
    rows = (lambda: []) if record_margins else (lambda: None)
    return Generation([], [], [], rows(), 0, 0, 0, 0, rows(), rows(), [] if record_logprobs else None)


def joined(parts: list[Generation]) -> Generation:
    """The ranks' shares (in rank order: contiguous blocks) as one call's Generation; counts summed."""
    out = {}
    for f in fields(Generation):
        values = [getattr(p, f.name) for p in parts]
        if isinstance(values[0], int):
            out[f.name] = sum(values)
        elif all(v is None for v in values):
            out[f.name] = None
        else:
            out[f.name] = [row for v in values for row in v]
    return Generation(**out)

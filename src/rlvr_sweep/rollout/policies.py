"""The small policy protocol the branched samplers use (seed paper §4.2), and two implementations.

A sampler needs only three things from a policy:

- ``eos_id``: the id that ends a completion;
- ``generate(prompts, max_new_tokens) -> Generation``: one sampled continuation per prompt under the
  rollout kernel (a prompt may already hold a shared stage-1 prefix), with the token accounting of
  :class:`rlvr_sweep.rollout.engine.Generation`;
- ``has_newline(token_id)``: whether the decoded text of that single token contains ``"\\n"`` (the
  causal stopping time ``tau_causal`` of §4.2 fires on such tokens).

The counterfactual fork sampler (``cf_fork``, §5.6 item 4) also calls
``generate(prompts, max_new_tokens, record_margins=True)``, which must fill ``Generation.margins`` /
``top1`` / ``top2`` (the raw top-1 minus top-2 logit gap and the two ids at every generated step).

``ModelPolicy`` wraps a loaded Hugging Face model (batched, left-padded, KV-cached decoding).
``ScriptedPolicy`` is a finite policy with exactly known next-token probabilities, so tests can check
the samplers' leaf distributions against exact enumeration ("PASS 2" of the paper) without a network.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

import torch

from rlvr_sweep.rollout.engine import Generation, generate

__all__ = ["SamplingPolicy", "ModelPolicy", "ScriptedPolicy", "newline_ids"]


@runtime_checkable
class SamplingPolicy(Protocol):
    eos_id: int

    def generate(self, prompts: list[list[int]], max_new_tokens: int,
                 record_margins: bool = False) -> Generation: ...

    def has_newline(self, token_id: int) -> bool: ...


def newline_ids(tokenizer) -> frozenset[int]:
    """Ids whose text, decoded alone, contains a newline (special tokens included, as decoded)."""
    texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))], skip_special_tokens=False)
    return frozenset(i for i, text in enumerate(texts) if "\n" in text)


class ModelPolicy:
    """A loaded :class:`rlvr_sweep.policy.Policy` sampled at fixed ``temperature`` / ``top_p``.

    Newline flags are computed once, lazily, by decoding every tokenizer id on its own; ids past the
    tokenizer (padded embedding rows) never count as newlines.
    """

    def __init__(self, policy, temperature: float | None, top_p: float | None,
                 generator: torch.Generator | None = None, generate_fn=generate, record_logprobs: bool = False):
        self.policy = policy
        # ask the engine for each sampled token's raw log-probability (the engine-trainer gap of the health signals)
        self.record_logprobs = record_logprobs
        self.temperature = temperature
        self.top_p = top_p
        self.generator = generator
        self.generate_fn = generate_fn  # an engine with `engine.generate`'s contract (`rollout.ENGINES`)
        self._newlines: frozenset[int] | None = None

    @property
    def eos_id(self) -> int:
        return self.policy.eos_id

    @property
    def newline_ids(self) -> frozenset[int]:
        if self._newlines is None:
            self._newlines = newline_ids(self.policy.tokenizer)
        return self._newlines

    def has_newline(self, token_id: int) -> bool:
        return token_id in self.newline_ids

    def generate(self, prompts: list[list[int]], max_new_tokens: int,
                 record_margins: bool = False, generator=None) -> Generation:
        """`generator`: this call's in place of the policy's own (`seeding.RowGenerators`: one per row)."""
        return self.generate_fn(
            self.policy.model, prompts, max_new_tokens=max_new_tokens, eos_id=self.policy.eos_id,
            pad_id=self.policy.pad_id, temperature=self.temperature, top_p=self.top_p,
            generator=self.generator if generator is None else generator, record_margins=record_margins,
            **({"record_logprobs": True} if self.record_logprobs else {}),
        )


DistFn = Callable[[tuple[int, ...]], dict[int, float]]


class ScriptedPolicy:
    """A finite policy: ``dist_fn(prefix)`` is the exact next-token distribution after ``prefix``.

    ``prefix`` is prompt-relative: ``generate`` drops the first ``prompt_len`` tokens of each prompt
    (the question) and passes what follows (a stage-1 prefix, if any) plus the tokens generated so
    far. Draws come from one seeded ``random.Random``, so a run is reproducible. ``calls`` records the
    batch size of every ``generate`` call (the samplers promise one call per stage).

    Its logits are ``log p`` over the support (tokens with ``p > 0``; the rest are ``-inf``), so the
    margin the engine records is ``log p1 - log p2`` of the two most likely tokens (:meth:`top2`), a
    deterministic function of the prefix. Example: immediate EOS with probability 1/2, else ``7`` then
    EOS::

        ScriptedPolicy(lambda pre: {0: .5, 7: .5} if not pre else {0: 1.0}, eos_id=0, newline_ids=(),
                       seed=0)
    """

    def __init__(self, dist_fn: DistFn, eos_id: int, newline_ids: Iterable[int], seed: int,
                 prompt_len: int = 1):
        self.dist_fn = dist_fn
        self.eos_id = eos_id
        self.newline_ids = frozenset(newline_ids)
        self.prompt_len = prompt_len
        self.rng = random.Random(seed)
        self.calls: list[int] = []

    def has_newline(self, token_id: int) -> bool:
        return token_id in self.newline_ids

    def _draw(self, prefix: tuple[int, ...]) -> int:
        dist = self.dist_fn(prefix)
        u = self.rng.random() * math.fsum(dist.values())  # tolerate dists that sum to 1 +- rounding
        cum = 0.0
        last = None
        for token, p in dist.items():
            if p <= 0:
                continue
            cum += p
            last = token
            if u < cum:
                return token
        if last is None:
            raise ValueError(f"dist_fn gave no positive probability after prefix {prefix}")
        return last  # u landed in the rounding gap at the top

    def top2(self, prefix: tuple[int, ...]) -> tuple[int, int, float]:
        """``(top1, top2, margin)`` of the next-token logits ``log p`` after ``prefix``.

        Ranked by probability, ties by the smaller id. With one token in the support there is no
        second-best: ``(top1, -1, inf)``. ``margin = log p1 - log p2 >= 0``.

        >>> ScriptedPolicy(lambda pre: {4: .25, 0: .5, 3: .25}, 0, (), seed=0).top2(())
        (0, 3, 0.6931471805599453)
        """
        ranked = sorted(((-p, t) for t, p in self.dist_fn(prefix).items() if p > 0))
        if not ranked:
            raise ValueError(f"dist_fn gave no positive probability after prefix {prefix}")
        if len(ranked) == 1:
            return ranked[0][1], -1, math.inf
        (p1, t1), (p2, t2) = ranked[0], ranked[1]
        return t1, t2, math.log(-p1) - math.log(-p2)

    def generate(self, prompts: list[list[int]], max_new_tokens: int,
                 record_margins: bool = False) -> Generation:
        self.calls.append(len(prompts))
        if not prompts:
            rows = (lambda: []) if record_margins else (lambda: None)  # fresh lists, not one shared
            return Generation([], [], [], rows(), 0, 0, 0, 0, rows(), rows())
        if any(len(p) < max(self.prompt_len, 1) for p in prompts):
            raise ValueError(f"every prompt needs at least max(prompt_len={self.prompt_len}, 1) tokens")
        tokens: list[list[int]] = []
        finished: list[bool] = []
        for prompt in prompts:
            context = list(prompt[self.prompt_len:])
            out: list[int] = []
            while len(out) < max_new_tokens:
                token = self._draw(tuple(context + out))
                out.append(token)
                if token == self.eos_id:
                    break
            tokens.append(out)
            finished.append(bool(out) and out[-1] == self.eos_id)
        lengths = [len(t) for t in tokens]
        ranks = None
        if record_margins:  # (top1, top2, margin) at every generated step, from the same prefixes
            ranks = [[self.top2(tuple(prompt[self.prompt_len:]) + tuple(out[:t])) for t in range(len(out))]
                     for prompt, out in zip(prompts, tokens)]
        # Same accounting as the batched decoder: rows step together until the longest is done.
        return Generation(
            tokens=tokens, lengths=lengths, finished=finished,
            margins=None if ranks is None else [[m for _, _, m in row] for row in ranks],
            prefill_tokens=sum(len(p) for p in prompts),
            padded_prefill_tokens=len(prompts) * max(len(p) for p in prompts),
            generated_tokens=sum(lengths), untrimmed_steps=len(prompts) * max(lengths, default=0),
            top1=None if ranks is None else [[a for a, _, _ in row] for row in ranks],
            top2=None if ranks is None else [[b for _, b, _ in row] for row in ranks],
        )

    def sequence_prob(self, tokens, cap: int | None = None, given: int = 0) -> float:
        """Probability of ``tokens`` (prompt-relative) under the kernel capped at ``cap`` tokens.

        The product of step probabilities ``p(tokens[t] | tokens[:t])`` for ``t >= given`` (so
        ``given > 0`` conditions on the first ``given`` tokens). It stops at EOS or at ``cap``: any token
        after an EOS or past the cap makes the sequence impossible (0.0). For a complete leaf (ends with
        EOS, or has exactly ``cap`` tokens) this is its probability; otherwise it is the probability
        that a draw starts with ``tokens``.
        """
        tokens = tuple(tokens)
        if cap is not None and len(tokens) > cap:
            return 0.0
        if self.eos_id in tokens[:-1]:
            return 0.0
        prob = 1.0
        for t in range(given, len(tokens)):
            prob *= self.dist_fn(tokens[:t]).get(tokens[t], 0.0)
        return prob

"""Batched, KV-cached decoding over a Hugging Face causal LM (baseline spec §6 rollouts, §8 eval).

What this implements
--------------------
- ``top_p_filter`` (`rollout.nucleus`): the baseline's nucleus rule (spec §6 step 3). Sort descending
  and keep a token iff the probability mass *before* it is ``< top_p``, so the token that crosses the
  threshold is kept and the top-1 token is always kept. Zero the rest and renormalise.
- ``next_token_probs`` / ``sample_next_token``: the per-step sampler of spec §6 steps 1-4 (temperature,
  softmax in the logits' own dtype, top-p, ``torch.multinomial``), plus explicit greedy decoding.
- ``generate``: many prompts at once, left-padded, one prefill with ``use_cache=True`` and then one token
  per step through the model's KV cache (a ``DynamicCache`` in transformers 5.x). EOS handling follows
  spec §6 step 5: a row stops on EOS and **the EOS token is kept** in its completion. The spec §8 greedy
  evaluation is ``temperature=0`` here; §8's evaluation text excludes EOS, so eval callers drop a
  trailing EOS (``finished[i]``) before decoding.

Deviations from the baseline, on purpose
----------------------------------------
- Temperature ``0`` / ``None`` means greedy argmax here. In the baseline's ``sample_response`` a falsy
  temperature merely skips the division (plain T=1 sampling); the baseline's *evaluation* is greedy
  (spec §8), which is what ``temperature=0`` gives.
- The baseline samples one rollout at a time; here rows are batched with left padding. With exact
  arithmetic the result per row is the same; in bf16 batched kernels can round differently from
  unbatched ones, so tokens may differ in rare near-ties.

Only plain arguments are taken (no config objects). Requires each prompt to be non-empty.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from rlvr_sweep.rollout.graph_sampler import probabilities
from rlvr_sweep.rollout.nucleus import top_p_filter, top_p_sorted  # noqa: F401  (the kernel samples through them)

__all__ = [
    "Generation",
    "top_p_filter",
    "top_p_sorted",
    "next_token_probs",
    "sample_next_token",
    "generate",
]


@dataclass
class Generation:
    """Result of :func:`generate`, one entry per input prompt (same order).

    ``tokens[i]`` holds the completion ids of row ``i`` only (no prompt, no padding). When the row stopped
    on EOS, EOS is its last token; nothing after it is kept. ``lengths[i] == len(tokens[i])`` counts that
    EOS. ``finished[i]`` is True iff the row stopped on EOS (False: it hit ``max_new_tokens``).
    ``margins[i][t]`` (only with ``record_margins``) is the float32 gap between the largest and the
    second-largest raw logit (before temperature) at generated step ``t`` of row ``i``; ``top1[i][t]``
    and ``top2[i][t]`` are the ids of those two logits (``torch.topk`` order, so an exact tie keeps
    topk's order). The sampled token ``tokens[i][t]`` need not be ``top1[i][t]``. All three are
    ``None`` without ``record_margins``. The counterfactual fork sampler reads them (paper §5.6 item 4).

    Token accounting:
    - ``prefill_tokens``: sum of the real prompt lengths.
    - ``padded_prefill_tokens``: ``batch * max prompt length`` (what the prefill actually computed).
    - ``generated_tokens``: ``sum(lengths)``.
    - ``untrimmed_steps``: ``batch * decode steps run`` where one decode step emits one token per row and
      the loop runs until every row is done, i.e. ``batch * max(lengths)``. Finished rows keep stepping
      (on pad tokens), so ``generated_tokens / untrimmed_steps`` is the batch's decode utilisation.
    """

    tokens: list[list[int]]
    lengths: list[int]
    finished: list[bool]
    margins: list[list[float]] | None
    prefill_tokens: int
    padded_prefill_tokens: int
    generated_tokens: int
    untrimmed_steps: int
    top1: list[list[int]] | None = None
    top2: list[list[int]] | None = None
    # (only with ``record_logprobs``) the raw model's log-probability (the logits' log-softmax before temperature
    # and top-p, in float32) of the token sampled at each step: what the trainer's recompute is held against
    logprobs: list[list[float]] | None = None


def _is_greedy(temperature: float | None) -> bool:
    if temperature is None or temperature == 0:
        return True
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 or None, got {temperature}")
    return False


def next_token_probs(
    logits: torch.Tensor, temperature: float | None, top_p: float | None
) -> torch.Tensor:
    """Sampling distribution for next-token ``logits`` of shape ``(B, V)``.

    Temperature ``0``/``None`` is greedy: a one-hot distribution on the argmax. Temperature ``1.0``
    divides nothing; any other temperature divides the logits. The softmax runs in the logits' own
    dtype on purpose: the baseline's sampler softmaxes bf16 logits (spec §1/§6), and upcasting would
    change which tokens survive the top-p cut. Then the top-p filter (skipped for ``top_p >= 1``).
    """
    if _is_greedy(temperature):
        probs = torch.zeros_like(logits)
        return probs.scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1)
    return top_p_filter(probabilities(logits, temperature), top_p)  # softmax in the logits' dtype (bf16 for the real model)


def sample_next_token(
    logits: torch.Tensor,
    temperature: float | None,
    top_p: float | None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw one token per row from ``(B, V)`` logits; returns a ``(B,)`` long tensor on their device.

    Greedy (temperature ``0``/``None``) is an explicit argmax and consumes no randomness. Otherwise
    ``torch.multinomial(next_token_probs(...), 1, generator=generator)``; the generator must live on
    the logits' device. A `seeding.RowGenerators` draws each row from a generator of its own.
    """
    if _is_greedy(temperature):
        return logits.argmax(dim=-1)
    probs = next_token_probs(logits, temperature, top_p)
    if hasattr(generator, "sample"):  # one generator per row (train.rollout_seeding=per_rollout)
        return generator.sample(probs)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def _model_device(model: torch.nn.Module) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:  # pragma: no cover - parameterless model
        return torch.device("cpu")


def _cache_kwarg(model: torch.nn.Module) -> str:
    """transformers >= 5.2x names the cache argument ``cache``; older versions ``past_key_values``."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _sdpa_full_attention(model: torch.nn.Module) -> bool:
    """True when decode steps may be given a ready-made 4D boolean mask (SDPA, no sliding-window layers)."""
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "_attn_implementation", None) != "sdpa":
        return False
    if getattr(cfg, "use_sliding_window", False):
        return False
    layer_types = getattr(cfg, "layer_types", None) or []
    return all(lt == "full_attention" for lt in layer_types)


def _cache_of(out) -> object:
    cache = getattr(out, "cache", None)
    if cache is None:
        cache = out.past_key_values
    return cache


def generate(
    model: torch.nn.Module,
    prompts: list[list[int]],
    *,
    max_new_tokens: int,
    eos_id: int | None,
    pad_id: int,
    temperature: float | None,
    top_p: float | None,
    generator: torch.Generator | None = None,
    record_margins: bool = False,
    record_logprobs: bool = False,
) -> Generation:
    """Generate completions for ``prompts`` (lists of token ids) in one left-padded batch.

    Prefill once with ``use_cache=True``; then feed one token per row per step through the KV cache.
    The attention mask is 0 on left pads and grows by a column of ones per step; position ids are
    ``cumsum(mask) - 1`` (clamped at 0) for the prompt and then advance by one per step per row.
    Rows that stopped on EOS keep receiving ``pad_id`` (their outputs are ignored); the loop stops once
    every row has stopped or after ``max_new_tokens`` tokens. ``eos_id=None`` (or any id the model cannot
    emit, e.g. ``-1``) never stops early. See :class:`Generation` for the returned fields.

    ``record_margins`` adds, per generated step, the raw top-1 minus top-2 logit margin and the two
    ids (``Generation.margins`` / ``top1`` / ``top2``): one ``topk(2)`` per step, read back once at the
    end, no extra device sync; off by default, and then nothing of it is computed. ``record_logprobs`` adds
    each sampled token's raw log-probability (``Generation.logprobs``: one logsumexp per step).

    ``generator`` (on the model's device) drives sampling; greedy decoding consumes no randomness.
    With an EOS id the loop reads one boolean back from the device per step (the all-finished check).
    The model is put in eval mode for the call and its previous train/eval mode is restored.
    """
    done = nothing_to_decode(prompts, max_new_tokens, record_margins)
    if done is not None:
        return done
    batch = len(prompts)
    prompt_lens = [len(p) for p in prompts]
    max_len = max(prompt_lens)
    prefill_tokens = sum(prompt_lens)
    padded_prefill_tokens = batch * max_len

    device = _model_device(model)
    padded = min(prompt_lens) < max_len

    # Left-padded ids, built on CPU in one go and moved with a single copy.
    flat: list[int] = []
    for p, n in zip(prompts, prompt_lens):
        flat.extend([pad_id] * (max_len - n))
        flat.extend(p)
    input_ids = torch.tensor(flat, dtype=torch.long).view(batch, max_len).to(device)

    # Masks. The full-length mask (prompt + all new tokens) is built once; each step passes a slice.
    # - no padding at all (e.g. G copies of one GRPO prompt): no mask; the model's causal default applies,
    #   which also keeps SDPA on its fast mask-free kernels and avoids a per-step "is the mask all ones" sync.
    # - padding + SDPA with full attention only: a ready-made 4D boolean (B, 1, 1, kv) mask per decode step
    #   (one query token attends to every non-pad key), so transformers skips rebuilding it every step.
    # - otherwise: the 2D (B, kv) padding mask, from which transformers builds its own.
    if padded:
        lens_t = torch.tensor(prompt_lens, dtype=torch.long)
        full_mask = torch.ones(batch, max_len + max_new_tokens, dtype=torch.long)
        full_mask[:, :max_len] = torch.arange(max_len)[None, :] >= (max_len - lens_t)[:, None]
        full_mask = full_mask.to(device)
        prefill_mask = full_mask[:, :max_len]
        position_ids = (prefill_mask.cumsum(-1) - 1).clamp_(min=0)
        step_mask = full_mask.bool()[:, None, None, :] if _sdpa_full_attention(model) else full_mask
    else:
        prefill_mask = step_mask = None
        position_ids = torch.arange(max_len, device=device).expand(batch, max_len)
    next_pos = position_ids[:, -1:] + 1  # (B, 1): position of the first generated token

    cache_kw = _cache_kwarg(model)
    was_training = model.training
    model.eval()
    try:
        # no_grad rather than inference_mode: the same model is trained right after rollouts, and
        # inference tensors created here (e.g. a rotary buffer that some RoPE variants refresh in place)
        # would make a later backward pass fail.
        with torch.no_grad():
            out = model(
                input_ids=input_ids,
                attention_mask=prefill_mask,
                position_ids=position_ids,
                use_cache=True,
                logits_to_keep=1,
            )
            cache = _cache_of(out)
            logits = out.logits[:, -1, :]
            del out

            record = DecodeRecord(batch, max_new_tokens, eos_id, pad_id, record_margins, device, record_logprobs)
            while True:
                nxt = record.emit(logits, temperature, top_p, generator)
                if record.steps == max_new_tokens or record.all_finished():
                    break
                out = model(
                    input_ids=nxt[:, None],
                    attention_mask=None if step_mask is None else step_mask[..., : max_len + record.steps],
                    position_ids=next_pos,
                    use_cache=True,
                    **{cache_kw: cache},
                )
                logits = out.logits[:, -1, :]
                del out
                next_pos = next_pos + 1

            return record.generation(prefill_tokens, padded_prefill_tokens)
    finally:
        if was_training:
            model.train()


def nothing_to_decode(prompts: list[list[int]], max_new_tokens: int, record_margins: bool,
                      padded: bool = True) -> Generation | None:
    """The :class:`Generation` of a call with nothing to decode (no prompts, or ``max_new_tokens <= 0``:
    empty completions), or None when there is; raises on an empty prompt either way. ``padded``: the
    engine left-pads a batch (``padded_prefill_tokens = batch * longest prompt``) or does not."""
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    if prompts and max_new_tokens > 0:
        return None
    lens = [len(p) for p in prompts]
    rows = (lambda: [[] for _ in prompts]) if record_margins else (lambda: None)  # fresh lists, not one shared
    return Generation([[] for _ in prompts], [0] * len(prompts), [False] * len(prompts), rows(), sum(lens),
                      len(prompts) * max(lens, default=0) if padded else sum(lens), 0, 0, rows(), rows())


class DecodeRecord:
    """What a decode loop emits, on the device: tokens (B, max_new_tokens), the rows that stopped on
    EOS, and with ``record_margins`` each step's raw top-1 minus top-2 logit margin and the two ids.
    ``eos_id`` None or negative: no row ever stops early. Both engines fill one through :meth:`emit`."""

    def __init__(self, batch: int, max_new_tokens: int, eos_id: int | None, pad_id: int, record_margins: bool,
                 device, record_logprobs: bool = False) -> None:
        self.tokens = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long, device=device)
        self.logprobs = torch.empty((batch, max_new_tokens), dtype=torch.float32, device=device) \
            if record_logprobs else None
        self.margins = self.top2 = None
        if record_margins:
            self.margins = torch.empty((batch, max_new_tokens), dtype=torch.float32, device=device)
            self.top2 = torch.empty((batch, max_new_tokens, 2), dtype=torch.long, device=device)
        self.finished = torch.zeros(batch, dtype=torch.bool, device=device)
        self.eos_id = eos_id if eos_id is not None and eos_id >= 0 else None
        self.pad_id = pad_id
        self.steps = 0

    def emit(self, logits: torch.Tensor, temperature: float | None, top_p: float | None,
             generator: torch.Generator | None) -> torch.Tensor:
        """Record the step's margins, pick each row's next token from ``logits`` (B, V) and return it
        (rows already finished get ``pad_id``: they only ever see pads)."""
        t = self.steps
        if self.margins is not None:
            best2 = logits.float().topk(2, dim=-1)  # values, indices: (B, 2) each
            self.margins[:, t] = best2.values[:, 0] - best2.values[:, 1]
            self.top2[:, t] = best2.indices
        return self.take(sample_next_token(logits, temperature, top_p, generator), logits)

    def take(self, drawn: torch.Tensor, logits: torch.Tensor | None = None) -> torch.Tensor:
        """Record the step's drawn tokens (B,) (rows already finished get ``pad_id``) and return them; the raw
        ``logits`` are needed only with ``record_logprobs``."""
        t = self.steps
        nxt = drawn.masked_fill(self.finished, self.pad_id)
        self.tokens[:, t] = nxt
        if self.logprobs is not None:  # log softmax(raw logits)[token] = logit - logsumexp, in float32
            raw = logits.float()
            self.logprobs[:, t] = raw.gather(-1, nxt[:, None]).squeeze(-1) - torch.logsumexp(raw, dim=-1)
        self.steps = t + 1
        if self.eos_id is not None:
            self.finished |= nxt == self.eos_id
        return nxt

    def all_finished(self) -> bool:
        """Every row stopped on EOS (one boolean read back from the device)."""
        return self.eos_id is not None and bool(self.finished.all())

    def generation(self, prefill_tokens: int, padded_prefill_tokens: int) -> Generation:
        """The :class:`Generation` of the steps emitted so far; each row is cut after its first EOS."""
        gen = self.tokens[:, : self.steps]
        batch, steps = gen.shape
        if self.eos_id is not None:
            first_eos = (gen == self.eos_id).to(torch.int8).argmax(dim=-1)
            lengths = torch.where(self.finished, first_eos + 1, torch.full_like(first_eos, steps)).tolist()
        else:
            lengths = [steps] * batch
        rows = gen.tolist()
        margin_rows = self.margins[:, :steps].tolist() if self.margins is not None else None
        top_rows = self.top2[:, :steps].tolist() if self.top2 is not None else None
        logprob_rows = self.logprobs[:, :steps].tolist() if self.logprobs is not None else None
        return Generation(
            tokens=[row[:n] for row, n in zip(rows, lengths)],
            lengths=lengths,
            finished=self.finished.tolist(),
            margins=[row[:n] for row, n in zip(margin_rows, lengths)] if margin_rows is not None else None,
            prefill_tokens=prefill_tokens,
            padded_prefill_tokens=padded_prefill_tokens,
            generated_tokens=sum(lengths),
            untrimmed_steps=batch * steps,
            top1=[[a for a, _ in row[:n]] for row, n in zip(top_rows, lengths)] if top_rows is not None else None,
            top2=[[b for _, b in row[:n]] for row, n in zip(top_rows, lengths)] if top_rows is not None else None,
            logprobs=[row[:n] for row, n in zip(logprob_rows, lengths)] if logprob_rows is not None else None,
        )

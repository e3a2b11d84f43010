"""Tests for rlvr_sweep.generation (batched KV-cached decoding, baseline spec §6/§8)."""

from __future__ import annotations

import functools

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from rlvr_sweep.rollout.engine import (
    Generation,
    generate,
    next_token_probs,
    sample_next_token,
    top_p_filter,
)

PAD = 0
MAX_NEW = 12
# Different lengths so that left padding matters; ids avoid the pad id 0.
PROMPTS = [
    [5, 9, 13],
    [7, 21, 3, 44, 2, 8, 30],
    [17, 60, 33, 1, 12],
    [40, 41, 42, 43, 44, 45, 46, 47, 48, 49],
]


def _tiny_qwen3(dtype=torch.float32) -> Qwen3ForCausalLM:
    torch.manual_seed(0)
    cfg = Qwen3Config(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        intermediate_size=64,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        # Larger than the default 0.02 so that next-token distributions are far from uniform:
        # greedy margins stay well above float noise and top-p actually cuts tokens.
        initializer_range=0.3,
    )
    return Qwen3ForCausalLM(cfg).to(dtype).eval()


@pytest.fixture(scope="module")
def model() -> Qwen3ForCausalLM:
    return _tiny_qwen3()


def _greedy(model, prompts, eos_id, **kw) -> Generation:
    return generate(
        model, prompts, max_new_tokens=MAX_NEW, eos_id=eos_id, pad_id=PAD,
        temperature=0, top_p=1.0, **kw,
    )


@pytest.fixture(scope="module")
def eos_for_mixed_stops(model) -> int:
    """An EOS id that some rows emit greedily before the cap while other rows never emit it."""
    free = _greedy(model, PROMPTS, eos_id=None).tokens
    for row in free:
        for tok in row[: MAX_NEW - 1]:
            if any(tok not in other for other in free):
                return tok
    pytest.fail("no token splits the rows into early-stop and capped")


def _full_forward_logits(model, prompt, completion) -> torch.Tensor:
    """Logits (no cache, no padding) that predicted each completion token: shape (len(completion), V)."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits[0].float()
    n = len(prompt)
    return logits[n - 1 : n - 1 + len(completion)]


# ---------------------------------------------------------------------------------------------
# 1. Greedy equivalence: batched == per-row == Hugging Face generate
# ---------------------------------------------------------------------------------------------


def test_greedy_batched_equals_unbatched_equals_hf(model, eos_for_mixed_stops):
    eos = eos_for_mixed_stops
    batched = _greedy(model, PROMPTS, eos)
    per_row = [_greedy(model, [p], eos).tokens[0] for p in PROMPTS]
    assert batched.tokens == per_row

    max_len = max(map(len, PROMPTS))
    input_ids = torch.tensor([[PAD] * (max_len - len(p)) + p for p in PROMPTS])
    attn = torch.tensor([[0] * (max_len - len(p)) + [1] * len(p) for p in PROMPTS])
    with torch.no_grad():
        hf = model.generate(
            input_ids=input_ids, attention_mask=attn, do_sample=False, max_new_tokens=MAX_NEW,
            eos_token_id=eos, pad_token_id=PAD,
        )
    hf_tokens = []
    for row in hf[:, max_len:].tolist():
        hf_tokens.append(row[: row.index(eos) + 1] if eos in row else row)
    assert batched.tokens == hf_tokens

    # Both stop kinds occur in this batch.
    assert any(batched.finished) and not all(batched.finished)
    assert any(n < MAX_NEW for n in batched.lengths)
    assert any(n == MAX_NEW for n in batched.lengths)


def test_greedy_same_across_mask_paths(model, eos_for_mixed_stops):
    """No-padding path, 4D-SDPA path and the 2D-mask (eager) path all agree with per-row decoding."""
    eos = eos_for_mixed_stops
    same_len = [p[:3] for p in PROMPTS]  # no padding at all
    per_row = [_greedy(model, [p], eos).tokens[0] for p in same_len]
    assert _greedy(model, same_len, eos).tokens == per_row

    sdpa = _greedy(model, PROMPTS, eos).tokens
    eager = _tiny_qwen3()
    eager.set_attn_implementation("eager")
    assert eager.config._attn_implementation == "eager"
    assert _greedy(eager, PROMPTS, eos).tokens == sdpa


def _spy_forward(model, monkeypatch) -> list[dict]:
    """Record input_ids / attention_mask / position_ids of every forward call (signature preserved)."""
    calls: list[dict] = []
    orig = model.forward

    @functools.wraps(orig)
    def spy(*args, **kwargs):
        calls.append({
            k: (kwargs[k].clone() if torch.is_tensor(kwargs.get(k)) else kwargs.get(k))
            for k in ("input_ids", "attention_mask", "position_ids")
        })
        return orig(*args, **kwargs)

    monkeypatch.setattr(model, "forward", spy)
    return calls


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_forward_inputs_positions_masks_and_pads(monkeypatch, eos_for_mixed_stops, attn):
    """RoPE is relative, so wrong position offsets barely change outputs; check the inputs directly."""
    model = _tiny_qwen3()
    model.set_attn_implementation(attn)
    calls = _spy_forward(model, monkeypatch)
    out = generate(model, [[1, 2, 3], [4, 5]], max_new_tokens=3, eos_id=None, pad_id=PAD,
                   temperature=0, top_p=1.0)
    assert len(calls) == 1 + 2  # prefill + one call per new token except the last
    pre = calls[0]
    assert pre["input_ids"].tolist() == [[1, 2, 3], [PAD, 4, 5]]
    assert pre["attention_mask"].tolist() == [[1, 1, 1], [0, 1, 1]]
    assert pre["position_ids"].tolist() == [[0, 1, 2], [0, 0, 1]]
    for k, call in enumerate(calls[1:], start=1):
        assert call["position_ids"].tolist() == [[2 + k], [1 + k]]
        assert call["input_ids"].tolist() == [[out.tokens[0][k - 1]], [out.tokens[1][k - 1]]]
        mask = call["attention_mask"].reshape(2, -1).long().tolist()  # 4D (SDPA) or 2D (eager)
        assert mask == [[1, 1, 1] + [1] * k, [0, 1, 1] + [1] * k]

    # Finished rows are fed their EOS once, then only pads; no padding -> no mask at all.
    calls.clear()
    out = _greedy(model, PROMPTS, eos_for_mixed_stops)
    fed = torch.cat([c["input_ids"] for c in calls[1:]], dim=1).tolist()
    assert len(fed[0]) == max(out.lengths) - 1
    for row, toks in zip(fed, out.tokens):
        assert row == (toks + [PAD] * len(row))[: len(row)]
    calls.clear()
    _greedy(model, [[1, 2], [3, 4]], None)
    assert all(c["attention_mask"] is None for c in calls)
    assert calls[0]["position_ids"].tolist() == [[0, 1], [0, 1]]


# ---------------------------------------------------------------------------------------------
# 2. The top-p rule
# ---------------------------------------------------------------------------------------------


def test_top_p_rule_hand_made():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.05, 0.15, 0.3, 0.5]])
    # mass before each sorted token: [0, 0.5, 0.8, 0.95]
    # top_p=0.8: keep where before < 0.8 -> the first two (the 0.3 that crosses 0.8 is kept).
    torch.testing.assert_close(
        top_p_filter(probs, 0.8),
        torch.tensor([[0.625, 0.375, 0.0, 0.0], [0.0, 0.0, 0.375, 0.625]]),
    )
    # top_p=0.81: 0.8 < 0.81 -> the third is kept too.
    torch.testing.assert_close(
        top_p_filter(probs, 0.81),
        torch.tensor([[0.5, 0.3, 0.15, 0.0], [0.0, 0.15, 0.3, 0.5]]) / 0.95,
    )
    # top_p=0.5: before = 0.5 is not < 0.5 -> only top-1.
    torch.testing.assert_close(
        top_p_filter(probs, 0.5), torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 1.0]])
    )
    # top-1 is always kept, even for tiny or zero top_p.
    for p in (1e-6, 0.0):
        torch.testing.assert_close(
            top_p_filter(probs, p), torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 1.0]])
        )
    # top_p >= 1 (or None) is a no-op.
    assert top_p_filter(probs, 1.0) is probs
    assert top_p_filter(probs, None) is probs


def test_top_p_keeps_dtype():
    probs = torch.softmax(torch.randn(3, 50), dim=-1).to(torch.bfloat16)
    out = top_p_filter(probs, 0.9)
    assert out.dtype == torch.bfloat16 and out.shape == probs.shape


# ---------------------------------------------------------------------------------------------
# Sampler details: temperature handling and softmax dtype
# ---------------------------------------------------------------------------------------------


def test_temperature_handling():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0], [0.0, 3.0, 0.1, 0.2]])
    # Greedy for 0 and None: argmax, no division by zero, no randomness consumed.
    gen = torch.Generator().manual_seed(0)
    state = gen.get_state()
    for t in (0, 0.0, None):
        assert sample_next_token(logits, t, 0.9, gen).tolist() == [0, 1]
        torch.testing.assert_close(
            next_token_probs(logits, t, 0.9), torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0]])
        )
    assert torch.equal(gen.get_state(), state)
    # T=1: plain softmax; other T: logits / T.
    torch.testing.assert_close(next_token_probs(logits, 1.0, 1.0), torch.softmax(logits, -1))
    torch.testing.assert_close(next_token_probs(logits, 0.5, 1.0), torch.softmax(logits / 0.5, -1))
    with pytest.raises(ValueError):
        next_token_probs(logits, -1.0, 1.0)
    # Softmax stays in the logits' dtype (the baseline softmaxes bf16 logits).
    assert next_token_probs(logits.bfloat16(), 0.8, 0.9).dtype == torch.bfloat16


def test_sampling_statistics_inside_top_p_set():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = probs.log().expand(4000, 4).contiguous()
    gen = torch.Generator().manual_seed(123)
    draws = sample_next_token(logits, 1.0, 0.8, gen)
    assert set(draws.unique().tolist()) <= {0, 1}
    frac0 = (draws == 0).float().mean().item()
    assert abs(frac0 - 0.625) < 0.04  # ~5 standard deviations


# ---------------------------------------------------------------------------------------------
# 3. Stopping at EOS
# ---------------------------------------------------------------------------------------------


def test_stop_at_eos(model, eos_for_mixed_stops):
    eos = eos_for_mixed_stops
    out = _greedy(model, PROMPTS, eos)
    for toks, n, fin in zip(out.tokens, out.lengths, out.finished):
        assert len(toks) == n
        if fin:
            assert toks[-1] == eos and eos not in toks[:-1]  # EOS kept, counted, nothing after it
            assert n <= MAX_NEW
        else:
            assert eos not in toks and n == MAX_NEW

    # A row whose very first token is EOS: length 1, finished, and the loop stops right away.
    first = _greedy(model, [PROMPTS[0]], None).tokens[0][0]
    one = _greedy(model, [PROMPTS[0]], first)
    assert one.tokens == [[first]] and one.lengths == [1] and one.finished == [True]
    assert one.untrimmed_steps == 1

    # eos_id=None or -1 never stops early.
    for e in (None, -1):
        capped = _greedy(model, PROMPTS, e)
        assert capped.lengths == [MAX_NEW] * len(PROMPTS) and not any(capped.finished)


# ---------------------------------------------------------------------------------------------
# 4. Reproducible sampling; samples inside the top-p set
# ---------------------------------------------------------------------------------------------


def _sample(model, seed, **kw):
    kw.setdefault("temperature", 1.0)
    kw.setdefault("top_p", 0.9)
    return generate(
        model, PROMPTS, max_new_tokens=MAX_NEW, eos_id=None, pad_id=PAD,
        generator=torch.Generator().manual_seed(seed), **kw,
    )


def test_sampling_reproducible(model):
    a = _sample(model, 7).tokens
    assert _sample(model, 7).tokens == a
    others = [_sample(model, s).tokens for s in (8, 9, 10)]
    assert any(o != a for o in others)
    # The global RNG is not what drives sampling.
    torch.manual_seed(1)
    b = _sample(model, 7).tokens
    torch.manual_seed(2)
    assert _sample(model, 7).tokens == b == a


def test_sampled_tokens_inside_top_p_set(model):
    top_p, temperature = 0.5, 0.8
    out = _sample(model, 3, temperature=temperature, top_p=top_p)
    cut_something = False
    for prompt, toks in zip(PROMPTS, out.tokens):
        logits = _full_forward_logits(model, prompt, toks)
        allowed = next_token_probs(logits, temperature, top_p) > 0
        assert allowed[torch.arange(len(toks)), torch.tensor(toks)].all()
        cut_something |= bool((~allowed).any())
    assert cut_something  # the check is not vacuous


# ---------------------------------------------------------------------------------------------
# 5. Margins
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0, 0.8])
def test_margins_match_full_forward(model, eos_for_mixed_stops, temperature):
    out = generate(
        model, PROMPTS, max_new_tokens=MAX_NEW, eos_id=eos_for_mixed_stops, pad_id=PAD,
        temperature=temperature, top_p=0.9, generator=torch.Generator().manual_seed(0),
        record_margins=True,
    )
    assert out.margins is not None and out.top1 is not None and out.top2 is not None
    for prompt, toks, margins, top1, top2 in zip(PROMPTS, out.tokens, out.margins, out.top1, out.top2):
        assert len(margins) == len(toks) == len(top1) == len(top2)
        ref = _full_forward_logits(model, prompt, toks).topk(2, dim=-1)
        torch.testing.assert_close(torch.tensor(margins), ref.values[:, 0] - ref.values[:, 1], atol=1e-4, rtol=0)
        # no near-ties among the top logits of this model, so the ids must be the full forward's
        assert top1 == ref.indices[:, 0].tolist() and top2 == ref.indices[:, 1].tolist()
        assert all(a != b for a, b in zip(top1, top2))
        if temperature == 0:
            assert toks == top1  # greedy samples the top-1 id
    plain = _greedy(model, PROMPTS, None)
    assert plain.margins is None and plain.top1 is None and plain.top2 is None


@pytest.mark.parametrize("engine", ["reference", "static"])
def test_recorded_logprobs_are_the_raw_models_and_change_no_draw(model, eos_for_mixed_stops, engine):
    """Each sampled token's raw log-prob (log-softmax of the logits before temperature and top-p) equals a full
    forward's; asking for them draws the same tokens from the same generator (no randomness consumed)."""
    from rlvr_sweep.rollout import static_engine

    fn = generate if engine == "reference" else static_engine.generate
    kw = dict(max_new_tokens=MAX_NEW, eos_id=eos_for_mixed_stops, pad_id=PAD, temperature=0.8, top_p=0.9)
    out = fn(model, PROMPTS, generator=torch.Generator().manual_seed(3), record_logprobs=True, **kw)
    plain = fn(model, PROMPTS, generator=torch.Generator().manual_seed(3), **kw)
    assert out.tokens == plain.tokens and plain.logprobs is None
    for prompt, toks, logprobs in zip(PROMPTS, out.tokens, out.logprobs):
        assert len(logprobs) == len(toks)
        ref = torch.log_softmax(_full_forward_logits(model, prompt, toks), -1).gather(-1, torch.tensor(toks)[:, None])
        torch.testing.assert_close(torch.tensor(logprobs), ref.squeeze(-1), atol=1e-4, rtol=0)
    if engine == "static":
        static_engine.release(model)


def test_margin_fields_on_empty_calls(model):
    kw = dict(eos_id=None, pad_id=PAD, temperature=0, top_p=1.0, record_margins=True)
    empty = generate(model, [], max_new_tokens=4, **kw)
    assert empty.margins == empty.top1 == empty.top2 == []
    zero = generate(model, PROMPTS[:2], max_new_tokens=0, **kw)
    assert zero.margins == zero.top1 == zero.top2 == [[], []]


# ---------------------------------------------------------------------------------------------
# 6. Token accounting
# ---------------------------------------------------------------------------------------------


def test_token_accounting_hand_checked(model):
    out = generate(model, [[1, 2, 3], [4, 5]], max_new_tokens=4, eos_id=None, pad_id=PAD,
                   temperature=0, top_p=1.0)
    assert out.prefill_tokens == 5          # 3 + 2
    assert out.padded_prefill_tokens == 6   # 2 rows * 3
    assert out.generated_tokens == 8        # 2 rows * 4
    assert out.untrimmed_steps == 8
    assert out.lengths == [4, 4]


def test_token_accounting_with_early_stops(model, eos_for_mixed_stops):
    out = _greedy(model, PROMPTS, eos_for_mixed_stops)
    assert out.prefill_tokens == 3 + 7 + 5 + 10
    assert out.padded_prefill_tokens == 4 * 10
    assert out.generated_tokens == sum(out.lengths) == sum(map(len, out.tokens))
    assert out.untrimmed_steps == 4 * max(out.lengths) == 4 * MAX_NEW  # one row hits the cap

    # All rows stop early -> the loop stops early too.
    firsts = [r[0] for r in _greedy(model, PROMPTS, None).tokens]
    stop_rows = [p for p, f in zip(PROMPTS, firsts) if f == firsts[0]]
    both = _greedy(model, stop_rows, firsts[0])
    assert both.lengths == [1] * len(stop_rows) and both.untrimmed_steps == len(stop_rows)


# ---------------------------------------------------------------------------------------------
# Misc
# ---------------------------------------------------------------------------------------------


def test_bf16_model_smoke_and_mode_restored():
    model = _tiny_qwen3(torch.bfloat16)
    model.train()
    out = generate(model, PROMPTS, max_new_tokens=6, eos_id=None, pad_id=PAD, temperature=0.8,
                   top_p=0.9, generator=torch.Generator().manual_seed(0), record_margins=True)
    assert out.lengths == [6] * 4 and all(0 <= t < 64 for row in out.tokens for t in row)
    assert model.training  # restored


def test_edge_cases(model):
    empty = generate(model, [], max_new_tokens=4, eos_id=None, pad_id=PAD, temperature=0, top_p=1.0)
    assert empty.tokens == [] and empty.generated_tokens == 0
    zero = generate(model, PROMPTS[:2], max_new_tokens=0, eos_id=None, pad_id=PAD, temperature=0,
                    top_p=1.0)
    assert zero.tokens == [[], []] and zero.untrimmed_steps == 0 and zero.prefill_tokens == 10
    with pytest.raises(ValueError):
        generate(model, [[1], []], max_new_tokens=2, eos_id=None, pad_id=PAD, temperature=0, top_p=1.0)


def test_greedy_equivalence_on_the_shipped_tiny_model():
    """Batched == one row at a time == HF `model.generate` on the shipped checkpoint (float32),
    with real toy prompts of different lengths, some answered with EOS and some capped."""
    from rlvr_sweep.data import toy_arith
    from rlvr_sweep.data import encode_prompts
    from rlvr_sweep.policy import load_policy
    from rlvr_sweep.config import ModelConfig

    policy = load_policy(ModelConfig(name="tiny", hub_id=None, path="pkg:rlvr_sweep.policy/assets/tiny_qwen3", dtype="float32"))
    rows = toy_arith.load_split("heldout", 12)
    prompts = encode_prompts(policy.tokenizer, [r["problem"] for r in rows])
    assert len({len(p) for p in prompts}) > 1
    kw = dict(max_new_tokens=48, eos_id=policy.eos_id, pad_id=policy.pad_id, temperature=0, top_p=1.0)
    batched = generate(policy.model, prompts, **kw)
    single = [generate(policy.model, [p], **kw).tokens[0] for p in prompts]
    assert batched.tokens == single
    assert any(batched.finished) and not all(batched.finished)
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[policy.pad_id] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    hf = policy.model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=48,
                               eos_token_id=policy.eos_id, pad_token_id=policy.pad_id)
    for row, tokens in zip(hf[:, width:].tolist(), batched.tokens):
        assert row[: len(tokens)] == tokens
        assert all(t == policy.pad_id for t in row[len(tokens):])

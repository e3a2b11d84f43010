"""The optional vLLM backend: skipped (with the reason) without a CUDA GPU and the `vllm` extra."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from rlvr_sweep.rollout import engine, vllm_engine

REASON = vllm_engine.vllm_available()
needs_vllm = pytest.mark.skipif(REASON is not None, reason=f"vllm backend unavailable: {REASON}")


def test_unavailable_reason_is_explicit():
    if REASON is None:
        pytest.skip("vllm is available here")
    assert "GPU" in REASON or "vllm" in REASON
    with pytest.raises(RuntimeError, match="the vllm engine cannot run"):
        vllm_engine.VllmEngine(torch.nn.Linear(1, 1))  # refused before the model is looked at


@pytest.fixture(scope="module")
def gpu_model():
    """Small, but with a head size vLLM's attention kernels take (64) and room for its context length."""
    torch.manual_seed(2)
    config = Qwen3Config(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=1024,
                         tie_word_embeddings=False, initializer_range=0.3)
    model = Qwen3ForCausalLM(config).to("cuda", torch.bfloat16).eval()
    yield model
    vllm_engine.release(model)


@needs_vllm
def test_greedy_close_to_reference_and_contract(gpu_model):
    prompts = [[1, 2, 3], [4, 5, 6, 7, 8], [9]]
    kw = dict(max_new_tokens=12, eos_id=-1, pad_id=0, temperature=0, top_p=1.0, record_margins=True)
    ours = vllm_engine.generate(gpu_model, prompts, **kw)
    ref = engine.generate(gpu_model, prompts, **kw)
    assert ours.lengths == ref.lengths == [12, 12, 12]
    assert len(ours.margins[0]) == 12 and all(m >= 0 for m in ours.margins[0])
    first = sum(a[0] == b[0] for a, b in zip(ours.tokens, ref.tokens))
    assert first >= 2  # bf16 kernels differ; the first greedy token rarely does


@needs_vllm
def test_weights_are_pushed_after_an_update(gpu_model):
    prompts = [[1, 2, 3, 4]]
    kw = dict(max_new_tokens=8, eos_id=-1, pad_id=0, temperature=0, top_p=1.0)
    before = vllm_engine.generate(gpu_model, prompts, **kw).tokens
    with torch.no_grad():
        gpu_model.lm_head.weight.mul_(-1.0)  # in place, as AdamW updates: flips every argmax
    assert vllm_engine.engine_for(gpu_model).stale()
    after = vllm_engine.generate(gpu_model, prompts, **kw).tokens
    assert after != before
    assert not vllm_engine.engine_for(gpu_model).stale()
    with torch.no_grad():
        gpu_model.lm_head.weight.mul_(-1.0)

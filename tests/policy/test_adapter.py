"""LoRA adapters on the policy (`policy.adapter`): drawn from the run's seed, only they train, the reference policy
is the base with them switched off, decoding goes through them, and the merged model decodes the same tokens."""

from __future__ import annotations

import pytest
import torch

from rlvr_sweep.config import LoraConfig, ModelConfig
from rlvr_sweep.policy import load_policy
from rlvr_sweep.policy.adapter import (
    AdapterOff, adapter_off, has_adapter, load_trained_state, merged_state, trained_state,
)
from rlvr_sweep.rollout import engine, engines
from rlvr_sweep.rollout.qwen3_step import UnsupportedModel, check_supported

pytest.importorskip("peft")

TINY = dict(name="tiny", hub_id=None, path="pkg:rlvr_sweep.policy/assets/tiny_qwen3", device="cpu")
IDS = torch.tensor([[5, 17, 42, 9, 3, 88, 21]])


def tiny(lora: LoraConfig | None = None, seed: int = 0, dtype: str = "float32"):
    return load_policy(ModelConfig(**TINY, dtype=dtype), lora=lora, seed=seed)


def logits(model, ids=IDS) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


def a_matrices(model) -> dict:
    return {k: v.clone() for k, v in trained_state(model).items() if "lora_A" in k}


def kick(model, std: float = 0.3, seed: int = 7) -> None:
    """Move every B off zero, as training would."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * std)


def test_the_adapter_is_drawn_from_the_runs_seed_and_leaves_the_global_stream_alone():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    one = a_matrices(tiny(LoraConfig(rank=4), seed=42).model)
    assert torch.equal(torch.get_rng_state(), before)  # the draw had its own stream
    again = a_matrices(tiny(LoraConfig(rank=4), seed=42).model)
    other = a_matrices(tiny(LoraConfig(rank=4), seed=43).model)
    fixed = a_matrices(tiny(LoraConfig(rank=4, init_seed=42), seed=43).model)
    assert one.keys() == again.keys() and len(one) == 14  # 2 layers x 7 linear layers ("all-linear": not lm_head)
    assert all(torch.equal(one[k], again[k]) for k in one)
    assert not any(torch.equal(one[k], other[k]) for k in one)
    assert all(torch.equal(one[k], fixed[k]) for k in one)  # init_seed fixes it across the run's seeds
    # peft's draw, from torch's global CPU generator seeded with the run's seed: the first layer's nn.Linear A
    # (r x in) and B (out x r) draw their own default init, then A is drawn again, kaiming_uniform_(a=sqrt(5))
    torch.manual_seed(42)
    draws = [torch.empty(4, 64), torch.empty(64, 4), torch.empty(4, 64)]
    for t in draws:
        torch.nn.init.kaiming_uniform_(t, a=5 ** 0.5)
    assert torch.equal(one["model.layers.0.self_attn.q_proj.lora_A.default.weight"], draws[2])


def test_only_the_adapter_trains_in_float32_and_the_adapted_model_starts_as_the_base():
    base = tiny(dtype="bfloat16").model
    policy = tiny(LoraConfig(rank=8, alpha=16), seed=1, dtype="bfloat16")
    model = policy.model
    assert policy.adapter and has_adapter(model) and not has_adapter(base)
    trained = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trained and all("lora_" in n for n in trained)
    assert {p.dtype for n, p in model.named_parameters() if p.requires_grad} == {torch.float32}
    # r x (in + out) per adapted layer; hidden 64, 4 query heads and 2 key-value heads of 16, MLP 192, 2 layers
    assert sum(p.numel() for p in trained_state(model).values()) == 2 * 8 * (
        (64 + 64) + 2 * (64 + 32) + (64 + 64) + 2 * (64 + 192) + (192 + 64)) == 19_456
    assert torch.equal(logits(model), logits(base))  # B = 0: the adapter adds exactly nothing yet


def test_the_reference_is_the_base_with_the_adapter_off_and_training_flags_come_back():
    base = tiny().model
    model = tiny(LoraConfig(rank=4), seed=3).model
    kick(model)
    assert not torch.allclose(logits(model), logits(base))
    reference = AdapterOff(model)
    assert torch.equal(logits(reference), logits(base))
    assert list(reference.parameters()) == []  # no copy, and no second owner of the policy's parameters
    with adapter_off(model):
        assert torch.equal(logits(model), logits(base))
    assert not torch.allclose(logits(model), logits(base))  # the adapter is on again
    assert [n for n, p in model.named_parameters() if p.requires_grad] == list(trained_state(model))


def test_decoding_goes_through_the_adapter_and_the_merged_model_decodes_the_same_tokens():
    """The reference engine decodes the unmerged adapter (the one rollouts and read-outs use); the merged float32
    model (`model/` of a finished run) decodes the same greedy tokens on the CPU, and differs from the base."""
    policy = tiny(LoraConfig(rank=4), seed=5)
    kick(policy.model, std=0.2)
    merged = tiny().model
    merged.load_state_dict(merged_state(policy.model))
    base = tiny().model
    prompts = [[5, 17, 42, 9], [3, 88, 21, 7, 7, 60], [11]]
    kw = dict(max_new_tokens=24, eos_id=None, pad_id=0, temperature=None, top_p=None)
    adapted = engine.generate(policy.model, prompts, **kw).tokens
    assert adapted == engine.generate(merged, prompts, **kw).tokens
    assert adapted != engine.generate(base, prompts, **kw).tokens
    assert torch.allclose(logits(policy.model), logits(merged), atol=1e-4)


def test_the_static_engine_refuses_an_adapter_and_auto_picks_the_reference():
    model = tiny(LoraConfig(rank=4)).model
    with pytest.raises(UnsupportedModel, match="LoRA adapter layers"):
        check_supported(model)
    name, why = engines.auto_choice(model)
    assert name == "reference" and "LoRA adapter layers" in why
    assert engines.auto_choice(tiny().model)[0] == "static"  # the same model without an adapter


def test_a_checkpoints_adapter_state_loads_back_and_another_adapters_is_refused():
    model = tiny(LoraConfig(rank=4), seed=9).model
    kick(model)
    saved = {k: v.clone() for k, v in trained_state(model).items()}
    fresh = tiny(LoraConfig(rank=4), seed=10).model
    load_trained_state(fresh, saved)
    assert torch.equal(logits(fresh), logits(model))
    with pytest.raises(ValueError, match="does not match"):
        load_trained_state(tiny(LoraConfig(rank=4, target_modules=["q_proj"])).model, saved)


def test_target_modules_that_name_no_layer_are_refused_in_one_line():
    from rlvr_sweep.policy import ModelLoadError

    with pytest.raises(ModelLoadError, match=r"lora.target_modules=\['qkv_proj'\]"):
        tiny(LoraConfig(rank=4, target_modules=["qkv_proj"]))

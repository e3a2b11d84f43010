"""Other model families: a tiny Llama and a tiny Qwen2, built here with transformers' own classes and
the shipped tiny checkpoint's tokenizer, train and read out through the real entrypoint. The static
engine is Qwen3's decode step, so `model.engine=auto` runs them on the reference engine and says so
in the run's log; the shipped tiny Qwen3 in float32 gets the static engine.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

import rlvr_sweep.policy
from rlvr_sweep import store
from rlvr_sweep.config import ModelConfig
from rlvr_sweep.policy import ModelLoadError, load_policy
from rlvr_sweep.rollout import engines, static_engine
from rlvr_sweep.rollout.qwen3_step import UnsupportedModel
from rlvr_sweep.run import run
from tests.helpers import compose_cfg

TINY = Path(rlvr_sweep.policy.__file__).parent / "assets" / "tiny_qwen3"
EOS = "<|endoftext|>"  # the tiny tokenizer's EOS and pad, id 0
# (config class, model class, the tokenizer keeps its pad token): Qwen2's has none, so EOS pads
FAMILIES = {"llama": (LlamaConfig, LlamaForCausalLM, True), "qwen2": (Qwen2Config, Qwen2ForCausalLM, False)}
SHAPE = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
             max_position_embeddings=256, tie_word_embeddings=False)  # ~15k parameters
LR, WEIGHT_DECAY = 5e-5, 0.01  # the smoke profile's lr, the schema's AdamW weight decay
STEPS = 2
# ra_flat on the smoke profile, short: rollout cap 128/8 = 16 tokens, read-out cap 256/8 = 32 tokens
RUN = ["+arm=ra_flat", "profile=smoke", f"train.steps={STEPS}", "eval.limit=4", "horizon.tokens=128",
       "eval.max_new_tokens=256"]


def build(folder: Path, family: str) -> Path:
    """A float32 `family` causal LM of random weights and the tiny tokenizer, as `save_pretrained` writes them."""
    config_cls, model_cls, keep_pad = FAMILIES[family]
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    if not keep_pad:
        tokenizer.pad_token = None
    config = config_cls(vocab_size=len(tokenizer), eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id, bos_token_id=None, **SHAPE)
    torch.manual_seed(0)
    model_cls(config).save_pretrained(folder)  # safetensors
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("families")
    return {family: build(root / family, family) for family in FAMILIES}


def policy_of(folder, dtype: str = "float32"):
    return load_policy(ModelConfig(name="family", hub_id=None, path=str(folder), dtype=dtype, device="cpu"))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_tiny_model_of_another_family_trains_and_reads_out(folders, family, tmp_path):
    _, model_cls, keep_pad = FAMILIES[family]
    folder = folders[family]
    assert (folder / "model.safetensors").is_file() and not (folder / "chat_template.jinja").exists()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.eos_token == EOS and tokenizer.eos_token_id == 0
    assert tokenizer.pad_token == (EOS if keep_pad else None) and tokenizer.chat_template is None

    info = run(compose_cfg([*RUN, f"model.path={folder}", f"model.name=tiny_{family}", f"run.out_root={tmp_path}"]))

    run_dir = Path(info["run_dir"])
    assert info["status"] == "finished" and store.read_run_json(run_dir)["status"] == "finished"
    assert info["rollout_cap"] == 16 and info["readout_cap"] == 32
    steps = store.read_table(run_dir, "steps")
    assert steps["step"].tolist() == [0, 1] and not steps["active"].any()  # random weights: no reward
    rollouts = store.read_table(run_dir, "rollouts")
    assert len(rollouts) == STEPS * 8 and rollouts["length"].between(1, 16).all()
    grades = store.read_table(run_dir, "grades")
    base, trained = (grades[grades["phase"] == phase] for phase in ("base", "trained"))
    assert len(grades) == 8 and base["benchmark"].tolist() == trained["benchmark"].tolist() == ["toy_heldout"] * 4
    assert base["item_id"].tolist() == trained["item_id"].tolist() and (grades["length"] <= 32).all()
    run_log = (run_dir / "logs" / "run.log").read_text().splitlines()
    said = [line.split(" - ", 1)[1] for line in run_log if "model.engine=auto" in line]
    assert said == [f"model.engine=auto: reference ({model_cls.__name__} is not Qwen3-shaped: "  # once, not per call
                    f"model_type '{family}' is not 'qwen3')"]

    # the saved policy is the same architecture, after two zero-gradient AdamW steps (every homogeneous
    # group of ra_flat): each weight decayed twice by lr * weight_decay, nothing else
    saved = AutoModelForCausalLM.from_pretrained(run_dir / "model")
    start = AutoModelForCausalLM.from_pretrained(folder)
    assert type(saved) is type(start) is model_cls
    before, after = start.state_dict(), saved.state_dict()
    assert before.keys() == after.keys()
    for name, weight in before.items():  # decayed by 1e-6 in all; float32 rounds to within 3e-7 of it
        assert not weight.any() or not torch.equal(after[name], weight), name  # a zero bias stays zero
        torch.testing.assert_close(after[name], weight * (1 - LR * WEIGHT_DECAY) ** STEPS, rtol=5e-7, atol=0,
                                   msg=lambda m, name=name: f"{name}: {m}")


def test_auto_says_which_engine_it_chose_and_why(folders, caplog):
    tiny = policy_of(TINY).model
    assert engines.auto_choice(tiny) == (
        "static", "float32 weights on cpu, a Qwen3-shaped model: proven token-identical to reference")
    assert engines.auto_choice(tiny.to(torch.bfloat16)) == (
        "reference", "bfloat16 on cpu: static is proven token-identical only for float32 weights (on the CPU and "
        "on a CUDA GPU)")
    tiny.to(torch.float32)
    models = {family: policy_of(folder).model for family, folder in folders.items()}
    assert {family: engines.auto_choice(model) for family, model in models.items()} == {
        "llama": ("reference", "LlamaForCausalLM is not Qwen3-shaped: model_type 'llama' is not 'qwen3'"),
        "qwen2": ("reference", "Qwen2ForCausalLM is not Qwen3-shaped: model_type 'qwen2' is not 'qwen3'")}

    decode = dict(max_new_tokens=3, eos_id=0, pad_id=0, temperature=None, top_p=None)
    with caplog.at_level(logging.INFO, logger="rlvr_sweep.rollout.engines"):
        for model in (tiny, models["llama"], tiny, models["llama"]):
            engines.auto_generate(model, [[5, 6, 7], [8, 9]], **decode)
    assert [r.getMessage() for r in caplog.records if r.name == "rlvr_sweep.rollout.engines"] == [
        f"model.engine=auto: {name} ({why})" for name, why in map(engines.auto_choice, (tiny, models["llama"]))]
    static_engine.release(tiny)


def test_auto_decodes_another_family_as_the_reference_does_and_static_refuses_it(folders):
    decode = dict(max_new_tokens=6, eos_id=0, pad_id=0, temperature=None, top_p=None)
    prompts = [[5, 6, 7], [8, 9]]
    for family, folder in folders.items():
        model = policy_of(folder).model
        with pytest.raises(UnsupportedModel, match=f"model_type '{family}' is not 'qwen3'"):
            static_engine.generate(model, prompts, **decode)  # refused before decoding anything
        auto = engines.auto_generate(model, prompts, **decode)
        reference = engines.engine.generate(model, prompts, **decode)
        assert (auto.tokens, auto.lengths) == (reference.tokens, reference.lengths), family


def test_a_tokenizer_without_eos_is_refused_when_the_model_is_loaded(folders, tmp_path):
    folder = tmp_path / "no_eos"
    shutil.copytree(folders["llama"], folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.eos_token = tokenizer.pad_token = None
    tokenizer.save_pretrained(folder)
    with pytest.raises(ModelLoadError, match="the tokenizer in .* has no EOS token"):
        policy_of(folder)


def test_the_static_engine_refuses_another_family_before_any_run_folder(folders, tmp_path):
    from rlvr_sweep.run import plan

    cfg = compose_cfg([*RUN, f"model.path={folders['llama']}", "model.name=tiny_llama", "model.engine=static",
                       f"run.out_root={tmp_path}"])
    with pytest.raises(ModelLoadError, match=r"model.engine=static decodes Qwen3 models only .* holds model_type "
                                             r"'llama': use model.engine=reference, or auto"):
        plan(cfg)
    assert not any(tmp_path.iterdir())

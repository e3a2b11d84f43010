"""The shipped tiny Qwen3 checkpoint: loads as Qwen3, small, documented, a real byte-level tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rlvr_sweep.policy
from rlvr_sweep.data.prompts import render_prompt
from rlvr_sweep.data.toy_arith import load_split

ASSET_DIR = Path(rlvr_sweep.policy.__file__).parent / "assets" / "tiny_qwen3"
EOS = "<|endoftext|>"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(ASSET_DIR)


@pytest.fixture(scope="module")
def model():
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(ASSET_DIR).eval()


def test_checkpoint_folder_is_small_and_documented():
    files = [f for f in ASSET_DIR.rglob("*") if f.is_file()]
    names = {f.name for f in files}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "build_info.json"} <= names
    assert sum(f.stat().st_size for f in files) < 20 * 1024 * 1024
    info = json.loads((ASSET_DIR / "build_info.json").read_text())
    assert "build_tiny --out" in info["command"]  # the command that built it (the module has since moved)
    assert info["heldout_metrics"]["greedy_accuracy"] < 0.9


def test_checkpoint_loads_as_qwen3(model, tokenizer):
    import torch

    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert model.config.model_type == "qwen3"
    assert next(model.parameters()).dtype == torch.float32
    assert model.config.vocab_size >= len(tokenizer)
    ids = tokenizer(render_prompt("Compute 1 + 2."), return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], model.config.vocab_size)
    assert torch.isfinite(logits).all()


def test_special_tokens(model, tokenizer):
    eos_id = tokenizer.convert_tokens_to_ids(EOS)
    assert tokenizer.eos_token == EOS and tokenizer.pad_token == EOS
    assert tokenizer.eos_token_id == tokenizer.pad_token_id == eos_id
    assert model.config.eos_token_id == eos_id
    assert model.config.pad_token_id == eos_id


def test_tokenizer_round_trips_prompt_and_solution(tokenizer):
    for r in load_split("heldout", 20, seed=0):
        for text in (
            render_prompt(r["problem"]) + " " + r["solution"],
            render_prompt(r["problem"]) + " " + r["solution"] + EOS,
            "  odd\tspacing \n\n and unicode: é ∑ 😀 \\boxed{ -12 }",
        ):
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            assert tokenizer.decode(ids) == text


def test_digits_are_single_tokens_and_template_is_short(tokenizer):
    ids = tokenizer("x 12345 y", add_special_tokens=False)["input_ids"]
    pieces = [tokenizer.decode([i]) for i in ids]
    for d in "12345":
        assert d in pieces
    template_ids = tokenizer(render_prompt("Compute 1 + 2."), add_special_tokens=False)["input_ids"]
    assert len(template_ids) <= 16


def test_some_tokens_contain_newlines(tokenizer):
    newline_ids = [i for i in range(len(tokenizer)) if "\n" in tokenizer.decode([i])]
    assert len(newline_ids) >= 2
    sol = load_split("train", 1)[0]["solution"]
    ids = tokenizer(" " + sol, add_special_tokens=False)["input_ids"]
    assert any("\n" in tokenizer.decode([i]) for i in ids)

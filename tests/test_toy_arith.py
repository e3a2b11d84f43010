"""Tests for the toy arithmetic task and the shipped tiny Qwen3 checkpoint."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import rlvr_sweep
from rlvr_sweep.prompts import render_prompt
from rlvr_sweep.toy_arith import MAX_OPERAND, load_split, problem_expression, split_of

ASSET_DIR = Path(rlvr_sweep.__file__).parent / "assets" / "tiny_qwen3"
EOS = "<|endoftext|>"
_SAFE_EXPR = re.compile(r"^[0-9+\-*() ]+$")


def _eval(expr: str) -> int:
    assert _SAFE_EXPR.match(expr), f"unexpected characters in {expr!r}"
    return eval(expr, {"__builtins__": {}}, {})  # noqa: S307 - checked above


def _n_ops(expr: str) -> int:
    """Binary operators are written with spaces around them; a minus sign is not."""
    return sum(expr.count(f" {op} ") for op in "+-*")


# --------------------------------------------------------------------------- task
def test_load_split_is_deterministic_and_prefix_stable():
    a = load_split("train", 64, seed=3)
    assert a == load_split("train", 64, seed=3)
    assert load_split("train", 20, seed=3) == a[:20]
    assert load_split("heldout", 30, seed=3) == load_split("heldout", 30, seed=3)
    assert [r["problem"] for r in load_split("train", 64, seed=4)] != [r["problem"] for r in a]
    assert load_split("train", 0) == []


def test_rows_schema_and_ids():
    for split in ("train", "heldout"):
        rows = load_split(split, 50, seed=1)
        assert len(rows) == 50
        for r in rows:
            assert set(r) == {"id", "problem", "answer", "solution"}
            assert all(isinstance(v, str) for v in r.values())
        assert len({r["id"] for r in rows}) == 50


def test_unknown_split_raises_with_valid_names():
    with pytest.raises(ValueError, match="train.*heldout"):
        load_split("test", 5)


@pytest.mark.parametrize("seeds", [(0, 0), (0, 1), (7, 2)])
def test_splits_are_disjoint(seeds):
    train = {r["problem"] for r in load_split("train", 3000, seed=seeds[0])}
    heldout = {r["problem"] for r in load_split("heldout", 500, seed=seeds[1])}
    assert train.isdisjoint(heldout)
    assert all(split_of(p) == "heldout" for p in heldout)


def test_solutions_are_correct_worked_arithmetic():
    rows = load_split("train", 600, seed=0) + load_split("heldout", 300, seed=0)
    n_operands = set()
    for r in rows:
        expr = problem_expression(r["problem"])
        operands = [int(x) for x in re.findall(r"\d+", expr)]
        n_operands.add(len(operands))
        assert all(0 <= x <= MAX_OPERAND for x in operands)
        assert r["answer"] == str(_eval(expr))

        lines = r["solution"].split("\n")
        assert lines[-1] == f"\\boxed{{{r['answer']}}}"
        assert r["solution"].count("\\boxed") == 1
        worked = lines[:-1]
        assert len(worked) == len(operands) - 1  # one operation per line
        current = expr
        for line in worked:
            lhs, rhs = line.split(" = ")
            assert lhs == current, (r["problem"], line)
            assert _eval(lhs) == _eval(rhs), (r["problem"], line)
            assert _n_ops(lhs) - _n_ops(rhs) == 1, (r["problem"], line)
            current = rhs
        assert current == r["answer"] or _eval(current) == int(r["answer"])
        assert _n_ops(current) == 0
    assert n_operands == {2, 3, 4, 5, 6}


# --------------------------------------------------------------------------- checkpoint
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
    assert "rlvr_sweep.build_tiny" in info["command"]
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

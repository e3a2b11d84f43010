"""Shared fixtures: paths to the shared benchmark files and a small random Qwen3 model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RLVR_SWEEP_TEST_DATA", REPO.parent / "shared" / "data"))
QWEN3_TOKENIZER = REPO.parent / "shared" / "tokenizers" / "qwen3"
CONF_DIR = REPO / "conf"


@pytest.fixture
def shared_data() -> Path:
    if not (SHARED_DATA / "math500.jsonl").is_file():
        pytest.skip(f"benchmark files not found under {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def qwen3_tokenizer():
    """The real Qwen3 tokenizer (newline-bearing tokens such as `.\\n`, EOS 151643)."""
    if not (QWEN3_TOKENIZER / "vocab.json").is_file():
        pytest.skip(f"Qwen3 tokenizer not found under {QWEN3_TOKENIZER}")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(QWEN3_TOKENIZER)


def make_random_qwen3(seed: int = 0, vocab: int = 64):
    """A randomly initialised float32 Qwen3ForCausalLM small enough for exact CPU tests."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
        tie_word_embeddings=False, eos_token_id=vocab - 1, pad_token_id=vocab - 1,
    )
    return Qwen3ForCausalLM(config).float().eval()


@pytest.fixture
def random_qwen3():
    return make_random_qwen3()

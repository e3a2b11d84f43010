"""A folder is checked to hold Qwen3-0.6B-Base from its files before anything is loaded: the real
config values, the real Qwen3 tokenizer, and safetensors headers with the real tensor shapes (the
weight bytes are a sparse file: the check reads headers only)."""

from __future__ import annotations

import json
import shutil
import struct

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen3Config

from rlvr_sweep.policy import ModelLoadError
from rlvr_sweep.policy.architecture import QWEN3_0_6B_BASE, QWEN3_0_6B_CONFIG, check_architecture
from rlvr_sweep.policy.cli import main
from tests.conftest import QWEN3_TOKENIZER
from tests.helpers import compose_cfg


def shapes(config: dict, tied: bool = True) -> dict[str, list[int]]:
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(Qwen3Config(**config))
    out = {k: list(v.shape) for k, v in model.state_dict().items()}
    if tied:
        out.pop("lm_head.weight")  # a tied checkpoint stores the embedding once
    return out


def write_header_only(path, tensors: dict[str, list[int]], bytes_per_value: int = 2, cut: int = 0) -> None:
    """A safetensors file whose data region is a hole of the declared size (`cut` bytes short)."""
    header, offset = {}, 0
    for name, shape in tensors.items():
        n = bytes_per_value
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        f.truncate(8 + len(blob) + offset - cut)


@pytest.fixture
def qwen_folder(tmp_path, qwen3_tokenizer):
    folder = tmp_path / "Qwen3-0.6B-Base"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3_0_6B_CONFIG))
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        shutil.copy(QWEN3_TOKENIZER / name, folder / name)
    write_header_only(folder / "model.safetensors", shapes(QWEN3_0_6B_CONFIG))
    return folder


def test_the_paper_model_passes_tied_and_untied(qwen_folder, capsys):
    assert check_architecture(qwen_folder, QWEN3_0_6B_BASE) == []
    assert main(["check-model", str(qwen_folder)]) == 0
    assert "596,049,920 parameters tied / 751,632,384 untied, EOS 151643" in capsys.readouterr().out
    write_header_only(qwen_folder / "model.safetensors", shapes(QWEN3_0_6B_CONFIG, tied=False))
    assert check_architecture(qwen_folder, QWEN3_0_6B_BASE) == []


def test_each_difference_is_named(qwen_folder, capsys):
    tensors = shapes(QWEN3_0_6B_CONFIG)
    del tensors["model.layers.27.mlp.down_proj.weight"]
    write_header_only(qwen_folder / "model.safetensors", tensors)
    config = {**QWEN3_0_6B_CONFIG, "vocab_size": 151_669}
    (qwen_folder / "config.json").write_text(json.dumps(config))
    problems = check_architecture(qwen_folder, QWEN3_0_6B_BASE)
    assert problems == ["config.json vocab_size is 151669, expected 151,936",
                        "the weights hold 592,904,192 parameters, expected 596,049,920 (tied) or 751,632,384 (untied)"]
    assert main(["check-model", str(qwen_folder)]) == 1
    assert "does not hold Qwen/Qwen3-0.6B-Base (2 difference(s))" in capsys.readouterr().out


def test_a_truncated_or_pickled_checkpoint_is_refused(qwen_folder):
    write_header_only(qwen_folder / "model.safetensors", shapes(QWEN3_0_6B_CONFIG), cut=1000)
    (problem,) = check_architecture(qwen_folder, QWEN3_0_6B_BASE)
    size = (qwen_folder / "model.safetensors").stat().st_size
    assert problem == f"model.safetensors is truncated: its header declares {size + 1000:,} bytes, the file holds {size:,}"
    (qwen_folder / "model.safetensors").unlink()
    (qwen_folder / "pytorch_model.bin").write_bytes(b"\x80\x04not read")
    assert check_architecture(qwen_folder, QWEN3_0_6B_BASE) == ["no *.safetensors weights (a pickle checkpoint is never loaded)"]


def test_another_eos_is_named(qwen_folder):
    config = json.loads((qwen_folder / "tokenizer_config.json").read_text())
    config["eos_token"] = "<|im_end|>"
    (qwen_folder / "tokenizer_config.json").write_text(json.dumps(config))
    assert check_architecture(qwen_folder, QWEN3_0_6B_BASE) == [
        "the tokenizer's EOS is '<|im_end|>' (id 151645), expected '<|endoftext|>' = 151643"]


def test_a_paper_run_on_another_model_is_refused_before_anything_is_written(tmp_path):
    """model.path pointed at the tiny checkpoint with the paper's model config: one ModelLoadError."""
    from rlvr_sweep.run.plan import plan
    cfg = compose_cfg(["+arm=baseline", "model.path=pkg:rlvr_sweep.policy/assets/tiny_qwen3",
                       "data=toy_arith", "eval.benchmarks=[toy_heldout]", f"run.out_root={tmp_path}/runs"])
    with pytest.raises(ModelLoadError, match=r"does not hold Qwen/Qwen3-0.6B-Base: config.json vocab_size is 400"):
        plan(cfg)
    assert not (tmp_path / "runs").exists()

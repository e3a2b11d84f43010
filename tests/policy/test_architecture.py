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


# The Qwen3 Base family's published config.json numbers (Qwen/Qwen3-{1.7B,4B,8B}-Base), written out here so that
# a slip in `architecture.py` is caught: (hidden, intermediate, layers, heads, tied) and the published counts.
FAMILY = {
    "qwen3_1_7b_base": ((2048, 6144, 28, 16, True), 1_720_574_976, "Qwen/Qwen3-1.7B-Base"),
    "qwen3_4b_base": ((2560, 9728, 36, 32, True), 4_022_468_096, "Qwen/Qwen3-4B-Base"),
    "qwen3_8b_base": ((4096, 12288, 36, 32, False), 8_190_735_360, "Qwen/Qwen3-8B-Base"),
}


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_the_family_presets_hold_the_published_shapes(name, tmp_path, qwen3_tokenizer):
    from rlvr_sweep.policy.architecture import CONFIGS, EXPECTED

    (hidden, intermediate, layers, heads, tied), published, hub_id = FAMILY[name]
    config = CONFIGS[name]
    assert (config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"],
            config["num_attention_heads"], config["tie_word_embeddings"]) == (hidden, intermediate, layers, heads, tied)
    assert (config["num_key_value_heads"], config["head_dim"], config["vocab_size"]) == (8, 128, 151_936)
    expected = EXPECTED[name]
    assert expected.hub_id == hub_id and (expected.params_tied if tied else expected.params_untied) == published
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    for file in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        shutil.copy(QWEN3_TOKENIZER / file, folder / file)
    tensors = shapes(config, tied=tied)  # transformers' own Qwen3 on the meta device: the real tensor shapes
    names = list(tensors)
    half = len(names) // 2  # the hub splits the weights over several files: the check reads them all
    write_header_only(folder / "model-00001-of-00002.safetensors", {k: tensors[k] for k in names[:half]})
    write_header_only(folder / "model-00002-of-00002.safetensors", {k: tensors[k] for k in names[half:]})
    assert check_architecture(folder, expected) == []
    assert check_architecture(folder, QWEN3_0_6B_BASE)[0] == f"config.json hidden_size is {hidden}, expected 1,024"
    assert main(["check-model", str(folder), "--model", name]) == 0


def test_a_family_preset_composes_and_names_its_hub_id():
    for name, (_, _, hub_id) in FAMILY.items():
        cfg = compose_cfg(["+arm=baseline", f"model={name}"])
        assert (cfg.model.name, cfg.model.hub_id, cfg.model.path, cfg.model.dtype) == (name, hub_id, None, "bfloat16")


def test_fetch_model_downloads_the_named_models_hub_id(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no network here: the line names what it tried
    assert main(["fetch-model", "--out", str(tmp_path / "m"), "--model", "qwen3_4b_base"]) == 2
    assert "fetch-model: error: cannot download Qwen/Qwen3-4B-Base into" in capsys.readouterr().err

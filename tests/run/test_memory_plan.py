"""The preflight's memory estimate (`run.memory_plan`): its terms by hand for the Qwen3 family, the kept terms against
the real tensors of the tiny model, the fitted activation formula against what autograd saves, and the one-line
refusal of a run that cannot fit, before anything is written."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from rlvr_sweep.config import ModelConfig
from rlvr_sweep.policy import load_policy
from rlvr_sweep.policy.architecture import CONFIGS
from rlvr_sweep.run import plan
from rlvr_sweep.run.memory_plan import DoesNotFit, Shape, estimate_for
from rlvr_sweep.update.losses import token_logprobs
from tests.conftest import QWEN3_TOKENIZER, need_data
from tests.helpers import compose_cfg
from tests.policy.test_architecture import shapes, write_header_only

GIB = 2**30


def shape_of(name: str) -> Shape:
    c = CONFIGS[name]
    return Shape(c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"],
                 c["num_key_value_heads"], c["head_dim"], c["vocab_size"], c["tie_word_embeddings"])


@pytest.mark.parametrize("name, published, untied", [
    ("qwen3_0_6b_base", 596_049_920, 751_632_384),  # the paper's P (untied)
    ("qwen3_1_7b_base", 1_720_574_976, 1_720_574_976 + 151_936 * 2048),
    ("qwen3_4b_base", 4_022_468_096, 4_022_468_096 + 151_936 * 2560),
    ("qwen3_8b_base", 8_190_735_360, 8_190_735_360),  # published untied
])
def test_the_kept_terms_by_hand(name, published, untied):
    """bf16 weights (the head untied, as the baseline trains it), gradients and AdamW's two moments at bf16: 8 bytes a
    parameter; a KL reference adds a copy, a tail average a float32 one; LoRA keeps the base and trains r (in + out)
    per adapted layer in float32."""
    cfg = compose_cfg(["+arm=ra_flat", f"model={name}"])
    est = estimate_for(cfg, shape_of(name), published, {"train": 200, "eval": 200})
    assert est.kept == {"weights": 2 * untied, "gradients": 2 * untied, "AdamW moments": 4 * untied,
                        "KL reference copy": 0, "tail average": 0}
    kl = estimate_for(compose_cfg(["+arm=grpo_original", f"model={name}"]), shape_of(name), published, {})
    assert kl.kept["KL reference copy"] == 2 * untied
    tail = estimate_for(compose_cfg(["+arm=ra_mst_tail50", f"model={name}"]), shape_of(name), published, {})
    assert tail.kept["tail average"] == 4 * untied
    lora = estimate_for(compose_cfg(["+arm=ra_flat", f"model={name}", "lora.rank=32"]), shape_of(name), published, {})
    c = CONFIGS[name]
    h, i, q, kv = c["hidden_size"], c["intermediate_size"], 128 * c["num_attention_heads"], 128 * 8
    adapter = c["num_hidden_layers"] * 32 * ((h + q) + 2 * (h + kv) + (q + h) + 2 * (h + i) + (i + h))
    assert lora.kept == {"weights": 2 * untied + 4 * adapter, "gradients": 4 * adapter, "AdamW moments": 8 * adapter,
                         "KL reference copy": 0, "tail average": 0}


def test_sharding_divides_the_kept_terms_and_gathers_a_layer_and_the_ends():
    cfg = compose_cfg(["+arm=ra_flat", "model=qwen3_1_7b_base"])
    shape, prompts = shape_of("qwen3_1_7b_base"), {"train": 200, "eval": 200}
    one, two = (estimate_for(cfg, shape, 1_720_574_976, prompts, shards) for shards in (1, 2))
    untied = 1_720_574_976 + 151_936 * 2048
    assert two.kept["weights"] == untied and two.kept["AdamW moments"] == 2 * untied  # bf16: 2 bytes, halved
    layer = 2048 * (2 * 16 + 2 * 8) * 128 + 3 * 2048 * 6144
    assert two.kept["weights gathered for a forward"] == 2 * (layer + 2 * 151_936 * 2048)
    # each rank backpropagates its share of the group (`run.ranks`): 4 of the 8 rollouts
    four = estimate_for(compose_cfg(["+arm=ra_flat", "model=qwen3_1_7b_base", "train.backward_micro_batch=4"]), shape,
                        1_720_574_976, prompts)
    assert two.working == {**one.working, "the training pass": four.working["the training pass"]}
    assert two.working["the training pass"] < one.working["the training pass"]
    # per-rollout seeds: each rank also decodes its share, with the whole weights gathered for it
    rollouts = ["+arm=ra_flat", "model=qwen3_1_7b_base", "eval.batch_size=1"]  # the rollouts' batch is the largest
    split = estimate_for(compose_cfg([*rollouts, "train.rollout_seeding=per_rollout"]), shape, 1_720_574_976,
                         {"train": 200}, 2)
    half, whole = (estimate_for(compose_cfg([*rollouts, f"sampler.group_size={g}"]), shape, 1_720_574_976,
                                {"train": 200}) for g in (4, 8))
    assert split.working["decoding"] == half.working["decoding"] + 2 * untied
    assert 2 * half.working["decoding"] == whole.working["decoding"]


def test_the_kept_terms_are_the_real_tensors_of_a_run():
    """The tiny model as a run holds it after an update: its weights, their gradients and AdamW's moments."""
    for lora in (None, 4):
        overrides = ["+arm=ra_flat", "profile=smoke"] + ([f"lora.rank={lora}"] if lora else [])
        cfg = compose_cfg(overrides)
        policy = load_policy(ModelConfig(name="tiny", hub_id=None, path="pkg:rlvr_sweep.policy/assets/tiny_qwen3",
                                         dtype="float32", device="cpu"), lora=cfg.lora, seed=0)
        params = [p for p in policy.model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params)
        ids = torch.randint(0, 400, (2, 12))
        token_logprobs(policy.model, ids, torch.ones_like(ids)).sum().backward()
        optimizer.step()
        folder = plan(cfg).model_folder
        est = estimate_for(cfg, Shape.of(folder), None, {})
        assert est.kept["weights"] == sum(p.numel() * p.element_size() for p in policy.model.parameters())
        assert est.kept["gradients"] == sum(p.grad.numel() * p.grad.element_size() for p in params)
        assert est.kept["AdamW moments"] == sum(s[k].numel() * s[k].element_size() for s in optimizer.state.values()
                                                for k in ("exp_avg", "exp_avg_sq"))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_activation_formula_is_what_autograd_saves(dtype):
    """What the training pass saves per decoder layer (parameters left out), on the tiny model's shape: within 10 %
    of the formula fitted on five other shapes."""
    from transformers import AutoModelForCausalLM

    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", f"model.dtype={dtype}", "sampler.group_size=4"])
    folder = plan(cfg).model_folder
    shape = Shape.of(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype)).train()
    rows, prompt = 4, 30
    length = prompt + 64  # the smoke horizon: 512 x 1/8
    ids = torch.randint(0, shape.vocab, (rows, length))
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in params:
            saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.model(input_ids=ids, attention_mask=torch.ones_like(ids))
    est = estimate_for(cfg, shape, None, {"train": prompt})
    b = 4 if dtype == "float32" else 2
    head = rows * length * shape.vocab * b + 2 * rows * 64 * shape.vocab * 4
    body = est.working["the training pass"] - head
    assert body == pytest.approx(sum(saved.values()), rel=0.10)


@pytest.fixture
def qwen3_4b(tmp_path, qwen3_tokenizer):
    folder = tmp_path / "Qwen3-4B-Base"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIGS["qwen3_4b_base"]))
    for file in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        shutil.copy(QWEN3_TOKENIZER / file, folder / file)
    write_header_only(folder / "model.safetensors", shapes(CONFIGS["qwen3_4b_base"]))  # headers only: a sparse file
    return folder


def test_a_run_that_cannot_fit_is_refused_in_one_line_naming_what_would(qwen3_4b, tmp_path):
    data = need_data("math_train.jsonl", "math500.jsonl")
    args = ["+arm=ra_flat", "model=qwen3_4b_base", f"model.path={qwen3_4b}", f"data.root={data}",
            "eval.benchmarks=[math500]", f"run.out_root={tmp_path}/runs"]
    with pytest.raises(DoesNotFit) as refused:
        plan(compose_cfg([*args, "model.device_memory_gb=80"]))
    line = str(refused.value)
    assert "\n" not in line and line.startswith("this run needs about ")
    assert "more than model.device_memory_gb=80 holds (80.00 GiB); the largest term is the training pass" in line
    assert "it would fit with lora.rank=16 (about" not in line  # an adapter saves the moments, not the activations
    assert "train.activation_checkpointing=true (about" in line and "train.backward_micro_batch=1 (about" in line
    assert line.endswith("or sharding over 2 ranks (torchrun --nproc-per-node 2, or hydra.launcher.tasks_per_node=2) "
                         "(about 41.75 GiB)")  # the fewest ranks that hold it
    assert not (tmp_path / "runs").exists()
    assert plan(compose_cfg([*args, "model.device_memory_gb=80", "train.activation_checkpointing=true"])).memory.peak \
        < 80 * GIB
    assert plan(compose_cfg([*args, "model.device_memory_gb=141"])).memory.peak > 80 * GIB  # an H200 holds it


def test_a_run_sharing_its_gpu_is_checked_against_its_share(qwen3_4b, tmp_path):
    """`model.memory_share`: k runs on one GPU each take a share of its memory; the estimate is held against it."""
    data = need_data("math_train.jsonl", "math500.jsonl")
    args = ["+arm=ra_flat", "model=qwen3_4b_base", f"model.path={qwen3_4b}", f"data.root={data}",
            "eval.benchmarks=[math500]", f"run.out_root={tmp_path}/runs", "model.device_memory_gb=141"]
    assert plan(compose_cfg(args)).memory.peak > 80 * GIB  # the whole H200 holds it
    with pytest.raises(DoesNotFit) as refused:
        plan(compose_cfg([*args, "model.memory_share=0.5"]))
    assert "more than model.memory_share=0.5 of model.device_memory_gb=141 holds (70.50 GiB); the largest term is " \
           "the training pass" in str(refused.value)
    assert "train.activation_checkpointing=true (about 49.30 GiB)" in str(refused.value)
    assert plan(compose_cfg([*args, "model.memory_share=0.5", "train.activation_checkpointing=true"])).memory.peak \
        < 70.5 * GIB
    assert not (tmp_path / "runs").exists()


def test_a_memory_share_caps_only_a_cuda_device():
    from rlvr_sweep.policy.loading import cap_memory

    assert cap_memory(torch.device("cpu"), 0.25) is False and cap_memory(torch.device("cpu"), None) is False
    for bad in ("0", "1.5", "-0.1"):
        with pytest.raises(Exception, match="model.memory_share"):
            compose_cfg(["+arm=ra_flat", f"model.memory_share={bad}"])
    assert compose_cfg(["+arm=ra_flat", "model.memory_share=1"]).model.memory_share == 1


@pytest.mark.slow
def test_a_slurm_sweep_is_planned_for_the_ranks_each_run_will_have(qwen3_4b, tmp_path):
    """The preflight runs on a login node: the line's `hydra.launcher.tasks_per_node` says how many ranks each run
    will shard over, and its memory is planned for them."""
    from rlvr_sweep.sweep.preflight import PreflightError, check_sweep
    from tests.conftest import CONF_DIR

    data = need_data("math_train.jsonl", "math500.jsonl")
    line = ["+arm=ra_flat", "model=qwen3_4b_base", f"model.path={qwen3_4b}", f"data.root={data}",
            "eval.benchmarks=[math500]", f"run.out_root={tmp_path}/runs", "model.device_memory_gb=80", "seed=1"]
    with pytest.raises(PreflightError, match="DoesNotFit|more than model.device_memory_gb=80 holds"):
        check_sweep(str(CONF_DIR), line, record=False)
    assert check_sweep(str(CONF_DIR), [*line, "hydra/launcher=slurm_debug", "hydra.launcher.tasks_per_node=2"],
                       record=False) == 1

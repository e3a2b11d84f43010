"""A LoRA run (`lora.*`, the `baseline_lora` / `stopped_tree_lora` presets): what it trains, checkpoints, saves and
records, that it resumes exactly after a kill, and the settings it refuses before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlvr_sweep import store
from rlvr_sweep.config import ConfigError, ModelConfig, identity_dict, paper_arm
from rlvr_sweep.policy.source import resolve_model_folder
from rlvr_sweep.run import checkpoint, run
from tests.helpers import compose_cfg, run_dir_of, run_killed_at, same_inputs_identity
from tests.run.test_resume import assert_same_ledger, ledger

pytest.importorskip("peft")

SMOKE = ["profile=smoke", "eval.limit=8"]


def test_a_lora_preset_is_arm_1_through_an_adapter_and_not_a_paper_arm():
    cfg = compose_cfg(["+arm=baseline_lora"])
    base = compose_cfg(["+arm=baseline"])
    assert (cfg.lora.rank, cfg.lora.alpha, cfg.lora.dropout, cfg.lora.target_modules) == (32, 32.0, 0.0, ["all-linear"])
    assert cfg.train.lr == 1e-4 and base.train.lr == 1e-5  # LoRA Without Regret's 10x
    assert (cfg.sampler, cfg.estimator, cfg.optimizer_step, cfg.reward, cfg.train.loss_recipe) == (
        base.sampler, base.estimator, base.optimizer_step, base.reward, base.train.loss_recipe)
    assert paper_arm(cfg) == "" and paper_arm(base) == "1"
    tree = compose_cfg(["+arm=stopped_tree_lora", "horizon=1024"])
    assert (tree.sampler.name, tree.estimator.name, tree.lora.rank, paper_arm(tree)) == ("stopped_tree", "tree_mean", 32, "")


def test_the_adapter_is_part_of_the_identity_only_when_set():
    plain = compose_cfg(["+arm=ra_flat"])
    assert "lora" not in identity_dict(plain) and identity_dict(compose_cfg(["+arm=ra_flat", "lora.rank=8"]))["lora"][
        "rank"] == 8
    adapted = [compose_cfg(["+arm=ra_flat", *extra]) for extra in
               (["lora.rank=8"], ["lora.rank=16"], ["lora.rank=8", "lora.alpha=8"], ["lora.rank=8", "lora.init_seed=1"])]
    hashes = {same_inputs_identity(c) for c in adapted}
    assert len(hashes) == 4 and same_inputs_identity(plain) not in hashes


@pytest.mark.parametrize("overrides, message", [
    (["model.engine=static"], "lora.rank=4 with model.engine=static: that engine reads the base weights alone"),
    (["model.engine=vllm"], "with model.engine=vllm"),
    (["task=evaluate", "model.path=pkg:rlvr_sweep.policy/assets/tiny_qwen3"], "lora.rank=4 with task=evaluate"),
])
def test_what_an_adapter_cannot_go_with_is_refused_before_any_work(overrides, message, tmp_path):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        compose_cfg(["+arm=ra_flat", "profile=smoke", "lora.rank=4", *overrides, f"run.out_root={tmp_path}"])
    assert not any(tmp_path.iterdir())


def test_adapter_settings_without_a_rank_are_refused():
    with pytest.raises(ConfigError, match=r"lora\.alpha=8\.0 without lora\.rank: no adapter is made"):
        compose_cfg(["+arm=ra_flat", "lora.alpha=8"])


def test_a_lora_run_trains_the_adapter_alone_and_keeps_it_merged_and_as_peft_saves_it(tmp_path):
    info = run(compose_cfg(["+arm=baseline_lora", *SMOKE, "train.steps=6", "lora.rank=4", f"run.out_root={tmp_path}"]))
    run_dir = Path(info["run_dir"])
    assert info["status"] == "finished" and info["paper_arm"] == ""
    assert info["params"] == 149_888  # the tiny model's, untied: P of the FLOP proxies is the model's forward
    assert info["adapter"]["parameters"] == 9_728 and info["adapter"]["layers"] == 14
    assert info["adapter_dir"] == "adapter"
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(run_dir / "model")
    shipped = resolve_model_folder(ModelConfig(name="tiny", hub_id=None, path="pkg:rlvr_sweep.policy/assets/tiny_qwen3"))
    base = AutoModelForCausalLM.from_pretrained(shipped)
    base.lm_head.weight = torch.nn.Parameter(base.lm_head.weight.detach().clone())  # untied, as the run's
    ids = torch.tensor([[3, 14, 15, 92, 65]])
    with torch.no_grad():
        before = base(input_ids=ids).logits
        via_peft = PeftModel.from_pretrained(base, run_dir / "adapter")(input_ids=ids).logits
        assert torch.allclose(via_peft, merged(input_ids=ids).logits, atol=1e-5)
        assert not torch.allclose(via_peft, before, atol=1e-5)  # the adapter learned something
    # the frozen weights are the base's: only the adapted layers' merged weights moved
    shipped_weights = {k: v for k, v in AutoModelForCausalLM.from_pretrained(shipped).state_dict().items()}
    moved = {k for k, v in merged.state_dict().items() if k in shipped_weights and not torch.equal(v, shipped_weights[k])}
    assert moved and all(k.endswith("proj.weight") for k in moved)


def test_a_killed_lora_run_resumes_to_the_uninterrupted_ledger_from_an_adapter_only_checkpoint(tmp_path):
    args = ["+arm=baseline_lora", *SMOKE, "lora.rank=4", "lora.dropout=0.1", "train.steps=12",
            "train.checkpoint_every=4", "train.write_every=2"]
    reference = run(compose_cfg([*args, f"run.out_root={tmp_path}/a"]))
    cfg = compose_cfg([*args, f"run.out_root={tmp_path}/b"])
    run_killed_at(cfg, step=6)
    run_dir = run_dir_of(cfg)
    payload = torch.load(run_dir / checkpoint.CHECKPOINT, weights_only=True)
    assert payload["model"] and all("lora_" in k for k in payload["model"])  # the adapter alone
    assert len(payload["optimizer"]["state"]) == len(payload["model"]) == 28
    resumed = run(cfg)
    assert resumed["resumed_from_step"] == 4 and resumed["status"] == "finished"
    assert_same_ledger(ledger(reference["run_dir"]), ledger(run_dir))
    same = [(Path(d) / "model" / "model.safetensors").read_bytes() for d in (reference["run_dir"], run_dir)]
    assert same[0] == same[1]


def test_a_lora_runs_kl_reference_is_its_base_with_the_adapter_off(tmp_path, caplog):
    caplog.set_level("INFO", logger="rlvr_sweep")
    info = run(compose_cfg(["+arm=ra_flat", *SMOKE, "eval=none", "lora.rank=4", "train.steps=6", "objective.kl_beta=0.04",
                            "optimizer_step=full_backward", f"run.out_root={tmp_path}"]))
    assert "the KL reference is the base model with the adapter switched off" in caplog.text
    assert "frozen copy" not in caplog.text
    steps = store.read_table(info["run_dir"], "steps")
    kl = steps["kl_ref"].dropna().tolist()
    assert kl[0] == 0.0  # before the first update the adapted policy is the base (B = 0)
    assert any(k > 0 for k in kl[1:])

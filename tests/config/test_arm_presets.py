"""Every arm preset, composed, holds the paper's recipe (Table 1, Table 3, §3.2, §4): one row per arm,
written by hand from the paper; the paper's arms keep the paper's objective, and the arms of the objectives
GRPO is compared with hold the constants of the papers they cite (one row each, written from those papers)."""

from __future__ import annotations

import pytest

from rlvr_sweep.config import ObjectiveConfig, paper_arm
from tests.conftest import CONF_DIR
from tests.helpers import compose_cfg

COLUMNS = ("sampler", "estimator", "beta", "step", "gate", "recipe", "horizon", "data", "limit", "warmup", "accumulate",
           "unit_norm", "zero_mass", "active", "steps", "max_steps", "tail", "split", "paper")
FLAT, TREE = ("flat", "grpo", 0.0), ("stopped_tree", "tree_mean")
ROWS = {  # columns as COLUMNS; alpha is 0.5, K x B = 4 x 2, T_min 96, G = 8 everywhere
    "baseline":           (*FLAT, "full_backward", None, "sum_then_scale", 512, "math_train", None, 0, 1, False, False, None, 50, 1000, None, 160, "1"),
    "zero_grad_flat":     (*FLAT, "zero_grad", None, "scale_then_sum", 512, "math_train", None, 0, 1, False, False, None, 50, 1000, None, 160, "2"),
    "gate_flat":          (*FLAT, "skip", 30, "scale_then_sum", 512, "math_train", None, 0, 1, False, False, None, 50, 1000, None, 160, "3"),
    "ra_flat":            (*FLAT, "zero_grad", 30, "scale_then_sum", 512, "math_train", None, 0, 1, False, False, None, 50, 1000, None, 160, "4"),
    "stopped_tree":       (*TREE, 0.0, "zero_grad", 30, "scale_then_sum", 512, "math_train", None, 3, 1, False, False, None, 50, 1000, None, 160, "5"),
    "stopped_tree_bonus": (*TREE, 0.25, "zero_grad", 30, "scale_then_sum", 512, "math_train", None, 3, 1, False, False, None, 50, 1000, None, 160, "6"),
    "root_restart":       ("root_restart", "tree_mean", 0.0, "zero_grad", 30, "scale_then_sum", 512, "math_train", None, 3, 1, False, False, None, 50, 1000, None, 160, "7"),
    "root_restart_bonus": ("root_restart", "tree_mean", 0.25, "zero_grad", 30, "scale_then_sum", 512, "math_train", None, 3, 1, False, False, None, 50, 1000, None, 160, "8"),
    "midpoint_ra_mst":    ("midpoint", "tree_mean", 0.25, "zero_grad", 30, "scale_then_sum", 512, "math_train", None, 3, 1, False, False, None, 50, 1000, None, 160, "9"),
    "midpoint_mst":       ("midpoint", "tree_mean", 0.25, "zero_grad", 30, "scale_then_sum", 512, "math_train", None, 0, 1, False, False, None, 50, 1000, None, 160, "10"),
    "stopped_tree_accum": (*TREE, 0.0, "zero_grad", 30, "scale_then_sum", 512, "math_train_stratified", 100, 3, 4, True, True, None, 100, 1000, None, 160, "11"),
    "ablate_skip":        (*FLAT, "skip", None, "scale_then_sum", 512, "math_train", None, 0, 1, False, False, None, 50, 1000, None, 160, "ablate_skip"),
    "ablate_selective":   ("midpoint", "clamped_prefix", 0.25, "zero_grad", 30, "scale_then_sum", 512, "math_train", None, 0, 1, False, False, None, 50, 1000, None, 160, "ablate_selective"),
    "mst_act30":          ("midpoint", "tree_mean", 0.25, "zero_grad", 30, "scale_then_sum", 512, "math_train", None, 0, 1, False, False, 30, 50, 1000, None, 160, "mst_act30"),
    "mst_zpd_act35":      ("midpoint", "tree_mean", 0.25, "zero_grad", 30, "scale_then_sum", 512, "math_train_zpd", None, 0, 1, False, False, 35, 50, 90, None, 160, "mst_zpd_act35"),
    "ra_mst_tail50":      ("midpoint", "tree_mean", 0.25, "zero_grad", 30, "scale_then_sum", 512, "math_train", None, 3, 1, False, False, None, 50, 1000, [26, 50], 160, "ra_mst_tail50"),
    "stopped_tree_h1024": (*TREE, 0.0, "zero_grad", 30, "scale_then_sum", 1024, "math_train", None, 3, 1, False, True, None, 50, 1000, None, 240, "stopped_tree_h1024"),
    "cf_grpo":            ("cf_fork", "cf_uncond", 0.0, "zero_grad", 30, "scale_then_sum", 1024, "math_train", None, 3, 1, False, False, None, 50, 1000, None, 160, "14"),
    "rg_cf_grpo":         ("cf_fork", "cf_rg", 0.0, "zero_grad", 30, "scale_then_sum", 1024, "math_train", None, 3, 1, False, False, None, 50, 1000, None, 160, "15"),
    "rg_cf_grpo_act18":   ("cf_fork", "cf_rg", 0.0, "zero_grad", 30, "scale_then_sum", 1024, "math_train", None, 3, 1, False, False, 18, 50, 1000, None, 160, "16"),
    "pb_cf_grpo":         ("cf_fork", "cf_pb", 0.0, "zero_grad", 30, "scale_then_sum", 1024, "math_train", None, 3, 1, False, False, None, 50, 1000, None, 160, "17"),
    "rg_cf_grpo_strat":   ("cf_fork", "cf_rg", 0.0, "zero_grad", 30, "scale_then_sum", 1024, "math_train_stratified", 50, 3, 1, False, False, None, 50, 1000, None, 160, "18"),
    "pb_cf_grpo_strat":   ("cf_fork", "cf_pb", 0.0, "zero_grad", 30, "scale_then_sum", 1024, "math_train_stratified", 50, 3, 1, False, False, None, 50, 1000, None, 160, "19"),
}
HINGE = {"cf_grpo": 0.5, "rg_cf_grpo": 0.15, "rg_cf_grpo_act18": 0.15, "pb_cf_grpo": 0.15, "rg_cf_grpo_strat": 0.15,
         "pb_cf_grpo_strat": 0.15}  # the fork hinge weight (§5.6 item 4)


def observed(cfg) -> tuple:
    s, e, t = cfg.sampler, cfg.estimator, cfg.train
    return (s.name, e.name, e.beta, cfg.optimizer_step.name, cfg.reward.gate_chars, t.loss_recipe, cfg.horizon.tokens,
            cfg.data.name, cfg.data.limit, s.bifurcate_after_active, t.accumulate_questions, t.unit_question_grad,
            e.zero_cont_token_mass, t.active_steps, t.steps, t.max_steps, t.tail_average, s.split_tokens, paper_arm(cfg))


OBJECTIVE_COLUMNS = ("objective", "clip_low", "clip_high", "clip_dual", "passes", "mini_batches", "aggregation", "kl_beta",
                     "kl_estimator", "mask_truncated", "estimator", "step", "gate", "recipe", "active", "dynamic",
                     "overlong_buffer", "overlong_penalty")
OBJECTIVE_ROWS = {  # sampler flat, G = 8, lr 1e-5, horizon 512 and the other constants of Arm 1
    # DeepSeekMath eq. 3-4, §4.2 (eps: PPO's 0.2, not stated there)
    "grpo_original": ("ppo_clip", 0.2, 0.2, None, 1, 1, "seq_mean_token_mean", 0.04, "k3", False, "grpo",
                      "full_backward", None, "scale_then_sum", None, False, None, 1.0),
    # GSPO §5.1: eps 3e-4 / 4e-4, four mini-batches, eq. 5's mean of token means
    "gspo": ("gspo", 3e-4, 4e-4, None, 1, 4, "seq_mean_token_mean", 0.0, "k3", False, "grpo", "zero_grad", None,
             "scale_then_sum", None, False, None, 1.0),
    # Dr. GRPO: no std, a constant normaliser
    "dr_grpo": ("reinforce", 0.2, 0.2, None, 1, 1, "seq_mean_token_sum_norm", 0.0, "k3", False, "dr_grpo", "zero_grad",
                None, "scale_then_sum", None, False, None, 1.0),
    # DAPO §3-4: clip-higher 0.2 / 0.28, token mean, dynamic sampling to 50 updates, L_cache / L_max = 4096 / 20480
    "dapo": ("ppo_clip", 0.2, 0.28, None, 1, 2, "token_mean", 0.0, "k3", False, "grpo", "full_backward", None,
             "scale_then_sum", 50, True, 102, 1.0),
    # MiniMax-M1 §3.1: no lower bound on the weight, DAPO's dynamic sampling and length penalty, no KL
    "cispo": ("cispo", 1.0, 4.0, None, 1, 2, "token_mean", 0.0, "k3", False, "grpo", "full_backward", None,
              "scale_then_sum", 50, True, 102, 1.0),
}


def objective_row(cfg) -> tuple:
    o = cfg.objective
    return (o.name, o.clip_low, o.clip_high, o.clip_dual, o.passes, o.mini_batches, o.aggregation, o.kl_beta,
            o.kl_estimator, o.mask_truncated, cfg.estimator.name, cfg.optimizer_step.name, cfg.reward.gate_chars,
            cfg.train.loss_recipe, cfg.train.active_steps, cfg.train.dynamic_sampling, cfg.reward.overlong_buffer,
            cfg.reward.overlong_penalty)


LORA_ROWS = {  # arm -> (the paper arm it adapts, rank, alpha, dropout, targets, lr): "LoRA Without Regret" (Schulman
    # et al. 2025): every linear layer, alpha 32, 10x full fine-tuning's learning rate
    "baseline_lora": ("baseline", 32, 32.0, 0.0, ["all-linear"], 1e-4),
    "stopped_tree_lora": ("stopped_tree", 32, 32.0, 0.0, ["all-linear"], 1e-4),
}


def test_the_table_covers_every_arm_file():
    assert sorted([*ROWS, *OBJECTIVE_ROWS, *LORA_ROWS]) == sorted(p.stem for p in (CONF_DIR / "arm").glob("*.yaml"))


@pytest.mark.parametrize("arm", sorted(LORA_ROWS))
def test_a_lora_arm_is_its_paper_arm_through_an_adapter(arm):
    adapts, rank, alpha, dropout, targets, lr = LORA_ROWS[arm]
    cfg, paper = compose_cfg([f"+arm={arm}"]), compose_cfg([f"+arm={adapts}"])
    l = cfg.lora
    assert (l.rank, l.alpha, l.dropout, l.target_modules, l.init_seed, cfg.train.lr) == (rank, alpha, dropout, targets,
                                                                                         None, lr)
    assert observed(cfg)[:-1] == observed(paper)[:-1] and paper_arm(cfg) == "" and paper_arm(paper) != ""


@pytest.mark.parametrize("arm", sorted(OBJECTIVE_ROWS))
def test_an_objective_arm_holds_its_papers_constants(arm):
    cfg = compose_cfg([f"+arm={arm}"])
    assert dict(zip(OBJECTIVE_COLUMNS, objective_row(cfg))) == dict(zip(OBJECTIVE_COLUMNS, OBJECTIVE_ROWS[arm]))
    assert (cfg.sampler.name, cfg.sampler.group_size, cfg.train.lr, cfg.horizon.tokens) == ("flat", 8, 1e-5, 512)
    assert paper_arm(cfg) == ""  # beside the paper's arms, not one of them


@pytest.mark.parametrize("arm", sorted(ROWS))
def test_arm_preset_is_the_papers_recipe(arm):
    cfg = compose_cfg([f"+arm={arm}"])
    got = dict(zip(COLUMNS, observed(cfg)))
    want = dict(zip(COLUMNS, ROWS[arm]))
    assert got == want
    s, e, t = cfg.sampler, cfg.estimator, cfg.train
    assert (e.alpha, e.std, e.eps, s.K, s.B, s.t_min, s.group_size, s.temperature, s.top_p) == \
        (0.5, "unbiased", 1e-4, 4, 2, 96, 8, 0.8, 0.9)
    assert (t.lr, t.grad_clip, t.weight_decay, tuple(t.betas), t.adam_eps) == (1e-5, 1.0, 0.01, (0.9, 0.999), 1e-8)
    assert (cfg.model.hub_id, cfg.model.dtype, cfg.eval.max_new_tokens, cfg.eval.batch_size) == \
        ("Qwen/Qwen3-0.6B-Base", "bfloat16", 2048, 32)
    assert cfg.estimator.hinge_weight == HINGE.get(arm, 0.0)
    assert cfg.objective == ObjectiveConfig()  # the paper's: reinforce, one pass, sum over tokens / G, no KL
    if cfg.sampler.name == "cf_fork":
        assert (s.fork_start, s.fork_end, s.fork_threshold) == (4, 64, 0.5)


def test_a_paper_arm_that_loads_a_plugin_or_changes_the_update_is_no_paper_arm():
    """`+arm=baseline` is Arm 1; with a plugin's option, another objective, dynamic sampling or overlong shaping it
    computes something the paper did not, and the sweep summary and run.json say so (no paper label)."""
    from tests.conftest import REPO

    assert paper_arm(compose_cfg(["+arm=baseline"])) == "1"
    assert paper_arm(compose_cfg(["+arm=baseline", "objective.measure_kl=true"])) == "1"  # measures, computes the same
    rloo = str(REPO / "examples" / "rloo" / "rloo_estimator.py")
    for changed in ([f"plugins=[{rloo}]", "estimator.name=rloo"], ["objective=ppo_clip", "train.loss_recipe=scale_then_sum"],
                    ["train.dynamic_sampling=true"],
                    ["reward.overlong_buffer=100"], ["objective.aggregation=token_mean", "train.loss_recipe=scale_then_sum"]):
        assert paper_arm(compose_cfg(["+arm=baseline", *changed])) == "", changed

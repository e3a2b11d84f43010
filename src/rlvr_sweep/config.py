"""Typed configuration: one flat dataclass per Hydra config group, plus the run-level fields.

`conf/<group>/<option>.yaml` files are presets of these schemas. The entrypoint converts the
composed `DictConfig` once with `OmegaConf.to_object`, so everything below receives dataclasses.
Paper constants (seed paper §1, §3.2, §4.1; baseline spec §6-§7) are the defaults here and in
the `paper` profile; the `smoke` profile scales every length budget by `profile.length_scale`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from hydra.core.config_store import ConfigStore


@dataclass
class ModelConfig:
    name: str = "qwen3_0_6b_base"
    hub_id: Optional[str] = "Qwen/Qwen3-0.6B-Base"
    path: Optional[str] = None  # a local folder; takes precedence over hub_id
    dtype: str = "bfloat16"  # weights and optimizer state (the baseline has no fp32 master copy)
    untie_embeddings: bool = True  # the baseline trains separate embedding and output-head weights
    device: str = "auto"  # "auto" = cuda when available, else cpu


@dataclass
class DataConfig:
    name: str = "math_train"
    root: str = "data"  # folder holding the benchmark JSONL files (see README)
    splits_dir: Optional[str] = None  # the built splits; None = <root>/splits
    train_file: Optional[str] = "math_train.jsonl"  # a file name (see data.data_file); unused by toy_arith
    limit: Optional[int] = None  # use only the first `limit` training rows
    toy_seed: int = 0  # toy_arith only: seed of the generated splits
    toy_train_size: int = 2000
    toy_heldout_size: int = 200


@dataclass
class SamplerConfig:
    name: str = "flat"  # flat | stopped_tree | root_restart | midpoint
    group_size: int = 8  # G rollouts per question (flat); tree samplers draw K x B leaves
    temperature: float = 0.8
    top_p: float = 0.9
    # two-stage branching (paper §4.2); lengths in paper tokens, scaled by profile.length_scale
    K: int = 4  # roots
    B: int = 2  # branches per root
    t_min: int = 96  # earliest newline stopping time
    split_tokens: int = 160  # T_max: stage-1 cap
    midpoint_min_len: int = 32  # midpoint: early-EOS roots at least this long split at a newline
    long_eos_len: int = 104  # midpoint: splits of early-EOS roots longer than this are early_eos_gt104
    bifurcate_after_active: int = 0  # flat rollouts until this many active steps have happened


@dataclass
class EstimatorConfig:
    name: str = "grpo"  # grpo (leaf) | tree_mean | clamped_prefix
    std: str = "unbiased"  # "unbiased" (N-1, the baseline) or "population"
    eps: float = 1e-4
    beta: float = 0.0  # tree: weight of the max backup M_k in the prefix value
    alpha: float = 0.5  # tree: weight of the local (R - Vhat) term in continuation credit
    zero_cont_token_mass: bool = False  # shift continuation credit to zero signed token mass


@dataclass
class OptimizerStepConfig:
    name: str = "full_backward"  # what a homogeneous group does: full_backward | skip | zero_grad


@dataclass
class HorizonConfig:
    tokens: int = 512  # rollout cap in paper tokens (scaled by profile.length_scale)


@dataclass
class RewardConfig:
    name: str = "ungated"
    gate_chars: Optional[int] = None  # paper units; reward only if text.rfind("\\boxed") >= scaled gate


@dataclass
class GraderConfig:
    name: str = "baseline"  # answer equivalence for rewards and eval: baseline | math_verify


@dataclass
class EvalConfig:
    name: str = "greedy"
    benchmarks: list[str] = field(default_factory=lambda: ["math500", "math_val210", "ext240"])
    max_new_tokens: int = 2048  # paper tokens (scaled by profile.length_scale)
    batch_size: int = 32
    limit: Optional[int] = None  # first `limit` items of each benchmark
    before: bool = True  # read out the untrained policy too
    after: bool = True


@dataclass
class ProfileConfig:
    name: str = "paper"
    # every paper length budget is multiplied by this: rollout cap and eval cap (tokens) and the
    # derivation gate (characters before the last \boxed)
    length_scale: float = 1.0


@dataclass
class TrainConfig:
    steps: int = 50  # single-question updates; step s uses training row s % len(rows)
    lr: float = 1e-5
    betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    loss_recipe: str = "scale_then_sum"  # "sum_then_scale" is Arm 1's (baseline) recipe
    backward_micro_batch: Optional[int] = None  # rollouts per backward chunk; None = the whole group
    active_steps: Optional[int] = None  # train until this many active steps (then `steps` is ignored)
    max_steps: int = 1000  # safety cap when training to a number of active steps
    accumulate_questions: int = 1  # questions per optimizer update
    unit_question_grad: bool = False  # scale each question's gradient to unit norm before accumulating
    tail_average: Optional[list[int]] = None  # [first, last] step (1-based): FP32 Polyak average evaluated
    write_every: int = 10  # rewrite the step/rollout/pair tables every this many steps
    checkpoint_every: int = 10  # save checkpoint.pt (for resuming) every this many steps
    num_threads: Optional[int] = None  # torch intra-op CPU threads; None = torch's default


@dataclass
class RunConfig:
    out_root: str = "outputs/runs"
    on_unfinished: str = "restart"  # restart (move the old folder aside, never delete) | error


@dataclass
class Config:
    arm: str = "custom"
    # The paper arm this preset reproduces, per horizon in paper tokens: `stopped_tree` is Arm 5 at
    # 512 and Arm 12 at 1024 ({512: "5", 1024: "12"}); Table 3 ablations give their names. A label,
    # not part of the run's identity; `paper_arm(cfg)` reads it.
    paper_arms: dict[int, str] = field(default_factory=dict)
    seed: int = 42
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    estimator: EstimatorConfig = field(default_factory=EstimatorConfig)
    optimizer_step: OptimizerStepConfig = field(default_factory=OptimizerStepConfig)
    horizon: HorizonConfig = field(default_factory=HorizonConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    grader: GraderConfig = field(default_factory=GraderConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    run: RunConfig = field(default_factory=RunConfig)


def paper_arm(cfg: Config) -> str:
    """The paper arm a run reproduces ("1".."19" or a Table 3 ablation name); "" when none."""
    return cfg.paper_arms.get(cfg.horizon.tokens, "")


def scaled_length(paper_length: int, length_scale: float) -> int:
    """A paper length budget (tokens or characters) in this profile's units (at least 1)."""
    return max(1, round(paper_length * length_scale))


def register_configs() -> None:
    ConfigStore.instance().store(name="base_config", node=Config)

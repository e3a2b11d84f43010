"""Typed configuration: one flat dataclass per Hydra config group, plus the run-level fields.

`conf/<group>/<option>.yaml` files are presets of these schemas. The entrypoint converts the
composed `DictConfig` once (`build.build_config`), so everything below receives dataclasses.
Paper constants (seed paper §1, §3.2, §4.1; baseline spec §6-§7) are the defaults here and in
the `paper` profile; the `smoke` profile scales every length budget by `profile.length_scale`.
Each field declares its valid values beside its default (`setting(default, *rules)`);
`identity=False` marks bookkeeping that does not change what a run computes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional

from rlvr_sweep.config.rules import (
    EVEN, NON_EMPTY, WHEN_SET, above, at_least, between, each, matches, one_of, setting,
)

# arm and profile names become folders of a run's path: one plain component each (no '/', no leading '.')
PATH_NAME = matches(r"(?!.*\.stale-)[A-Za-z0-9_][A-Za-z0-9_+=,@-]*(\.[A-Za-z0-9_+=,@-]+)*",
                    "a plain folder name: letters, digits, _ + = , @ - and inner dots; no '/', no leading '.', "
                    "no '.stale-' (the mark of a moved-aside folder)")

# The names of a choice live in the registry of the stage that implements it (rollout.SAMPLERS,
# credit.ESTIMATORS, reward.REWARDS, evaluation.READOUTS / SCHEDULES, rollout.ENGINES, ...) and are
# checked against it when a job is built (`run.choices`). The value sets below belong to the config:
DTYPE_NAMES = ("bfloat16", "float16", "float32")  # policy.DTYPES maps them to torch dtypes
STD_KINDS = ("unbiased", "population")
KL_ESTIMATORS = ("k1", "k2", "k3")  # update.kl: Schulman's estimators of KL(pi || pi_ref)
KL_PLACES = ("loss", "reward")  # a loss term (DeepSeekMath), or a penalty on each rollout's reward (RLHF)  # the group std of GRPO-style credit: Bessel's (N - 1), or N
TASKS = ("train", "evaluate")


@dataclass
class ModelConfig:
    name: str = setting("qwen3_0_6b_base", NON_EMPTY)
    hub_id: Optional[str] = setting("Qwen/Qwen3-0.6B-Base", NON_EMPTY)
    path: Optional[str] = setting(None, NON_EMPTY)  # a local folder; takes precedence over hub_id
    dtype: str = setting("bfloat16", one_of(*DTYPE_NAMES))  # weights and AdamW state (no fp32 master copy)
    untie_embeddings: bool = True  # the baseline trains separate embedding and output-head weights
    device: str = setting("auto", matches(r"auto|cpu|mps|cuda(:\d+)?", "auto, cpu, mps, cuda or cuda:N"))
    # decoding engine for rollouts and read-outs: `reference` (the loop over a DynamicCache),
    # `static` (preallocated cache, CUDA graphs on a GPU), `vllm` (GPU, `pip install rlvr_sweep[vllm]`)
    engine: str = setting("reference", NON_EMPTY)  # rollout.ENGINES
    # the memory of the device the run will get, in GiB (a SLURM partition's GPUs): the run's estimated peak is
    # checked against it before launch (`run.memory_plan`); None: a CUDA device's own, and no check on the CPU
    device_memory_gb: Optional[float] = setting(None, above(0), identity=False)
    # the share of that memory this run may take, for k runs sharing one GPU (about 1/k, less each process's CUDA
    # context): torch's allocator is capped to it on a CUDA device and the preflight checks the estimate against it;
    # None: the whole device. Caps where the run's memory goes, never what it computes
    memory_share: Optional[float] = setting(None, between(0, 1, low_open=True), identity=False)


@dataclass
class LoraConfig:
    """Low-rank adapters (`peft`'s LoRA, Hu et al. 2021) trained in place of the full weights (`policy.adapter`).
    rank None: full fine-tuning, the paper's. The adapter's A matrices are drawn by peft's init (Kaiming-uniform
    from torch's global CPU generator, B = 0) under `init_seed`, the run's seed when None; the base weights stay
    frozen, and a KL term's reference policy is the base with the adapter switched off (no second copy)."""

    rank: Optional[int] = setting(None, at_least(1))  # r of every adapted layer
    alpha: float = setting(32.0, above(0))  # the update is scaled by alpha / rank
    dropout: float = setting(0.0, between(0, 1, high_open=True))  # on the adapter's input (training passes only)
    # peft's names of the adapted layers: "all-linear" is every linear layer but the output head
    target_modules: list[str] = setting(["all-linear"], each(NON_EMPTY))
    init_seed: Optional[int] = setting(None, between(0, 2**63 - 1))  # None: the run's seed

    @property
    def enabled(self) -> bool:
        return self.rank is not None


@dataclass
class DataConfig:
    name: str = setting("math_train", NON_EMPTY)
    root: str = setting("data", NON_EMPTY, identity=False)  # folder of the JSONL files: where, not what
    splits_dir: Optional[str] = setting(None, NON_EMPTY, identity=False)  # the built splits; None = <root>/splits
    train_file: Optional[str] = setting("math_train.jsonl", NON_EMPTY)  # unused by toy_arith
    limit: Optional[int] = setting(None, at_least(1))  # use only the first `limit` training rows
    toy_seed: int = setting(0, at_least(0))  # toy_arith only: seed of the generated splits
    toy_train_size: int = setting(2000, at_least(1))
    toy_heldout_size: int = setting(200, at_least(1))
    # parameters of a task registered outside the package (`data.TASKS`, docs/extending.md)
    params: dict[str, Any] = setting({}, identity=WHEN_SET)


@dataclass
class SamplerConfig:
    name: str = setting("flat", NON_EMPTY)  # rollout.SAMPLERS
    # G rollouts per question, drawn as G/2 pairs of 2 (the pair ledger's shape), hence even
    group_size: int = setting(8, at_least(2), EVEN)
    temperature: float = setting(0.8, above(0))  # rollouts are sampled; greedy groups are always homogeneous
    top_p: float = setting(0.9, between(0, 1, low_open=True))
    # two-stage branching (paper §4.2); lengths in paper tokens, scaled by profile.length_scale
    K: int = setting(4, at_least(1))  # roots
    B: int = setting(2, one_of(2))  # branches per root: the pair ledger holds two leaves per pair
    t_min: int = setting(96, at_least(1))  # earliest newline stopping time
    split_tokens: int = setting(160, at_least(1))  # T_max: stage-1 cap (>= t_min)
    midpoint_min_len: int = setting(32, at_least(2))  # midpoint: early-EOS roots at least this long split
    long_eos_len: int = setting(104, at_least(1))  # midpoint: splits of longer roots are early_eos_gt104
    bifurcate_after_active: int = setting(0, at_least(0))  # flat rollouts until this many active steps
    # cf_fork (paper §5.6 item 4): each root forks at the first zero-based t in [fork_start, fork_end)
    # whose top-1 minus top-2 logit margin is <= fork_threshold (positions in paper tokens, scaled;
    # the threshold is a logit gap, not scaled)
    fork_start: int = setting(4, at_least(1))
    fork_end: int = setting(64, at_least(2))
    fork_threshold: float = setting(0.5, at_least(0))
    # parameters of a sampler registered outside the package that the schema has no field for
    params: dict[str, Any] = setting({})


@dataclass
class EstimatorConfig:
    name: str = setting("grpo", NON_EMPTY)  # credit.ESTIMATORS
    std: str = setting("unbiased", one_of(*STD_KINDS))  # unbiased (N-1): the baseline
    eps: float = setting(1e-4, above(0))
    beta: float = setting(0.0, between(0, 1))  # tree: weight of the max backup M_k in the prefix value
    alpha: float = setting(0.5, between(0, 1))  # tree: weight of the local (R - Vhat) continuation term
    zero_cont_token_mass: bool = False  # shift continuation credit to zero signed token mass
    # cf_*: weight of the fork hinge (`credit.counterfactual`: 0.5 in Arm 14, 0.15 from Arm 15 on; 0: none)
    hinge_weight: float = setting(0.0, at_least(0))
    # cf_pb, b0_pass >= 3: the divergent pair's loser balanced against its winner (the paper's numbers)
    # or kept at its damped tree continuation (`credit.counterfactual`)
    pb_loser: str = setting("balanced", one_of("balanced", "tree"))
    # parameters of an estimator registered outside the package (docs/extending.md), e.g. {loo_scale: 1.0}
    params: dict[str, Any] = setting({})


@dataclass
class OptimizerStepConfig:
    name: str = setting("full_backward", NON_EMPTY)  # what a homogeneous group does (update.HOMOGENEOUS_STEPS)


@dataclass
class ObjectiveConfig:
    """What the credited rollouts of an update become (`update.objectives`, `update.aggregation`, `update.kl`).
    The default is the paper's: `reinforce`, one on-policy pass, the loss summed over tokens / G, no KL."""

    name: str = setting("reinforce", NON_EMPTY)  # update.OBJECTIVES
    # the importance ratio's clip [1 - clip_low, 1 + clip_high] (ppo_clip, gspo, cispo; 0.2 as PPO and TRL)
    clip_low: float = setting(0.2, between(0, 1))
    clip_high: float = setting(0.2, above(0))
    clip_dual: Optional[float] = setting(None, above(1))  # ppo_clip: a negative advantage's loss is at most -c A
    passes: int = setting(1, at_least(1))  # mu: passes over an update's rollouts (a ratio objective's)
    mini_batches: int = setting(1, at_least(1))  # optimizer steps per pass, over equal contiguous shares
    aggregation: str = setting("token_sum_over_g", NON_EMPTY)  # update.AGGREGATIONS
    kl_beta: float = setting(0.0, at_least(0))  # beta of KL(pi || the run's initial policy)
    kl_estimator: str = setting("k3", one_of(*KL_ESTIMATORS))
    kl_in: str = setting("loss", one_of(*KL_PLACES))
    # record KL to the initial policy when beta = 0 too: a frozen copy of the weights and one forward per
    # update (it changes nothing the run computes, so it is not part of the identity)
    measure_kl: bool = setting(False, identity=False)
    mask_truncated: bool = False  # DAPO's overlong filtering: rollouts cut at the cap leave the loss
    params: dict[str, Any] = setting({})  # parameters of an objective registered outside the package


@dataclass
class HorizonConfig:
    tokens: int = setting(512, at_least(1))  # rollout cap in paper tokens (scaled by profile.length_scale)


@dataclass
class RewardConfig:
    name: str = setting("ungated", NON_EMPTY)  # reward.REWARDS
    # paper units; reward only if text.rfind("\\boxed") >= scaled gate (set exactly when gated)
    gate_chars: Optional[int] = setting(None, at_least(0))
    params: dict[str, Any] = setting({})  # parameters of a reward registered outside the package
    # DAPO's soft overlong punishment (`reward.overlong`), on any reward: the last `overlong_buffer` paper tokens
    # before the rollout cap cost up to `overlong_penalty` (added after runs were made: in the identity when set)
    overlong_buffer: Optional[int] = setting(None, at_least(1), identity=WHEN_SET)
    overlong_penalty: float = setting(1.0, at_least(0), identity=WHEN_SET)


@dataclass
class GraderConfig:
    name: str = setting("baseline", NON_EMPTY)  # answer equivalence for rewards and eval (reward.GRADERS)


@dataclass
class EvalConfig:
    # greedy; sampled_k3 (paper §5.5, Table 4); fork3: greedy root + low-margin forks (§5.6, Table 5B)
    name: str = setting("greedy", NON_EMPTY)  # evaluation.READOUTS
    benchmarks: list[str] = setting(["math500", "math_val210", "ext240"], each(NON_EMPTY))  # data.benchmark_names()
    max_new_tokens: int = setting(2048, at_least(1))  # paper tokens (scaled by profile.length_scale)
    batch_size: int = setting(32, at_least(1))  # changes bf16 grades (paper §5.4), so part of the identity
    # fixed: batches of batch_size in dataset order (the paper's); length_sorted; refill (continuous)
    schedule: str = setting("fixed", NON_EMPTY)  # evaluation.SCHEDULES
    slots: Optional[int] = setting(None, at_least(1))  # refill: rows decoding at once (None: batch_size)
    limit: Optional[int] = setting(None, at_least(1))  # first `limit` items of each benchmark
    before: bool = True  # read out the untrained policy too
    after: bool = True
    # sampled_k3: `draws` responses per item at temperature / top_p, from torch.manual_seed(offset + seed)
    draws: int = setting(3, at_least(1))
    temperature: float = setting(0.6, above(0))
    top_p: float = setting(0.9, between(0, 1, low_open=True))
    sample_seed_offset: int = setting(1000, at_least(0))
    # fork3, lengths in paper tokens (scaled by profile.length_scale): a teacher-forced margin pass
    # over the root's first margin_tokens; forks at zero-based [fork_start, fork_end); FirstGap05's
    # logit threshold (not scaled); the second fork >= fork_separation away (adjacency: not scaled);
    # tie_forks more forks on a 3-way tie (TieGated-FG05; 0: none); continuations in length-sorted
    # batches of continuation_batch_size running max(min_continuation, cap - max K) steps
    margin_tokens: int = setting(72, at_least(1))
    fork_start: int = setting(4, at_least(0))
    fork_end: int = setting(64, at_least(1))
    fork_threshold: float = setting(0.5, at_least(0))
    fork_separation: int = setting(2, at_least(1))
    tie_forks: int = setting(2, at_least(0))
    continuation_batch_size: int = setting(64, at_least(1))
    min_continuation: int = setting(64, at_least(1))


@dataclass
class ProfileConfig:
    name: str = setting("paper", PATH_NAME)  # names a folder of the run's path
    # every paper length budget is multiplied by this: rollout and eval caps (tokens), tree
    # constants, and the derivation gate (characters before the last \boxed)
    length_scale: float = setting(1.0, between(0, 1, low_open=True))


@dataclass
class TrainConfig:
    steps: int = setting(50, at_least(0))  # single-question steps (task=train: at least 1); step s uses row s % rows
    lr: float = setting(1e-5, above(0))
    betas: tuple[float, float] = setting((0.9, 0.999), each(between(0, 1)))
    adam_eps: float = setting(1e-8, above(0))
    weight_decay: float = setting(0.01, at_least(0))
    grad_clip: float = setting(1.0, above(0))  # max global grad norm (a negative one would flip the gradient)
    loss_recipe: str = setting("scale_then_sum", NON_EMPTY)  # update.LOSS_RECIPES; sum_then_scale: Arm 1's
    backward_micro_batch: Optional[int] = setting(None, at_least(1))  # rollouts per backward chunk; None = all
    # recompute each decoder layer's activations in the backward pass instead of keeping them (transformers'
    # gradient checkpointing, non-reentrant): less memory, one more forward; the same numbers, so not in the identity
    activation_checkpointing: bool = setting(False, identity=False)
    active_steps: Optional[int] = setting(None, at_least(1))  # train until this many active steps
    max_steps: int = setting(1000, at_least(1))  # step budget when training to a number of active steps
    accumulate_questions: int = setting(1, at_least(1))  # questions per optimizer update
    # DAPO's dynamic sampling: a group whose rewards are all equal joins no update (action "filtered"), so each
    # update holds accumulate_questions groups whose rewards differ; the draws are bounded as ever (train.steps,
    # or train.active_steps within train.max_steps)
    dynamic_sampling: bool = setting(False, identity=WHEN_SET)
    unit_question_grad: bool = False  # scale each question's gradient to unit norm before accumulating
    # where a rollout's draws come from: "stream", the run's one generator (the baseline's), or "per_rollout", a
    # generator per row of each decoding call keyed by (seed, step, call, row) (`rollout.seeding`): the group is
    # then the same at any number of ranks, which each decode their share of it
    rollout_seeding: str = setting("stream", one_of("stream", "per_rollout"), identity=WHEN_SET)
    # [first, last] steps (1-based) of the FP32 Polyak average that is read out
    tail_average: Optional[list[int]] = setting(None, each(at_least(1)))
    write_every: int = setting(10, at_least(1), identity=False)  # rewrite the ledger tables every N steps
    checkpoint_every: int = setting(10, at_least(1), identity=False)  # save checkpoint.pt every N steps
    # torch intra-op CPU threads; None = torch's default. Part of the identity: it changes float reductions.
    num_threads: Optional[int] = setting(None, at_least(1))
    # keep the final policy (the tail average where one is used) as a save_pretrained folder
    # <run>/model, loadable with model.path=; on: read-outs of saved checkpoints (task=evaluate,
    # Tables 5A/5B) need it, and 1.5 GB per paper run is small beside the compute it took
    save_model: bool = setting(True, identity=False)


@dataclass
class CsvLoggerConfig:
    enabled: bool = setting(False, identity=False)


@dataclass
class TensorBoardLoggerConfig:
    enabled: bool = setting(False, identity=False)


@dataclass
class WandbLoggerConfig:
    enabled: bool = setting(False, identity=False)
    mode: str = setting("offline", one_of("offline", "online", "disabled"), identity=False)
    project: str = setting("rlvr_sweep", NON_EMPTY, identity=False)
    entity: Optional[str] = setting(None, NON_EMPTY, identity=False)


@dataclass
class LoggerConfig:
    """Experiment loggers, any number at once (`logger=[csv,tensorboard]`); files go to <run>/logs."""

    csv: CsvLoggerConfig = field(default_factory=CsvLoggerConfig)
    tensorboard: TensorBoardLoggerConfig = field(default_factory=TensorBoardLoggerConfig)
    wandb: WandbLoggerConfig = field(default_factory=WandbLoggerConfig)


@dataclass
class RunConfig:
    out_root: str = setting("outputs/runs", NON_EMPTY, identity=False)
    # an unfinished folder without a usable checkpoint: restart (move it aside, never delete) | error
    on_unfinished: str = setting("restart", one_of("restart", "error"), identity=False)
    wait_for_lock: bool = setting(False, identity=False)  # another process runs it: wait (True) or exit


@dataclass
class SweepConfig:
    """A hyperparameter search's objective (docs/search.md): what a trial under a search sweeper (`hydra/sweeper=
    optuna`) returns, read from its run's record. None of it changes a run: not part of the identity."""

    # `trained.<benchmark>` / `base.<benchmark>` (accuracy) or a dotted key of run.json (`totals.seconds`);
    # None: the validation split read out (math_val210, or the toy task's toy_heldout)
    objective: Optional[str] = setting(None, NON_EMPTY, identity=False)
    direction: str = setting("maximize", one_of("maximize", "minimize"), identity=False)
    # a trial's value is the mean over these seeds, each its own run (None: the trial's `seed` alone)
    objective_seeds: Optional[list[int]] = setting(None, each(between(0, 2**63 - 1)), identity=False)
    # tuning on a benchmark the paper reports on (MATH-500, Ext240, Pool950) is refused unless this is true
    allow_test_objective: bool = setting(False, identity=False)


@dataclass
class Config:
    # train: read out, train, read out; evaluate: read out model.path only (a saved run's model or
    # any save_pretrained folder), in its own run folder
    task: str = setting("train", one_of(*TASKS))
    arm: str = setting("custom", PATH_NAME)  # names a folder of the run's path
    # The paper arm this preset reproduces, per horizon in paper tokens: `stopped_tree` is Arm 5 at
    # 512 and Arm 12 at 1024 ({512: "5", 1024: "12"}); Table 3 ablations give their names. A label,
    # not part of the run's identity; `paper_arm(cfg)` reads it.
    paper_arms: dict[int, str] = setting({}, identity=False)
    seed: int = setting(42, between(0, 2**63 - 1))
    # modules imported before the choices are checked: a researcher's own options register there
    # (`@ESTIMATORS.register(...)`, docs/extending.md); part of the identity
    plugins: list[str] = setting([], each(NON_EMPTY))
    model: ModelConfig = field(default_factory=ModelConfig)
    # added after runs were made: part of the identity only when an adapter is set
    lora: LoraConfig = field(default_factory=LoraConfig, metadata={"identity": WHEN_SET})
    data: DataConfig = field(default_factory=DataConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    estimator: EstimatorConfig = field(default_factory=EstimatorConfig)
    optimizer_step: OptimizerStepConfig = field(default_factory=OptimizerStepConfig)
    # added after runs were made: part of the identity only where it differs from the paper's objective
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig, metadata={"identity": WHEN_SET})
    horizon: HorizonConfig = field(default_factory=HorizonConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    grader: GraderConfig = field(default_factory=GraderConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    run: RunConfig = field(default_factory=RunConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig, metadata={"identity": False})  # no section in the hash


PAPER_UPDATE = ("name", "passes", "mini_batches", "aggregation", "kl_beta", "mask_truncated")  # ObjectiveConfig's


def paper_arm(cfg: Config) -> str:
    """The paper arm a run reproduces ("1".."19" or a Table 3 ablation name); "" when none: also for an arm
    preset whose run loads plugins (`+arm=baseline reward=<a plugin's>`) or changes the paper's update (an
    objective, DAPO's dynamic sampling or overlong shaping) or trains a LoRA adapter, which compute something the
    paper did not."""
    label = cfg.paper_arms.get(cfg.horizon.tokens, "")
    paper = ObjectiveConfig()
    changed = (cfg.plugins or any(getattr(cfg.objective, f) != getattr(paper, f) for f in PAPER_UPDATE)
               or cfg.objective.params or cfg.train.dynamic_sampling or cfg.reward.overlong_buffer is not None
               or cfg.lora.enabled)
    return "" if changed else label


def scaled_length(paper_length: int, length_scale: float) -> int:
    """A paper length budget (tokens or characters) in this profile's units (at least 1)."""
    return max(1, round(paper_length * length_scale))


def register_configs() -> None:
    """The schema as Hydra's `base_config`, and the `${pid:}` resolver of output folder names (cached,
    so a launch and its jobs agree on it, as Hydra's `${now:}`): two launches in the same second never
    share a Hydra output folder."""
    from hydra.core.config_store import ConfigStore  # here: the schema itself is read without Hydra
    from omegaconf import OmegaConf

    ConfigStore.instance().store(name="base_config", node=Config)
    if not OmegaConf.has_resolver("pid"):
        OmegaConf.register_new_resolver("pid", lambda: str(os.getpid()), use_cache=True)

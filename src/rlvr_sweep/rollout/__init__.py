"""Rollout stage: the decoding engine and the samplers that draw a question's group (paper §1, §4.2).

`engine.generate` decodes many prompts at once under the rollout kernel (temperature, top-p) or
greedily; a sampler turns one prompt into a `RolloutGroup` of K pairs x B leaves: `flat` (G
independent rollouts) or a two-stage tree (`stopped_tree`, `root_restart`, `midpoint`); `cf_fork`
forks each root at a low-margin token into on-policy and alternative branches. `SAMPLERS` is the
`sampler.name` registry (one calling convention, the settings each reads: `rollout.samplers`).
Samplers take any object with the `SamplingPolicy` protocol: `ModelPolicy` (a loaded model) or
`ScriptedPolicy` (a finite policy with exact probabilities, for tests). `ENGINES` names the engines
with `engine.generate`'s contract (`reference`, `static`: preallocated cache + CUDA graphs, `vllm`);
`generate_refill` decodes many prompts through refilled slots (fast read-outs).
"""

from rlvr_sweep.rollout.cf_fork import (
    CF_CATEGORIES, ForkGroup, ForkPair, ForkPlan, alternative_token, cf_fork, fork_position, plan_fork,
)
from rlvr_sweep.rollout.engine import Generation, generate, next_token_probs, sample_next_token, top_p_filter
from rlvr_sweep.rollout.engines import ENGINES
from rlvr_sweep.rollout.policies import ModelPolicy, SamplingPolicy, ScriptedPolicy, newline_ids
from rlvr_sweep.rollout.samplers import (
    CATEGORIES, SAMPLERS, Branch, Leaf, Pair, PairPlan, RolloutGroup, causal_stop, find_midpoint_boundary,
    flat, flat_group, midpoint, plan_pair, root_restart, stopped_tree,
)
from rlvr_sweep.rollout.refill import generate_refill

__all__ = [
    "CF_CATEGORIES", "ForkGroup", "ForkPair", "ForkPlan", "alternative_token", "cf_fork",
    "fork_position", "plan_fork",
    "CATEGORIES", "SAMPLERS", "Branch", "Generation", "Leaf", "ModelPolicy", "Pair", "PairPlan", "RolloutGroup",
    "SamplingPolicy", "ScriptedPolicy", "causal_stop", "find_midpoint_boundary", "flat", "flat_group", "generate",
    "midpoint", "newline_ids", "next_token_probs", "plan_pair", "root_restart",
    "sample_next_token", "stopped_tree", "top_p_filter",
    "ENGINES", "generate_refill",
]

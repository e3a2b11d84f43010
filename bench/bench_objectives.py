"""Seconds per optimizer update and peak memory of the objectives, side by side on one model and one fixed
group of rollouts: the paper's `reinforce`, `ppo_clip` with mu = 2 passes, and `ppo_clip` with mu = 2 and
beta = 0.04 KL to a frozen reference (k3, in the loss).

    python bench/bench_objectives.py [--model tiny|small] [--rollouts 8] [--length 64] [--repeats 5]

Each objective runs in a fresh process (so its peak resident memory is its own): it loads the model, takes
one update to warm up, then times --repeats updates (`update.update_step`, one question of --rollouts rollouts
of --length tokens each, all active) and prints `s_update_median`, the peak resident set (`peak_rss_mib`,
the process's whole footprint) and its rise over the model loaded with no update (`update_rss_mib`). The last
lines give each objective's time as a ratio to `reinforce`'s. `--model small` is a randomly initialised Qwen3
of 4 layers and hidden size 256 (the shipped tiny model is 0.15 M parameters, where a forward is mostly
overhead).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

MODES = {
    "reinforce": {},
    "ppo_clip mu=2": {"name": "ppo_clip", "passes": 2},
    "ppo_clip mu=2 + KL": {"name": "ppo_clip", "passes": 2, "kl_beta": 0.04},
}


def model_of(kind: str):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from rlvr_sweep.config import ModelConfig
    from rlvr_sweep.policy import load_policy

    if kind == "tiny":
        return load_policy(ModelConfig(name="tiny", hub_id=None, path="pkg:rlvr_sweep.policy/assets/tiny_qwen3",
                                       dtype="float32", device="cpu")).model
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=4096, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=1024,
                         tie_word_embeddings=False)
    return Qwen3ForCausalLM(config).float()


def one_mode(mode: str, kind: str, rollouts: int, length: int, repeats: int) -> dict:
    import copy

    import torch

    from rlvr_sweep.credit import Credit, grpo_advantages
    from rlvr_sweep.rollout import Leaf, Pair, RolloutGroup
    from rlvr_sweep.update import OBJECTIVES, Objective, ScoredGroup, UpdateSettings, make_adamw, update_step

    torch.set_num_threads(1)
    model = model_of(kind)
    vocab = model.config.vocab_size
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    g = torch.Generator().manual_seed(1)
    leaves = [Leaf(torch.randint(0, vocab, (length,), generator=g).tolist(), 0, True) for _ in range(rollouts)]
    pairs = [Pair(k, "flat", leaves[2 * k: 2 * k + 2], 0, 0, 0) for k in range(rollouts // 2)]
    rewards = torch.tensor([float(i % 2) for i in range(rollouts)]).view(-1, 2)
    adv = grpo_advantages(rewards.flatten()).view(-1, 2)
    group = ScoredGroup(RolloutGroup(pairs, 0, 0, 0, 0), [""] * rollouts, rewards, rewards.clone(),
                        Credit(adv.clone(), adv, True))
    prompt = torch.randint(0, vocab, (32,), generator=g).tolist()
    spec = MODES[mode]
    objective = Objective()
    if spec:
        option = OBJECTIVES[spec["name"]]
        objective = Objective(spec["name"], option.fn, option.kind, spec.get("passes", 1),
                              kl_beta=spec.get("kl_beta", 0.0), max_len=length)
    reference = copy.deepcopy(model).requires_grad_(False).eval() if objective.needs_reference else None
    params = list(model.parameters())
    optimizer = make_adamw(params, 1e-5, (0.9, 0.999), 1e-8, 0.01)
    settings = UpdateSettings("full_backward", "scale_then_sum", None, False, 1.0, 0.0, vocab - 1, "cpu", objective,
                              reference)
    seconds = []
    for i in range(repeats + 1):
        started = time.perf_counter()
        update_step(model, params, optimizer, [(prompt, group)], settings)
        if i:  # the first is the warm-up
            seconds.append(time.perf_counter() - started)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"mode": mode, "s_update_median": statistics.median(seconds), "peak_rss_mib": peak,
            "update_rss_mib": peak - loaded, "parameters": sum(p.numel() for p in params)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("tiny", "small"), default="tiny")
    p.add_argument("--rollouts", type=int, default=8)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--one", help=argparse.SUPPRESS)  # the child process's mode
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one_mode(args.one, args.model, args.rollouts, args.length, args.repeats)))
        return
    print(f"model={args.model} rollouts={args.rollouts} length={args.length} repeats={args.repeats} threads=1",
          flush=True)
    results = {}
    for mode in MODES:
        out = subprocess.run([sys.executable, __file__, "--model", args.model, "--rollouts", str(args.rollouts),
                              "--length", str(args.length), "--repeats", str(args.repeats), "--one", mode],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        results[mode] = r
        print(f"{mode}: s_update_median={r['s_update_median']:.4f} peak_rss_mib={r['peak_rss_mib']:.1f} "
              f"update_rss_mib={r['update_rss_mib']:.1f} parameters={r['parameters']}", flush=True)
    base = results["reinforce"]["s_update_median"]
    for mode, r in results.items():
        print(f"ratio {mode} / reinforce: {r['s_update_median'] / base:.2f}", flush=True)


if __name__ == "__main__":
    main()

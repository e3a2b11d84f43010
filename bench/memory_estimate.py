"""The preflight's memory estimate (`run.memory_plan`) against what a run's pieces measure on the CPU.

    python bench/memory_estimate.py [--hidden 256] [--layers 4] [--rows 8] [--prompt 64] [--horizon 128]

Each case runs in a fresh process on a randomly initialised Qwen3 of the given shape with Qwen3's vocabulary
(151,936, untied, float32: the CPU's bf16 matmuls are emulated, and slow): it decodes a read-out batch, then makes two updates of one group (the run's own
`token_logprobs` and AdamW), and prints the rise of the process's peak resident set over the moment before the
model was built (`measured_peak_mib`), beside the estimate's peak for the same settings and its ratio. It also
prints the bytes autograd saved in the training pass (`saved_tensors_hooks`, parameters left out) against the
estimate's activation term, which is what the fitted per-layer formula predicts. Cases: full fine-tuning,
with activation checkpointing, and a LoRA adapter of rank 16 on every linear layer.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

CASES = {"full": {}, "full + checkpointing": {"checkpoint": True}, "lora r16": {"lora": 16}}


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def case(args, checkpoint: bool = False, lora: int | None = None) -> dict:
    import dataclasses

    import torch

    from rlvr_sweep.config import Config, LoraConfig
    from rlvr_sweep.policy.adapter import attach
    from rlvr_sweep.policy.loading import checkpoint_activations
    from rlvr_sweep.rollout import engine
    from rlvr_sweep.run.memory_plan import Shape, estimate_for
    from rlvr_sweep.update.losses import token_logprobs
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.set_num_threads(2)
    shape = Shape(args.hidden, 3 * args.hidden, args.layers, 8, 4, 64, 151_936, False)
    base = rss_kib()
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=shape.vocab, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers, num_attention_heads=shape.q_heads, num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim, tie_word_embeddings=False, max_position_embeddings=4096))
    cfg = Config()
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, dtype="float32"))
    cfg = dataclasses.replace(
        cfg, lora=LoraConfig(rank=lora) if lora else cfg.lora,
        sampler=dataclasses.replace(cfg.sampler, group_size=args.rows),
        horizon=dataclasses.replace(cfg.horizon, tokens=args.horizon),
        eval=dataclasses.replace(cfg.eval, batch_size=args.rows, max_new_tokens=args.horizon),
        train=dataclasses.replace(cfg.train, activation_checkpointing=checkpoint))
    if lora:
        attach(model, cfg.lora, seed=0)
    if checkpoint:
        checkpoint_activations(model)
    est = estimate_for(cfg, shape, None, {"train": args.prompt, "eval": args.prompt})
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, shape.vocab, (args.prompt,), generator=gen).tolist() for _ in range(args.rows)]
    engine.generate(model, prompts, max_new_tokens=args.horizon, eos_id=None, pad_id=0, temperature=1.0, top_p=1.0,
                    generator=gen)
    ids = torch.randint(0, shape.vocab, (args.rows, args.prompt + args.horizon), generator=gen)
    stored = set()
    saved: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in stored:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    model.train()
    for update in range(2):
        optimizer.zero_grad(set_to_none=True)
        stored = {p.untyped_storage().data_ptr() for p in model.parameters()}
        saved.clear()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            logps = token_logprobs(model, ids, torch.ones_like(ids), args.prompt - 1)
        (logps * torch.randn(logps.shape, generator=gen)).sum().backward()
        optimizer.step()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    return {"measured_peak_mib": peak / 1024, "estimated_peak_mib": est.peak / 2**20,
            "ratio": est.peak / 2**20 / (peak / 1024), "estimate": est.words(),
            "saved_activations_mib": sum(saved.values()) / 2**20,
            "estimated_training_pass_mib": est.working["the training pass"] / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--horizon", type=int, default=128)
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)  # one case, in its own process
    args = parser.parse_args()
    if args.case:
        print(json.dumps(case(args, **CASES[args.case])))
        return
    print(f"random Qwen3, hidden {args.hidden}, {args.layers} layers, vocab 151,936 untied, float32; {args.rows} rows of "
          f"{args.prompt} prompt + {args.horizon} tokens")
    for name in CASES:
        proc = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--case", name], capture_output=True, text=True)
        if proc.returncode:
            print(f"{name}: failed: {proc.stderr.strip().splitlines()[-1]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{name}: measured_peak_mib={r['measured_peak_mib']:.0f} estimated_peak_mib={r['estimated_peak_mib']:.0f} "
              f"ratio={r['ratio']:.2f} saved_activations_mib={r['saved_activations_mib']:.0f} "
              f"estimated_training_pass_mib={r['estimated_training_pass_mib']:.0f}")
        print(f"  {r['estimate']}")


if __name__ == "__main__":
    main()

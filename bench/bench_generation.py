"""Benchmark ``rlvr_sweep.rollout.generate`` against ``model.generate`` (Hugging Face).

Both decode the same left-padded batch with sampling (temperature 0.8, top_p 0.9 by default) and never
stop early (our side: an EOS id that cannot be produced; HF side: ``min_new_tokens == max_new_tokens``),
so both produce exactly ``batch * max_new_tokens`` tokens per repeat. One warm-up call each, then
``--repeats`` timed calls each, interleaved. Prints plain ``key=value`` lines.

    PYTHONPATH=src python bench/bench_generation.py [--model DIR] [--batch 8] [--prompt-len 40] ...
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import AutoModelForCausalLM, Qwen3Config, Qwen3ForCausalLM

from rlvr_sweep.rollout import generate


def build_model(args) -> torch.nn.Module:
    if args.model:
        dtype = getattr(torch, args.dtype) if args.dtype else "auto"
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype)
    else:
        torch.manual_seed(0)
        cfg = Qwen3Config(
            vocab_size=args.vocab,
            hidden_size=args.hidden,
            num_hidden_layers=args.layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=args.hidden // 4,
            intermediate_size=2 * args.hidden,
            max_position_embeddings=4096,
            tie_word_embeddings=False,
        )
        model = Qwen3ForCausalLM(cfg)
        if args.dtype:
            model = model.to(getattr(torch, args.dtype))
    return model.to(args.device).eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="HF model folder; default: random tiny Qwen3")
    ap.add_argument("--dtype", default=None, help="e.g. bfloat16 / float32 (default: model's own)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=40, help="longest prompt; others are shorter")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-p", type=float, default=0.9)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    model = build_model(args)
    vocab = model.config.vocab_size
    device = next(model.parameters()).device
    pad_id = 0

    g = torch.Generator().manual_seed(args.seed)
    # Prompts of ~prompt_len tokens with different lengths, so left padding is exercised.
    lens = [max(1, args.prompt_len - (i * 7) % 11) for i in range(args.batch)]
    prompts = [torch.randint(1, vocab, (n,), generator=g).tolist() for n in lens]
    max_len = max(lens)
    input_ids = torch.tensor([[pad_id] * (max_len - len(p)) + p for p in prompts], device=device)
    attn = torch.tensor([[0] * (max_len - len(p)) + [1] * len(p) for p in prompts], device=device)
    n_tokens = args.batch * args.max_new_tokens

    def run_ours(seed: int) -> int:
        gen = torch.Generator(device=device).manual_seed(seed)
        out = generate(
            model, prompts, max_new_tokens=args.max_new_tokens, eos_id=-1, pad_id=pad_id,
            temperature=args.temperature, top_p=args.top_p, generator=gen,
        )
        return out.generated_tokens

    def run_hf(seed: int) -> int:
        torch.manual_seed(seed)
        with torch.inference_mode():
            out = model.generate(
                input_ids=input_ids, attention_mask=attn, do_sample=True,
                temperature=args.temperature, top_p=args.top_p, top_k=0,
                max_new_tokens=args.max_new_tokens, min_new_tokens=args.max_new_tokens,
                pad_token_id=pad_id, eos_token_id=None,
            )
        return (out.shape[1] - max_len) * out.shape[0]

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    for fn in (run_ours, run_hf):  # warm-up
        assert fn(12345) == n_tokens, fn.__name__
    sync()

    times = {"ours": [], "hf": []}
    for r in range(args.repeats):
        for name, fn in (("ours", run_ours), ("hf", run_hf)):
            sync()
            t0 = time.perf_counter()
            produced = fn(r)
            sync()
            times[name].append(time.perf_counter() - t0)
            assert produced == n_tokens, (name, produced, n_tokens)

    ours_tps = n_tokens / statistics.median(times["ours"])
    hf_tps = n_tokens / statistics.median(times["hf"])
    print(f"model={args.model or 'random-qwen3'} dtype={next(model.parameters()).dtype} "
          f"device={device} threads={torch.get_num_threads()}")
    print(f"batch={args.batch} prompt_lens={min(lens)}..{max_len} max_new_tokens={args.max_new_tokens} "
          f"temperature={args.temperature} top_p={args.top_p} repeats={args.repeats}")
    print(f"ours_median_s={statistics.median(times['ours']):.4f}")
    print(f"hf_median_s={statistics.median(times['hf']):.4f}")
    print(f"ours_tokens_per_s={ours_tps:.1f}")
    print(f"hf_tokens_per_s={hf_tps:.1f}")
    print(f"ratio={ours_tps / hf_tps:.3f}")


if __name__ == "__main__":
    main()

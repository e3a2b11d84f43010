"""Build the tiny Qwen3 checkpoint shipped in ``rlvr_sweep/policy/assets/tiny_qwen3``.

Reproducible command (from the repository root; about 2 minutes on 2 CPU cores)::

    PYTHONPATH=src python -m rlvr_sweep.policy.build_tiny --out src/rlvr_sweep/policy/assets/tiny_qwen3 --seed 0

What it does:

1. Tokenizer (``tokenizers``): byte-level BPE over the full 256-byte alphabet (so
   ``decode(encode(text)) == text`` for any text), pre-tokenised by
   ``Sequence([Digits(individual_digits=True), ByteLevel(use_regex=False)])`` so every digit
   is its own token while merges may span spaces and newlines; trained on the rendered
   prompts (``prompts.render_prompt``) and the completions of the toy arithmetic train
   split (``toy_arith``), tokenised separately so no merge crosses the prompt/completion
   boundary.  The fixed prompt template therefore compresses to a handful of tokens.
   ``<|endoftext|>`` is the single special token, used as EOS and as pad.  Saved as a
   ``PreTrainedTokenizerFast`` (``clean_up_tokenization_spaces=False``).  A rendered prompt is
   2 template tokens (everything up to ``"Compute "`` is one token, ``".\\n\\nAnswer:"`` another)
   plus one token per digit/operator of the expression.
2. Model: a randomly initialised, float32 ``Qwen3ForCausalLM`` (hidden 64, 2 layers, 4 heads,
   2 KV heads, head_dim 16, intermediate 192, untied embeddings, vocab 400): ~0.15 M
   parameters, ~0.6 MB of safetensors; one 8-rollout, 64-token sampling step takes <0.1 s.
3. Supervised warm-start on the train split: the input is ``render_prompt(problem)`` (which
   ends in ``"Answer:"``) followed directly by the completion, loss on completion tokens
   only; 2000 AdamW steps of 32 examples (lr 3e-3, warmup + cosine).  The completion is ``" " + solution + "<|endoftext|>"`` (a worked solution) or,
   for a fraction ``--p-bare`` (0.55) of the examples, ``" \\boxed{answer}<|endoftext|>"`` (a bare
   guess). With 0.55 the greedy policy answers about half the held-out problems with a bare
   guess (right ~6 % of the time) and works out the rest, like the real base model's short
   mode (seed paper §3.1): greedy accuracy starts near 13 %, and GRPO with the derivation gate
   lifts it by about 5 points in 100 steps at lr 5e-5 (smaller bare shares gave a model whose
   greedy answers are already worked, and there GRPO mostly perturbed its arithmetic).  The warm-start is deliberately short: the checkpoint must leave room for
   GRPO to learn (greedy accuracy well below ceiling, many questions with mixed rewards
   among 8 samples, some rollouts hitting the 64-token cap, some bare guesses).
4. Measurement on 200 held-out problems (greedy; and 8 samples at temperature 0.8,
   top-p 0.9), all with ``max_new_tokens=64``; results go to ``build_info.json`` together
   with the command, seed, steps and data sizes.  Reward = last ``\\boxed{...}`` content equals
   the gold answer.  ``sample_bare_fraction`` counts completions with fewer than 30
   characters before ``\\boxed`` (this includes 1-line worked solutions of 2-operand
   problems); ``strict_bare_fraction`` counts completions that *start* with ``\\boxed``.
   ``sample_cap_fraction`` counts rollouts that reached 64 tokens without EOS (worked
   solutions of 6-operand problems are longer than that).

Deterministic given the seed on a given machine/torch build (seeded data order,
``torch.manual_seed``, one torch thread: two identical runs here gave bit-identical
weights); float reductions may differ across CPU types or torch builds, so a rebuild
elsewhere can land on slightly different metrics.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch

from rlvr_sweep.data.prompts import render_prompt
from rlvr_sweep.data.toy_arith import load_split

# The context the checkpoint declares: Qwen3-0.6B's. RoPE has no learned positions, so the tiny model reads
# any prompt the real one can (its byte-level tokenizer makes MATH prompts up to a few thousand tokens).
CONTEXT = 32768
EOS = "<|endoftext|>"

DEFAULTS = dict(
    vocab_size=400,
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=16,
    intermediate_size=192,
    n_train=30000,
    n_tok_train=4000,
    p_bare=0.55,
    steps=2000,
    batch_size=32,
    lr=3e-3,
    warmup=50,
    n_eval=200,
    n_samples=8,
    max_new_tokens=64,
    temperature=0.8,
    top_p=0.9,
)


def log(msg: str) -> None:
    print(f"[build_tiny] {msg}", flush=True)


# --------------------------------------------------------------------------- tokenizer
def completion_text(row: dict, bare: bool) -> str:
    """Completion (without EOS) appended directly after the rendered prompt."""
    return f" \\boxed{{{row['answer']}}}" if bare else " " + row["solution"]


def build_tokenizer(texts: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS,
        pad_token=EOS,
        clean_up_tokenization_spaces=False,
        model_max_length=CONTEXT,
    )


# --------------------------------------------------------------------------- reward helpers
def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (brace-matched), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i = start + len("\\boxed{")
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return None


def is_bare_guess(text: str) -> bool:
    k = text.find("\\boxed")
    return 0 <= k < 30


# --------------------------------------------------------------------------- SFT
def make_sft_examples(tok, rows: list[dict], p_bare: float, seed: int):
    rng = random.Random(f"build_tiny:bare:{seed}")
    eos_id = tok.convert_tokens_to_ids(EOS)
    prompt_cache: dict[str, list[int]] = {}
    examples = []
    for row in rows:
        bare = rng.random() < p_bare
        p = render_prompt(row["problem"])
        p_ids = prompt_cache.get(p)
        if p_ids is None:
            p_ids = prompt_cache[p] = tok(p, add_special_tokens=False)["input_ids"]
        c_ids = tok(completion_text(row, bare), add_special_tokens=False)["input_ids"] + [eos_id]
        examples.append((p_ids, c_ids))
    return examples


def collate(examples, pad_id: int):
    L = max(len(p) + len(c) for p, c in examples)
    ids = torch.full((len(examples), L), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), L), -100, dtype=torch.long)
    mask = torch.zeros((len(examples), L), dtype=torch.long)
    for i, (p, c) in enumerate(examples):
        n = len(p) + len(c)
        ids[i, :n] = torch.tensor(p + c)
        labels[i, len(p) : n] = torch.tensor(c)
        mask[i, :n] = 1
    return ids, mask, labels


def train_sft(model, examples, pad_id: int, args, seed: int) -> list[float]:
    rng = random.Random(f"build_tiny:order:{seed}")
    order: list[int] = []
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0, betas=(0.9, 0.98))

    def lr_at(step: int) -> float:
        if step < args.warmup:
            return (step + 1) / args.warmup
        t = (step - args.warmup) / max(1, args.steps - args.warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    model.train()
    losses = []
    t0 = time.time()
    for step in range(args.steps):
        if len(order) < args.batch_size:
            perm = list(range(len(examples)))
            rng.shuffle(perm)
            order.extend(perm)
        batch = [examples[i] for i in order[: args.batch_size]]
        del order[: args.batch_size]
        ids, mask, labels = collate(batch, pad_id)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if (step + 1) % 100 == 0 or step == 0:
            recent = sum(losses[-100:]) / len(losses[-100:])
            log(f"sft step {step + 1}/{args.steps} loss {recent:.4f} ({time.time() - t0:.0f}s)")
    model.eval()
    return losses


# --------------------------------------------------------------------------- measurement
@torch.no_grad()
def generate(model, tok, prompts: list[str], *, do_sample: bool, max_new_tokens: int,
             temperature: float = 1.0, top_p: float = 1.0, batch_size: int = 400):
    """Returns a list of (completion_text, n_tokens_incl_eos, hit_cap_without_eos)."""
    eos_id = tok.eos_token_id
    tok.padding_side = "left"
    out = []
    for s in range(0, len(prompts), batch_size):
        enc = tok(prompts[s : s + batch_size], return_tensors="pt", padding=True,
                  add_special_tokens=False)
        kw = dict(do_sample=True, temperature=temperature, top_p=top_p, top_k=0) if do_sample \
            else dict(do_sample=False)
        gen = model.generate(**enc, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id,
                             eos_token_id=eos_id, **kw)
        new = gen[:, enc["input_ids"].shape[1]:].tolist()
        for seq in new:
            if eos_id in seq:
                seq = seq[: seq.index(eos_id) + 1]
                n, capped, body = len(seq), False, seq[:-1]
            else:
                n, capped, body = len(seq), len(seq) >= max_new_tokens, seq
            out.append((tok.decode(body), n, capped))
    tok.padding_side = "right"
    return out


def measure(model, tok, rows: list[dict], *, n_samples=8, max_new_tokens=64,
            temperature=0.8, top_p=0.9, seed=0) -> dict:
    prompts = [render_prompt(r["problem"]) for r in rows]
    golds = [r["answer"] for r in rows]
    greedy = generate(model, tok, prompts, do_sample=False, max_new_tokens=max_new_tokens)
    g_correct = [last_boxed(t) == g for (t, _, _), g in zip(greedy, golds)]
    torch.manual_seed(seed + 12345)
    rep_prompts = [p for p in prompts for _ in range(n_samples)]
    samp = generate(model, tok, rep_prompts, do_sample=True, max_new_tokens=max_new_tokens,
                    temperature=temperature, top_p=top_p)
    s_correct = [last_boxed(t) == golds[i // n_samples] for i, (t, _, _) in enumerate(samp)]
    per_q = [sum(s_correct[q * n_samples : (q + 1) * n_samples]) for q in range(len(rows))]
    bare = [is_bare_guess(t) for t, _, _ in samp]
    bare_acc = [c for c, b in zip(s_correct, bare) if b]
    worked_acc = [c for c, b in zip(s_correct, bare) if not b]
    mean = lambda xs: float(sum(xs) / len(xs)) if xs else float("nan")  # noqa: E731
    return {
        "n_questions": len(rows),
        "n_samples_per_question": n_samples,
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "top_p": top_p,
        "greedy_accuracy": mean(g_correct),
        "greedy_cap_fraction": mean([c for _, _, c in greedy]),
        "greedy_bare_fraction": mean([is_bare_guess(t) for t, _, _ in greedy]),
        "sample_accuracy": mean(s_correct),
        "mixed_group_fraction": mean([0 < k < n_samples for k in per_q]),
        "all_correct_group_fraction": mean([k == n_samples for k in per_q]),
        "all_wrong_group_fraction": mean([k == 0 for k in per_q]),
        "sample_cap_fraction": mean([c for _, _, c in samp]),
        "sample_bare_fraction": mean(bare),
        "strict_bare_fraction": mean([t.lstrip().startswith("\\boxed") for t, _, _ in samp]),
        "strict_bare_sample_accuracy": mean(
            [c for c, (t, _, _) in zip(s_correct, samp) if t.lstrip().startswith("\\boxed")]),
        "bare_sample_accuracy": mean(bare_acc),
        "worked_sample_accuracy": mean(worked_acc),
        "sample_mean_completion_tokens": mean([n for _, n, _ in samp]),
        "greedy_mean_completion_tokens": mean([n for _, n, _ in greedy]),
    }


# --------------------------------------------------------------------------- main
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--seed", type=int, default=0)
    for k, v in DEFAULTS.items():
        ap.add_argument("--" + k.replace("_", "-"), type=type(v), default=v)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--no-measure", action="store_true", help="skip the held-out measurement")
    return ap.parse_args(argv)


def main(argv=None) -> dict:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    args = parse_args(argv)
    t_start = time.time()
    # One intra-op thread: for a model this small it is the fastest setting on small CPUs
    # (2 threads were several times slower here) and it keeps float reductions reproducible.
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    seed = args.seed
    random.seed(seed)
    torch.manual_seed(seed)

    log(f"data: {args.n_train} train rows, {args.n_eval} heldout rows (seed {seed})")
    train_rows = load_split("train", args.n_train, seed=seed)
    heldout_rows = load_split("heldout", args.n_eval, seed=seed)

    log(f"tokenizer: byte-level BPE, vocab {args.vocab_size}, on {args.n_tok_train} rows")
    tok_texts = []
    for r in train_rows[: args.n_tok_train]:
        tok_texts += [render_prompt(r["problem"]), completion_text(r, False), completion_text(r, True)]
    tok = build_tokenizer(tok_texts, args.vocab_size)
    eos_id = tok.convert_tokens_to_ids(EOS)
    example = render_prompt(train_rows[0]["problem"])
    log(f"tokenizer: {len(tok)} tokens; example prompt -> {len(tok(example)['input_ids'])} tokens")

    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=args.hidden_size,
        intermediate_size=args.intermediate_size,
        num_hidden_layers=args.num_layers,
        num_attention_heads=args.num_heads,
        num_key_value_heads=args.num_kv_heads,
        head_dim=args.head_dim,
        max_position_embeddings=CONTEXT,
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        max_window_layers=args.num_layers,
        use_sliding_window=False,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
        bos_token_id=None,
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).float()
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: Qwen3ForCausalLM, {n_params} parameters")

    examples = make_sft_examples(tok, train_rows, args.p_bare, seed)
    comp_lens = [len(c) for _, c in examples]
    log(f"sft: {len(examples)} examples, mean completion {sum(comp_lens) / len(comp_lens):.1f} tokens, "
        f"{sum(n > args.max_new_tokens for n in comp_lens)} longer than {args.max_new_tokens}")
    t_train = time.time()
    torch.manual_seed(seed)
    losses = train_sft(model, examples, eos_id, args, seed)
    train_s = time.time() - t_train

    model.generation_config.eos_token_id = eos_id
    model.generation_config.pad_token_id = eos_id
    model.generation_config.bos_token_id = None

    metrics = None
    if not args.no_measure:
        log(f"measuring on {len(heldout_rows)} heldout problems ...")
        t_m = time.time()
        metrics = measure(model, tok, heldout_rows, n_samples=args.n_samples,
                          max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                          top_p=args.top_p, seed=seed)
        metrics["measure_seconds"] = round(time.time() - t_m, 1)
        for k, v in metrics.items():
            log(f"  {k}: {v:.4f}" if isinstance(v, float) else f"  {k}: {v}")

    out.mkdir(parents=True, exist_ok=True)
    for f in out.iterdir():  # keep the folder exactly what this build produced
        if f.is_file():
            f.unlink()
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    # Name the generic fast-tokenizer class (transformers 4.x and 5.x both load it from
    # tokenizer.json) instead of the 5.x-only "TokenizersBackend".
    tc_path = out / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    tc["tokenizer_class"] = "PreTrainedTokenizerFast"
    tc_path.write_text(json.dumps(tc, indent=2) + "\n")
    for f in out.iterdir():
        f.chmod(0o644)
    example_prompt = render_prompt("Compute 7 + 3 * 4 - 5.")
    example_ids = tok(example_prompt, add_special_tokens=False)["input_ids"]
    info = {
        "command": "PYTHONPATH=src python -m rlvr_sweep.policy.build_tiny " + " ".join(sys.argv[1:] if argv is None else argv),
        "seed": seed,
        "args": {k: getattr(args, k) for k in DEFAULTS},
        "vocab_size": len(tok),
        "n_parameters": n_params,
        "sft_steps": args.steps,
        "sft_examples_seen": args.steps * args.batch_size,
        "n_train_rows": len(train_rows),
        "n_heldout_rows": len(heldout_rows),
        "n_tokenizer_train_rows": args.n_tok_train,
        "p_bare": args.p_bare,
        "sft_mean_completion_tokens": sum(comp_lens) / len(comp_lens),
        "sft_completions_longer_than_cap": sum(n > args.max_new_tokens for n in comp_lens) / len(comp_lens),
        "sft_final_loss_avg100": sum(losses[-100:]) / len(losses[-100:]),
        "example_prompt": example_prompt,
        "example_prompt_n_tokens": len(example_ids),
        "example_prompt_tokens": [tok.decode([i]) for i in example_ids],
        "train_seconds": round(train_s, 1),
        "total_seconds": round(time.time() - t_start, 1),
        "torch_version": torch.__version__,
        "torch_num_threads": torch.get_num_threads(),
        "heldout_metrics": metrics,
    }
    (out / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    log(f"saved to {out} in {info['total_seconds']:.0f}s")
    return info


if __name__ == "__main__":
    main()

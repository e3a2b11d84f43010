"""Benchmark the decoding engines and project an Arm 1 run + read-out on one GPU (issue 14).

GPU mode (default; one H200, < 8 minutes): a randomly initialised Qwen3-0.6B-shaped model in bf16
(`engine_workloads.py`), rows stopped at lengths replayed from the paper (EOS ignored). Prints:
  1. decode ms per token step at batch 8 for `model.generate`, the reference engine, the static
     engine (CUDA graphs) and vLLM when installed, and at batch 32 (a ~1,024-token context) for the
     reference and static engines; greedy agreement static vs reference and the first differing
     position; the peak GPU memory of each part;
  2. seconds per Arm 1 training step (8 rollouts + backward + AdamW, the update stage's own
     functions), measured over the first steps of the replay and projected to all 50;
  3. read-out seconds and tokens/s for 950 items at 2,048 tokens: fixed batches of 32 (the paper's
     schedule; the first batches measured, the rest projected from their replayed lengths) and
     continuous refill (`rollout.refill`, measured in full), and vLLM when installed;
  4. the projected Arm 1 run + read-out total per engine/schedule.
CPU mode (``--cpu``): the shipped tiny checkpoint in float32, short replays scaled 1/8, every code
path except graph capture; it also prints the issue's CPU goal: static engine tokens/s over
`model.generate` tokens/s at batch 8 with the same sampling settings, measured side by side.

Output is ``key=value`` lines. Run from the repository root:

    PYTHONPATH=src python bench/bench_engine.py            # GPU
    PYTHONPATH=src python bench/bench_engine.py --cpu      # CPU, well under a minute
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine_workloads as wl  # noqa: E402

from rlvr_sweep.rollout import engine, static_engine, vllm_engine  # noqa: E402
from rlvr_sweep.rollout.refill import generate_refill  # noqa: E402
from rlvr_sweep.update import apply_update, make_adamw, pack_sequences, policy_loss, token_logprobs  # noqa: E402

TINY = Path(__file__).resolve().parents[1] / "src" / "rlvr_sweep" / "policy" / "assets" / "tiny_qwen3"
TEMPERATURE, TOP_P, GROUP = 0.8, 0.9, 8
PARTS = ("trace", "graph_shapes", "decode", "decode_b32", "decode_eager", "decode_in_graph", "decode_compiled",
         "step_split_b8",
         "step_split_b32", "agreement", "agreement_float32", "arm1", "readout_fixed32", "readout_refill", "vllm")
TRACE_REPLAYS = 20


def out(key: str, value) -> None:
    print(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}", flush=True)


class Clock:
    def __init__(self, device: torch.device):
        self.device = device

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def time(self, fn) -> tuple[float, object]:
        self.sync()
        start = time.perf_counter()
        result = fn()
        self.sync()
        return time.perf_counter() - start, result


def hf_generate(model, prompts, n: int, pad_id: int, seed: int) -> None:
    """`model.generate` on the same left-padded batch, sampling, never stopping before ``n`` tokens."""
    width = max(map(len, prompts))
    device = next(model.parameters()).device
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    torch.manual_seed(seed)
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=TEMPERATURE, top_p=TOP_P,
                       top_k=0, max_new_tokens=n, min_new_tokens=n, pad_token_id=pad_id, eos_token_id=None)


def our_generate(fn, device):
    def run(model, prompts, n, pad_id, seed):
        gen = torch.Generator(device=device).manual_seed(seed)
        return fn(model, prompts, max_new_tokens=n, eos_id=-1, pad_id=pad_id, temperature=TEMPERATURE, top_p=TOP_P,
                  generator=gen)
    return run


def vllm_decode(vllm_eng):
    def run(model, prompts, n, pad_id, seed):
        from vllm import SamplingParams

        del seed  # per-request seeds put vLLM on its slower seeded-sampling path
        params = SamplingParams(temperature=TEMPERATURE, top_p=TOP_P, max_tokens=n, min_tokens=n, ignore_eos=True,
                                detokenize=False)
        vllm_eng.llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    return run


def decode_prompts(batch: int, vocab: int, cpu: bool) -> list[list[int]]:
    """Batch 8: Arm 1's prompts (~80 tokens, a ~400-token context by the end of a rollout); batch 32: the
    read-out's ~1,024-token context (prompts of ~960 tokens; an eighth of that on the CPU)."""
    if batch == GROUP:
        return wl.random_prompts([84 - (i * 7) % 11 for i in range(GROUP)], vocab, seed=5)
    base = 120 if cpu else 960
    return wl.random_prompts([base - (i * 7) % 23 for i in range(batch)], vocab, seed=5)


def bench_decode(model, clock, args, pad_id, engines: dict, batch: int = GROUP) -> dict[str, float]:
    """ms per decode step at `batch`: (time(N tokens) - time(1 token)) / (N - 1), medians of interleaved repeats."""
    prompts = decode_prompts(batch, model.config.vocab_size, args.cpu)
    n = args.decode_steps
    tag = f"b{batch}"
    times = {name: {1: [], n: []} for name in engines}
    for name, fn in engines.items():  # warm-up: graphs, allocator, vLLM compile
        warm, _ = clock.time(lambda: fn(model, prompts, n, pad_id, 0))
        fn(model, prompts, 1, pad_id, 0)
        out(f"decode_warmup_s_{tag}_{name}", warm)
    for r in range(args.repeats):
        for name, fn in engines.items():
            for k in (1, n):
                times[name][k].append(clock.time(lambda: fn(model, prompts, k, pad_id, r + 1))[0])
    ms = {}
    for name in engines:
        full, one = statistics.median(times[name][n]), statistics.median(times[name][1])
        ms[name] = 1e3 * (full - one) / (n - 1)
        out(f"decode_ms_per_step_{tag}_{name}", ms[name])
        out(f"tokens_per_s_{tag}_{name}", batch * n / full)  # end to end, prefill included
    if "hf_generate" in engines and "static" in engines and batch == GROUP:
        ratio = statistics.median(times["hf_generate"][n]) / statistics.median(times["static"][n])
        out("static_vs_hf_generate_tokens_per_s_ratio", ratio)
    return ms


def step_split(model, clock, args, pad_id, batch: int, engine_ms: float | None) -> None:
    """Where a static decode step's time goes, at the decode bench's batch and context: the captured step
    alone (a CUDA graph replay on a GPU, eager here), top-p sampling alone (`engine.sample_next_token` at its
    settings) and a greedy pick alone, each the mean over ``decode_steps``; the rest of the engine's
    ms/step (``decode_ms_per_step_b{batch}_static``) is its loop's own host work."""
    prompts = decode_prompts(batch, model.config.vocab_size, args.cpu)
    n, width, tag = args.decode_steps, max(map(len, prompts)), f"b{batch}"
    static_engine.generate(model, prompts, max_new_tokens=n, eos_id=-1, pad_id=pad_id, temperature=TEMPERATURE,
                           top_p=TOP_P)  # the cache and the graphs of these windows exist from here on
    session = static_engine.session_for(model)
    rows, device = session.rows_for(batch), session.weights.device
    runner = session.runner(rows, width + n)
    tokens = torch.full((rows,), pad_id, dtype=torch.long, device=device)

    def steps():  # the engine loop's steps without its sampling: the same windows, positions and writes
        rope = torch.full((rows,), width, dtype=torch.long, device=device)
        write = rope.clone()
        for k in range(n):
            logits = runner.step(tokens, rope, write, width + k + 1)
            rope += 1
            write += 1
        return logits

    with torch.no_grad():
        t_steps, logits = clock.time(steps)
        logits = logits[:batch].clone()
        gen = torch.Generator(device=device).manual_seed(0)
        t_top_p, _ = clock.time(lambda: [engine.sample_next_token(logits, TEMPERATURE, TOP_P, gen) for _ in range(n)])
        t_greedy, _ = clock.time(lambda: [engine.sample_next_token(logits, 0.0, 1.0) for _ in range(n)])
    split = {"step": 1e3 * t_steps / n, "top_p_sampling": 1e3 * t_top_p / n, "greedy_pick": 1e3 * t_greedy / n}
    for name, ms in split.items():
        out(f"step_split_{name}_ms_{tag}", ms)
    if engine_ms is not None:
        out(f"step_split_rest_ms_{tag}", engine_ms - split["step"] - split["top_p_sampling"])


def _steady_runner(model, pad_id, batch: int, context: int, extra: int):
    """A static session's step runner for ``batch`` rows whose cache holds ``context`` real positions (a real
    prefill and decode through the engine) and ``extra`` more; with the inputs of the step that writes position
    ``context``: ``(runner, tokens, rope, write)``."""
    prompts = wl.random_prompts([context - 4 - (i * 7) % 5 for i in range(batch)], model.config.vocab_size, seed=7)
    width = max(map(len, prompts))
    static_engine.generate(model, prompts, max_new_tokens=context - width, eos_id=-1, pad_id=pad_id,
                           temperature=TEMPERATURE, top_p=TOP_P)
    session = static_engine.session_for(model)
    rows, device = session.rows_for(batch), session.weights.device
    runner = session.runner(rows, context + extra)
    position = torch.full((rows,), context, dtype=torch.long, device=device)
    return runner, torch.full((rows,), pad_id, dtype=torch.long, device=device), position, position.clone()


def trace(model, clock, args, pad_id) -> None:
    """Where a captured step's time goes (item 1 of issue 50): `TRACE_REPLAYS` replays of the batch-8 step at a
    ~400-token context (50 on the CPU) under `torch.profiler`: kernels a step (on the CPU: ATen ops with time of
    their own), their summed time against the wall time of a step, and the ten largest by time."""
    from torch.profiler import ProfilerActivity, profile

    cuda = model.device.type == "cuda"
    context, n = (50 if args.cpu else 400), TRACE_REPLAYS
    runner, tokens, rope, write = _steady_runner(model, pad_id, GROUP, context, 1)

    def replays():
        for _ in range(n):
            runner.step(tokens, rope, write, context + 1)

    with torch.no_grad():
        replays()  # the graph of this window captured
        wall, _ = clock.time(replays)
        with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
            replays()
            clock.sync()
    if cuda:
        kernels = [(e.key, e.count, e.device_time_total) for e in prof.key_averages()
                   if e.device_time_total > 0 and e.device_type == torch.autograd.DeviceType.CUDA]
    else:
        kernels = [(e.key, e.count, e.self_cpu_time_total) for e in prof.key_averages()
                   if e.key.startswith("aten::") and e.self_cpu_time_total > 0]
    unit = "kernels" if cuda else "cpu_ops"
    out(f"trace_{unit}_per_step_b8", sum(c for _, c, _ in kernels) / n)
    out(f"trace_{unit}_ms_per_step_b8", sum(t for _, _, t in kernels) / n / 1e3)
    out("trace_wall_ms_per_step_b8", 1e3 * wall / n)
    for rank, (key, count, total) in enumerate(sorted(kernels, key=lambda k: -k[2])[:10], 1):
        out(f"trace_top{rank}", f"{total / n / 1e3:.4f} ms/step x{count / n:g} {key[:90]}")


def graph_shapes(model, clock, args, pad_id) -> None:
    """ms per replay of the captured step at batch 1, 8 and 32 and attention windows 256 and 1,024 (64 and 128 on
    the CPU), each the mean of `TRACE_REPLAYS` replays after one that captures it."""
    windows = (64, 128) if args.cpu else (256, 1024)
    for batch in (1, GROUP, 32):
        for window in windows:
            runner, tokens, rope, write = _steady_runner(model, pad_id, batch, window - 8, 8)

            def replays(window=window):
                for _ in range(TRACE_REPLAYS):
                    runner.step(tokens, rope, write, window)

            with torch.no_grad():
                replays()
                seconds, _ = clock.time(replays)
            out(f"graph_ms_per_step_b{batch}_w{window}", 1e3 * seconds / TRACE_REPLAYS)
        static_engine.release(model)


def decode_in_graph(model, clock, args, pad_id, ms: dict | None, ms_b32: dict | None) -> None:
    """The static engine's decode with each token drawn inside its step's graph (`static_engine.in_graph_sampling`,
    on this device whether or not it is yet in `IN_GRAPH_SAMPLING_DEVICES`), at batch 8 and 32, beside the eager
    draw's figures of the `decode` parts; on the CPU through the GPU loop's shapes, run eagerly."""
    device = model.device.type
    saved = static_engine.IN_GRAPH_SAMPLING_DEVICES
    static_engine.IN_GRAPH_SAMPLING_DEVICES = (*saved, device)
    static_engine.release(model)
    static_engine.session_for(model, gpu_like=True)
    run = {"static_in_graph": our_generate(static_engine.generate, model.device)}
    try:
        for batch, eager in ((GROUP, ms), (32, ms_b32)):
            got = bench_decode(model, clock, args, pad_id, run, batch=batch)["static_in_graph"]
            if eager and not args.cpu:
                out(f"in_graph_sampling_speedup_b{batch}", eager["static"] / got)
    finally:
        static_engine.IN_GRAPH_SAMPLING_DEVICES = saved
        static_engine.release(model)


def decode_compiled(model, clock, args, pad_id, ms: dict | None) -> None:
    """The static engine with its decode step compiled (`torch.compile`, fixed shapes: the GPU loop's row and window
    buckets; inside the CUDA graph on a GPU): seconds to compile, decode ms per step at batch 8 beside the eager
    step's, and greedy tokens against the reference (float32 on the CPU). A measurement: the engine does not compile."""
    from rlvr_sweep.rollout import step_graphs

    eager_step = step_graphs.decode_step
    step_graphs.decode_step = torch.compile(eager_step, dynamic=False)
    static_engine.release(model)
    static_engine.session_for(model, gpu_like=True)
    try:
        prompts = decode_prompts(GROUP, model.config.vocab_size, args.cpu)
        seconds, _ = clock.time(lambda: static_engine.generate(model, prompts, max_new_tokens=args.decode_steps,
                                                                eos_id=-1, pad_id=pad_id, temperature=0.0, top_p=1.0))
        out("compile_first_call_s_b8", seconds)  # compiles every window bucket the call reaches
        got = bench_decode(model, clock, args, pad_id, {"static_compiled": our_generate(static_engine.generate,
                                                                                        model.device)})
        if ms:
            out("compiled_step_speedup_b8", ms["static"] / got["static_compiled"])
        if model.dtype == torch.float32:
            greedy_agreement(model, pad_id, args.decode_steps, "_compiled")
    finally:
        step_graphs.decode_step = eager_step
        static_engine.release(model)


def greedy_agreement(model, pad_id, n: int, tag: str = "") -> None:
    """Greedy tokens of the static engine vs the reference engine on the same batch."""
    prompts = wl.random_prompts([84 - (i * 7) % 11 for i in range(GROUP)], model.config.vocab_size, seed=6)
    kw = dict(max_new_tokens=n, eos_id=-1, pad_id=pad_id, temperature=0.0, top_p=1.0)
    reference = engine.generate(model, prompts, record_margins=True, **kw)
    ref, fast = reference.tokens, static_engine.generate(model, prompts, **kw).tokens
    prefix = [next((i for i, (a, b) in enumerate(zip(r, f)) if a != b), len(r)) for r, f in zip(ref, fast)]
    out(f"greedy_rows_identical_static_vs_reference{tag}", sum(r == f for r, f in zip(ref, fast)) / len(ref))
    out(f"greedy_token_agreement_static_vs_reference{tag}", sum(prefix) / sum(map(len, ref)))  # up to first divergence
    differing = [(i, row) for row, i in enumerate(prefix) if i < len(ref[row])]
    out(f"greedy_first_differing_position{tag}", f"token {min(differing)[0]} of row {min(differing)[1]}" if differing
        else "none")
    if differing:  # the reference's raw top-1 minus top-2 logit there: a tie or near-tie, or a real divergence
        margins = ",".join(f"{reference.margins[r][i]:.4g}" for i, r in differing)
        out(f"greedy_reference_margins_where_rows_part{tag}", margins)


def bench_arm1(model, clock, args, pad_id, generate, label: str) -> dict[str, float]:
    """Arm 1 steps: 8 rollouts at replayed lengths, then Arm 1's loss, backward, clip and AdamW."""
    cap = wl.ARM1_CAP if not args.cpu else wl.ARM1_CAP // 8
    lengths = wl.arm1_lengths(cap=cap)
    questions = wl.random_prompts(wl.arm1_prompt_lengths(scale=0.25 if args.cpu else 1.0), model.config.vocab_size)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_adamw(params, lr=1e-5, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    device = next(model.parameters()).device
    gen_s, train_s, steps_run, tokens = [], [], [], []
    for step in range(args.arm1_steps):
        prompt, lens = questions[step], lengths[step].tolist()
        t_gen, gen = clock.time(lambda: generate(model, [prompt] * GROUP, max(lens), pad_id, step))
        completions = [row[:n] for row, n in zip(gen.tokens, lens)]
        advantages = torch.tensor([1.0, -1.0] * (GROUP // 2))

        def backward():
            ids, attn, cmask = pack_sequences([prompt] * GROUP, completions, pad_id)
            start = len(prompt) - 1
            logps = token_logprobs(model, ids.to(device), attn.to(device), start)
            policy_loss(logps, cmask[:, start:].to(device), advantages, "sum_then_scale", GROUP).backward()

        model.train()
        t_train, _ = clock.time(lambda: apply_update(params, opt, active=True, homogeneous_step="full_backward",
                                                     backward=backward, grad_clip=1.0))
        model.eval()
        gen_s.append(t_gen)
        train_s.append(t_train)
        steps_run.append(max(lens))
        tokens.append(sum(lens) + len(prompt) * GROUP)
    opt.zero_grad(set_to_none=True)  # the optimizer state goes with this frame
    warm = 1 if len(gen_s) > 1 else 0  # the first step pays graph capture and kernel autotuning
    ms_per_step = 1e3 * sum(gen_s[warm:]) / sum(steps_run[warm:])
    s_per_token = sum(train_s[warm:]) / sum(tokens[warm:])
    all_steps = lengths.max(axis=1)
    all_tokens = lengths.sum(axis=1) + GROUP * wl.arm1_prompt_lengths(scale=0.25 if args.cpu else 1.0)
    projected = 1e-3 * ms_per_step * all_steps.sum() + s_per_token * all_tokens.sum()
    projected += (gen_s[0] + train_s[0]) - (1e-3 * ms_per_step * steps_run[0] + s_per_token * tokens[0])
    out("arm1_replay_mean_len", float(lengths.mean()))
    out("arm1_replay_mean_step_max", float(all_steps.mean()))
    out("arm1_replay_cap_share", float((lengths == cap).mean()))
    out(f"arm1_measured_steps_{label}", len(gen_s))
    out(f"arm1_first_step_s_{label}", gen_s[0] + train_s[0])
    out(f"arm1_step_s_{label}", statistics.mean(g + t for g, t in zip(gen_s[warm:], train_s[warm:])))
    out(f"arm1_step_generation_s_{label}", statistics.mean(gen_s[warm:]))
    out(f"arm1_step_backward_adamw_s_{label}", statistics.mean(train_s[warm:]))
    out(f"arm1_generation_ms_per_step_{label}", ms_per_step)
    out(f"arm1_projected_50_steps_s_{label}", projected)
    return {"projected": projected, "train_s_per_token": s_per_token, "mean_step_max": float(all_steps.mean()),
            "mean_tokens": float(all_tokens.mean())}


def readout_workload(args, vocab):
    items = args.readout_items
    cap = wl.READOUT_CAP if not args.cpu else wl.READOUT_CAP // 8
    lengths = wl.readout_lengths(items, cap=cap)
    prompts = wl.random_prompts(wl.readout_prompt_lengths(items, scale=0.25 if args.cpu else 1.0), vocab, seed=7)
    out("readout_items", items)
    out("readout_replay_mean_len", float(lengths.mean()))
    out("readout_replay_cap_share", float((lengths == cap).mean()))
    return prompts, lengths.tolist()


def bench_readout_fixed(model, clock, args, pad_id, prompts, lengths, deadline: float) -> float:
    """The paper's schedule (batches of 32 in dataset order, each runs until its longest row)."""
    batches = wl.fixed_batches(len(prompts), 32)
    spent, steps_done, measured = 0.0, 0, 0
    for items in batches[: args.readout_batches]:
        if measured and time.perf_counter() > deadline:
            break
        n = max(lengths[i] for i in items)
        t, _ = clock.time(lambda: static_engine.generate(
            model, [prompts[i] for i in items], max_new_tokens=n, eos_id=-1, pad_id=pad_id, temperature=0.0,
            top_p=1.0))
        spent, steps_done, measured = spent + t, steps_done + n, measured + 1
    total_steps = sum(max(lengths[i] for i in items) for items in batches)
    projected = spent / steps_done * total_steps
    out("readout_fixed32_batches_measured", f"{measured}/{len(batches)}")
    out("readout_fixed32_ms_per_step", 1e3 * spent / steps_done)
    out("readout_fixed32_decode_steps", total_steps)
    out("readout_s_fixed32_static", projected)
    out("readout_tokens_per_s_fixed32_static", sum(lengths) / projected)  # the tokens the items keep
    return projected


def bench_readout_refill(model, clock, args, pad_id, prompts, lengths) -> float:
    order = wl.longest_prompt_first(prompts)
    t, gen = clock.time(lambda: generate_refill(
        model, [prompts[i] for i in order], slots=args.slots, max_new_tokens=[lengths[i] for i in order],
        eos_id=-1, pad_id=pad_id, temperature=0.0, top_p=1.0))
    assert gen.generated_tokens == sum(lengths), (gen.generated_tokens, sum(lengths))
    out("readout_refill_slots", args.slots)
    out("readout_refill_utilisation", gen.generated_tokens / gen.untrimmed_steps)
    out("readout_s_refill_static", t)
    out("readout_tokens_per_s_refill_static", sum(lengths) / t)
    return t


def bench_vllm(model, clock, args, pad_id, prompts, lengths, arm1) -> dict[str, float]:
    static_engine.release(model)
    torch.cuda.empty_cache()
    t_start, veng = clock.time(lambda: vllm_engine.VllmEngine(model, gpu_memory_utilization=args.vllm_memory,
                                                              max_model_len=4096))
    out("vllm_startup_s", t_start)
    out("vllm_push_weights_s", veng.push_weights())
    ms = bench_decode(model, clock, args, pad_id, {"vllm": vllm_decode(veng)})["vllm"]
    from vllm import SamplingParams

    params = [SamplingParams(temperature=0.0, max_tokens=n, min_tokens=n, ignore_eos=True, detokenize=False)
              for n in lengths]
    t_read, _ = clock.time(lambda: veng.llm.generate([{"prompt_token_ids": p} for p in prompts], params,
                                                     use_tqdm=False))
    out("readout_s_vllm", t_read)
    # An Arm 1 step with vLLM rollouts: its decode rate, the torch backward + AdamW, and one weight push.
    push = veng.push_weights()
    step = 1e-3 * ms * arm1["mean_step_max"] + arm1["train_s_per_token"] * arm1["mean_tokens"] + push
    out("arm1_step_s_vllm_projected", step)
    out("arm1_projected_50_steps_s_vllm", 50 * step)
    out("projected_total_s_vllm", t_start + 50 * step + t_read)
    return {"readout": t_read}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true", help="tiny shipped model on CPU, short replays")
    ap.add_argument("--quick", action="store_true", help="CPU mode for CI: fewer steps and repeats")
    ap.add_argument("--decode-steps", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--arm1-steps", type=int, default=None, help="Arm 1 steps measured (of the 50 replayed)")
    ap.add_argument("--readout-items", type=int, default=None)
    ap.add_argument("--readout-batches", type=int, default=None, help="fixed-32 batches measured, rest projected")
    ap.add_argument("--slots", type=int, default=None, help="rows of the refill read-out")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--no-vllm", action="store_true")
    ap.add_argument("--vllm-memory", type=float, default=0.3, help="vLLM gpu_memory_utilization")
    ap.add_argument("--fixed-readout-budget-s", type=float, default=90.0, help="GPU: stop measuring fixed-32 then")
    ap.add_argument("--only", default="", help="comma-separated parts to run (default all): " + ",".join(PARTS))
    ap.add_argument("--time-limit-s", type=float, default=450.0, help="vLLM is skipped when it would not fit")
    args = ap.parse_args()
    defaults = dict(decode_steps=128, repeats=3, arm1_steps=6, readout_items=wl.READOUT_ITEMS, readout_batches=4,
                    slots=128)
    if args.cpu:
        defaults = dict(decode_steps=64, repeats=9, arm1_steps=3, readout_items=96, readout_batches=3, slots=16)
        if args.quick:
            defaults = dict(decode_steps=24, repeats=2, arm1_steps=2, readout_items=40, readout_batches=2, slots=8)
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.cpu and args.threads is None:
        args.threads = 1  # a 0.15M-parameter model gains nothing from intra-op threads; on a shared
        # 2-core machine they only add contention noise (both sides of every ratio run the same)
    if args.threads:
        torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()

    started = time.perf_counter()
    if args.cpu:
        from transformers import AutoModelForCausalLM

        device = torch.device("cpu")
        model = AutoModelForCausalLM.from_pretrained(TINY, dtype=torch.float32).eval()
    else:
        if not torch.cuda.is_available():
            sys.exit("no CUDA GPU: run with --cpu")
        device = torch.device("cuda")
        model = wl.build_qwen3(wl.QWEN3_0_6B, torch.bfloat16, device)
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    clock = Clock(device)
    import transformers

    out("mode", "cpu" if args.cpu else "gpu")
    out("device", torch.cuda.get_device_name() if device.type == "cuda" else f"cpu threads={torch.get_num_threads()}")
    out("versions", f"torch={torch.__version__} transformers={transformers.__version__}")
    out("model_params_M", sum(p.numel() for p in model.parameters()) / 1e6)
    out("dtype", str(next(model.parameters()).dtype).removeprefix("torch."))
    out("sampling", f"temperature={TEMPERATURE} top_p={TOP_P} batch={GROUP} decode_steps={args.decode_steps}")

    def section(name: str, fn):
        """Run one part; on a GPU (one expensive call) a failure is printed and the rest still runs, and
        the part's peak GPU memory is printed (`torch.cuda.max_memory_allocated`, GiB). `--only` leaves out the rest."""
        if only and name not in only:
            return None
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - reported, not hidden
            if args.cpu:
                raise
            traceback.print_exc()
            out(f"error_{name}", repr(exc)[:300])
            return None
        finally:
            out(f"elapsed_s_{name}", time.perf_counter() - started)
            if device.type == "cuda":
                out(f"peak_gpu_memory_gib_{name}", torch.cuda.max_memory_allocated() / 2**30)

    only = set(filter(None, args.only.split(",")))
    if only - set(PARTS):
        sys.exit(f"--only: unknown parts {sorted(only - set(PARTS))} (known: {', '.join(PARTS)})")
    static_gen = our_generate(static_engine.generate, device)
    section("trace", lambda: trace(model, clock, args, pad_id))
    section("graph_shapes", lambda: graph_shapes(model, clock, args, pad_id))
    engines = {"hf_generate": hf_generate, "reference": our_generate(engine.generate, device), "static": static_gen}
    ms = section("decode", lambda: bench_decode(model, clock, args, pad_id, engines))
    both = {name: engines[name] for name in ("reference", "static")}  # the read-out's batch and context
    ms_b32 = section("decode_b32", lambda: bench_decode(model, clock, args, pad_id, both, batch=32))
    section("decode_in_graph", lambda: decode_in_graph(model, clock, args, pad_id, ms, ms_b32))
    section("decode_compiled", lambda: decode_compiled(model, clock, args, pad_id, ms))
    if device.type == "cuda":  # what the graphs buy: the same step run eagerly

        def eager():
            static_engine.release(model)
            static_engine.CUDA_GRAPHS = False
            try:
                return bench_decode(model, clock, args, pad_id, {"static_eager": static_gen})["static_eager"]
            finally:
                static_engine.CUDA_GRAPHS = True
                static_engine.release(model)

        ms_eager = section("decode_eager", eager)
        if ms and ms_eager:
            out("cuda_graph_speedup", ms_eager / ms["static"])
    for batch, engine_ms in ((GROUP, ms), (32, ms_b32)):
        section(f"step_split_b{batch}", lambda batch=batch, engine_ms=engine_ms: step_split(
            model, clock, args, pad_id, batch, (engine_ms or {}).get("static")))
    section("agreement", lambda: greedy_agreement(model, pad_id, args.decode_steps))
    if device.type == "cuda":  # the dtype `model.engine=auto` may pick static for on a GPU (engines.PROVEN_IDENTICAL)

        def agreement_float32():
            wide = wl.build_qwen3(wl.QWEN3_0_6B, torch.float32, device)
            try:
                greedy_agreement(wide, pad_id, args.decode_steps, "_float32")
            finally:
                static_engine.release(wide)

        section("agreement_float32", agreement_float32)

    arm1 = section("arm1", lambda: bench_arm1(model, clock, args, pad_id, static_gen, "static"))
    if arm1 and ms:
        step = 1e-3 * ms["reference"] * arm1["mean_step_max"] + arm1["train_s_per_token"] * arm1["mean_tokens"]
        out("arm1_step_s_reference_projected", step)

    reading = not only or only & {"readout_fixed32", "readout_refill", "vllm"}
    prompts, lengths = readout_workload(args, model.config.vocab_size) if reading else ([], [])
    deadline = time.perf_counter() + args.fixed_readout_budget_s
    fixed = section("readout_fixed32", lambda: bench_readout_fixed(model, clock, args, pad_id, prompts, lengths,
                                                                  deadline))
    refill = section("readout_refill", lambda: bench_readout_refill(model, clock, args, pad_id, prompts, lengths))
    if arm1 and fixed:
        out("projected_total_s_static_fixed32", arm1["projected"] + fixed)
    if arm1 and refill:
        out("projected_total_s_static_refill", arm1["projected"] + refill)

    reason = vllm_engine.vllm_available()
    if not reason and time.perf_counter() - started > args.time_limit_s - 180:
        reason = f"less than 180 s left of --time-limit-s {args.time_limit_s:g}"
    if args.no_vllm or reason is not None or arm1 is None:
        out("vllm", f"skipped ({'--no-vllm' if args.no_vllm else reason or 'no Arm 1 figures'})")
    else:
        section("vllm", lambda: bench_vllm(model, clock, args, pad_id, prompts, lengths, arm1))
    out("elapsed_s_total", time.perf_counter() - started)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()

"""Optional vLLM backend for rollouts and read-outs (GPU only; extra ``vllm``).

`generate(model, prompts, ...)` has the contract of `engine.generate` and runs the prompts through an
in-process `vllm.LLM` built from the torch model's config. The LLM is created on first use
(``load_format="dummy"``: no weights are read from disk) and the torch model's current weights are
pushed into it then and whenever they changed since the last push, detected from the parameters'
in-place version counters (AdamW updates in place), so a training loop needs no extra call; call
`push_weights(model)` to push explicitly (e.g. right after `optimizer.step()`, to time it).

What is the same as the other engines: prompts as token ids, greedy for temperature 0, temperature
and nucleus sampling, a row stops on `eos_id` and keeps it, ``max_new_tokens`` cap, token
accounting (``untrimmed_steps`` is counted as the reference's padded loop would, ``batch x longest``).
What differs: vLLM samples with its own kernels and random streams (seeded per request from
``generator`` when one is given), softmaxes in float32 and applies top-p with its own cut, so tokens
match the other engines in distribution only; margins come from vLLM's top-2 log-probabilities of the
raw logits (equal to the raw logit gap up to rounding).

The weight push goes through `LLM.apply_model` (vLLM's documented hook that runs a function on the
worker's model) with `Qwen3ForCausalLM.load_weights`, which takes Hugging Face parameter names. The
engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so the push is a device-to-
device copy, not a serialisation of 1.5 GB.
"""

from __future__ import annotations

import os
import tempfile
import time
import weakref

import torch

from rlvr_sweep.rollout.engine import Generation, _is_greedy, nothing_to_decode

__all__ = ["VllmEngine", "engine_for", "generate", "push_weights", "release", "vllm_available"]

INSTALL_HINT = "pip install 'rlvr-sweep[vllm]' (vLLM needs a CUDA GPU)"


def vllm_available() -> str | None:
    """None when vLLM can run here, else the reason it cannot (for skips and error messages)."""
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        return f"vllm is not installed ({exc}); {INSTALL_HINT}"
    return None


def _weights_version(model: torch.nn.Module) -> tuple[int, int]:
    """Changes whenever a parameter is updated in place or reallocated."""
    params = list(model.parameters())
    return sum(p._version for p in params), hash(tuple(p.data_ptr() for p in params))


class VllmEngine:
    """An in-process `vllm.LLM` mirroring one torch model (same architecture, dtype, weights)."""

    def __init__(self, model: torch.nn.Module, *, gpu_memory_utilization: float = 0.3, max_model_len: int = 4096,
                 enforce_eager: bool = False, seed: int = 0):
        reason = vllm_available()
        if reason is not None:
            raise RuntimeError(f"the vllm engine cannot run: {reason}")
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine core in this process
        from vllm import LLM

        self._model = weakref.ref(model)  # weak: engines live in a table keyed weakly by the model
        self._dir = tempfile.TemporaryDirectory(prefix="rlvr_vllm_")
        config = model.config.__class__.from_dict(model.config.to_dict())
        config.architectures = [type(model).__name__]
        config.save_pretrained(self._dir.name)  # config.json only; weights come from push_weights
        dtype = next(model.parameters()).dtype
        self.llm = LLM(
            model=self._dir.name, skip_tokenizer_init=True, load_format="dummy",
            dtype=str(dtype).removeprefix("torch."), gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=min(max_model_len, getattr(model.config, "max_position_embeddings", max_model_len)),
            enforce_eager=enforce_eager, seed=seed, enable_prefix_caching=True,
        )
        self._pushed: tuple[int, int] | None = None
        self.push_weights()

    def push_weights(self) -> float:
        """Copy the torch model's current weights into vLLM; returns the seconds it took."""
        start = time.perf_counter()
        weights = [(name, p.detach()) for name, p in self._model().named_parameters()]
        with torch.no_grad():
            self.llm.apply_model(lambda vllm_model: vllm_model.load_weights(weights))
        self.llm.reset_prefix_cache()  # cached prefixes were computed with the old weights
        torch.cuda.synchronize()
        self._pushed = _weights_version(self._model())
        return time.perf_counter() - start

    def stale(self) -> bool:
        return self._pushed != _weights_version(self._model())

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, eos_id: int | None, pad_id: int,
                 temperature: float | None, top_p: float | None, generator: torch.Generator | None = None,
                 record_margins: bool = False, record_logprobs: bool = False) -> Generation:
        from vllm import SamplingParams

        del pad_id  # vLLM never pads
        del record_logprobs  # not recorded from vLLM (its logprobs modes differ by version): no engine-trainer gap
        done = nothing_to_decode(prompts, max_new_tokens, record_margins, padded=False)
        if done is not None:
            return done
        batch = len(prompts)
        lens = [len(p) for p in prompts]
        greedy = _is_greedy(temperature)
        stops = [eos_id] if eos_id is not None and eos_id >= 0 else None
        seeds = [None] * batch
        if generator is not None and not greedy:  # reproducible per request, driven by the caller's stream
            seeds = torch.randint(0, 2**31 - 1, (batch,), generator=generator, device=generator.device).tolist()
        params = [
            SamplingParams(
                temperature=0.0 if greedy else float(temperature), top_p=1.0 if top_p is None else float(top_p),
                max_tokens=max_new_tokens, ignore_eos=True, stop_token_ids=stops, detokenize=False,
                logprobs=2 if record_margins else None, seed=seed,
            )
            for seed in seeds
        ]
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        tokens, finished, margins, top1, top2 = [], [], [], [], []
        for out in outputs:
            completion = out.outputs[0]
            ids = list(completion.token_ids)
            stopped = completion.finish_reason == "stop"
            if stopped and (not ids or ids[-1] != eos_id):  # a stop token left out of the ids
                ids.append(eos_id)
            tokens.append(ids)
            finished.append(stopped)
            if record_margins:
                m, a, b = [], [], []
                for step in completion.logprobs or []:
                    ranked = sorted(step.items(), key=lambda kv: kv[1].rank)
                    (t1, l1), (t2, l2) = ranked[0], ranked[1]
                    m.append(l1.logprob - l2.logprob)
                    a.append(t1)
                    b.append(t2)
                margins.append(m[: len(ids)])
                top1.append(a[: len(ids)])
                top2.append(b[: len(ids)])
        lengths = [len(t) for t in tokens]
        return Generation(
            tokens=tokens, lengths=lengths, finished=finished, margins=margins if record_margins else None,
            prefill_tokens=sum(lens), padded_prefill_tokens=sum(lens), generated_tokens=sum(lengths),
            untrimmed_steps=batch * max(lengths), top1=top1 if record_margins else None,
            top2=top2 if record_margins else None,
        )


_ENGINES: "weakref.WeakKeyDictionary[torch.nn.Module, VllmEngine]" = weakref.WeakKeyDictionary()


def engine_for(model: torch.nn.Module, **options) -> VllmEngine:
    """The model's vLLM engine, built on first use with ``options`` (see `VllmEngine`)."""
    engine = _ENGINES.get(model)
    if engine is None:
        engine = _ENGINES[model] = VllmEngine(model, **options)
    return engine


def push_weights(model: torch.nn.Module) -> float:
    """Push ``model``'s weights into its vLLM engine now; returns seconds."""
    return engine_for(model).push_weights()


def release(model: torch.nn.Module) -> None:
    """Drop the model's vLLM engine (frees its GPU memory once collected)."""
    _ENGINES.pop(model, None)


def generate(
    model: torch.nn.Module,
    prompts: list[list[int]],
    *,
    max_new_tokens: int,
    eos_id: int | None,
    pad_id: int,
    temperature: float | None,
    top_p: float | None,
    generator: torch.Generator | None = None,
    record_margins: bool = False,
    record_logprobs: bool = False,
) -> Generation:
    """`engine.generate`'s contract on vLLM; pushes the weights first when they changed."""
    engine = engine_for(model)
    if engine.stale():
        engine.push_weights()
    return engine.generate(prompts, max_new_tokens=max_new_tokens, eos_id=eos_id, pad_id=pad_id,
                           temperature=temperature, top_p=top_p, generator=generator, record_margins=record_margins)

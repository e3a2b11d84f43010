"""One decode step of a Hugging Face Qwen3 causal LM over a static KV cache, without transformers.

The fast engines (`static_engine`, `refill`) prefill with the model's own forward and then run this
step once per generated token. It is the Qwen3 decoder layer written out as plain tensor ops on the
model's own weights, so that a step is a fixed sequence of kernels with fixed shapes: no cache
objects, no mask building, no output dataclasses, no Python branching on data. That is what lets a
CUDA graph capture it (`step_graphs`) and what removes most of the per-step host cost on a CPU.

The arithmetic follows `transformers.models.qwen3.modeling_qwen3` op for op (RMSNorm in float32 then
cast back, RoPE as ``x*cos + rotate_half(x)*sin``, SDPA with the query packed per KV head, float32
softmax inside SDPA), so in float32 on a CPU the logits are bitwise those of the model's forward on
the same cache contents. Two rearrangements change no bit: q/k/v and gate/up projections run as one
matmul each over concatenated weights (each output column is the same dot product), and RoPE's
``rotate_half(x) * sin`` is computed as ``roll(x) * (sign * sin)`` (negation is exact).

Supported: `Qwen3ForCausalLM`-shaped models (full attention on every layer, no attention bias,
SiLU MLP, RoPE types whose tables do not depend on the sequence length). Anything else raises
`UnsupportedModel` naming what is missing, so callers can fall back to the reference engine.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["UnsupportedModel", "Qwen3Shape", "Qwen3StepWeights", "KVCache", "rope_tables", "decode_step"]


class UnsupportedModel(ValueError):
    """The model is not a Qwen3-shaped causal LM this step can run."""


@dataclass(frozen=True)
class Qwen3Shape:
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    eps: float

    @property
    def group(self) -> int:  # query heads per KV head
        return self.q_heads // self.kv_heads


def check_supported(model: torch.nn.Module) -> Qwen3Shape:
    """The model's shape, or `UnsupportedModel` saying why this step cannot run it."""
    cfg = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    if cfg is None or inner is None or not hasattr(inner, "layers") or not hasattr(model, "lm_head"):
        raise UnsupportedModel(f"{type(model).__name__} is not a Qwen3ForCausalLM-shaped model")
    if getattr(cfg, "model_type", None) != "qwen3":
        raise UnsupportedModel(f"model_type {getattr(cfg, 'model_type', None)!r} is not 'qwen3'")
    if type(model).__name__.startswith("FSDP"):
        raise UnsupportedModel("sharded over ranks (FSDP2): the static step reads whole weights")
    if any(hasattr(module, "lora_A") for module in inner.layers.modules()):
        raise UnsupportedModel("LoRA adapter layers (lora.rank): the static step reads the base weights alone")
    layer_types = getattr(cfg, "layer_types", None) or ["full_attention"] * cfg.num_hidden_layers
    if getattr(cfg, "use_sliding_window", False) or any(t != "full_attention" for t in layer_types):
        raise UnsupportedModel("sliding-window layers are not supported")
    if getattr(cfg, "attention_bias", False):
        raise UnsupportedModel("attention bias is not supported")
    if getattr(cfg, "hidden_act", "silu") != "silu":
        raise UnsupportedModel(f"hidden_act {cfg.hidden_act!r} is not 'silu'")
    rope_params = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    rope = rope_params.get("rope_type", rope_params.get("type", "default"))
    if rope in ("dynamic", "longrope"):
        raise UnsupportedModel(f"rope_type {rope!r} changes with the sequence length")
    return Qwen3Shape(
        layers=cfg.num_hidden_layers, hidden=cfg.hidden_size, q_heads=cfg.num_attention_heads,
        kv_heads=cfg.num_key_value_heads,
        head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        vocab=cfg.vocab_size, eps=cfg.rms_norm_eps,
    )


@dataclass
class LayerWeights:
    input_norm: torch.Tensor  # (H,)            the model's own parameter
    qkv: torch.Tensor  # (Hq*D + 2*Hkv*D, H)     concatenated copy, refreshed by `refresh`
    qk_norm: torch.Tensor  # (Hq + Hkv, D)       q_norm rows then k_norm rows, copy
    o_proj: torch.Tensor  # (H, Hq*D)            own parameter
    post_norm: torch.Tensor  # (H,)              own parameter
    gate_up: torch.Tensor  # (2*I, H)            concatenated copy
    down: torch.Tensor  # (H, I)                 own parameter


class Qwen3StepWeights:
    """The step's view of a model's weights: the model's own tensors where one matmul reads one
    parameter, and persistent concatenated copies where one matmul replaces two or three.

    The copies live in fixed buffers, so a captured CUDA graph keeps reading the right memory;
    `refresh()` copies the current parameters into them (call it before every generate, since
    training changes the weights in place). `fingerprint()` changes when any tensor the step reads
    was reallocated (e.g. `model.to(...)`), which invalidates captured graphs and the copies.
    """

    def __init__(self, model: torch.nn.Module):
        self.shape = check_supported(model)
        # Weak: engines keep these views in tables keyed weakly by the model, which a strong
        # reference from here would keep alive forever (and its caches with it).
        self._model = weakref.ref(model)
        self._fingerprint: tuple[int, ...] | None = None
        self.layers: list[LayerWeights] = []
        self._build()

    @property
    def model(self) -> torch.nn.Module:
        model = self._model()
        if model is None:
            raise ReferenceError("the model these weights belong to no longer exists")
        return model

    def _sources(self) -> list[torch.Tensor]:
        m = self.model
        out = [m.model.embed_tokens.weight, m.model.norm.weight, m.lm_head.weight]
        for layer in m.model.layers:
            a, mlp = layer.self_attn, layer.mlp
            out += [layer.input_layernorm.weight, a.q_proj.weight, a.k_proj.weight, a.v_proj.weight, a.q_norm.weight,
                    a.k_norm.weight, a.o_proj.weight, layer.post_attention_layernorm.weight, mlp.gate_proj.weight,
                    mlp.up_proj.weight, mlp.down_proj.weight]
        return out

    def fingerprint(self) -> tuple[int, ...]:
        return tuple(t.data_ptr() for t in self._sources())

    def _build(self) -> None:
        s, m = self.shape, self.model
        with torch.no_grad():
            self.embed = m.model.embed_tokens.weight.detach()  # (V, H)
            self.final_norm = m.model.norm.weight.detach()  # (H,)
            self.lm_head = m.lm_head.weight.detach()  # (V, H)
            self.layers = []
            for layer in m.model.layers:
                a, mlp = layer.self_attn, layer.mlp
                self.layers.append(LayerWeights(
                    input_norm=layer.input_layernorm.weight.detach(),
                    qkv=torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]).detach(),
                    qk_norm=torch.cat([a.q_norm.weight.expand(s.q_heads, -1),
                                       a.k_norm.weight.expand(s.kv_heads, -1)]).detach(),
                    o_proj=a.o_proj.weight.detach(),
                    post_norm=layer.post_attention_layernorm.weight.detach(),
                    gate_up=torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach(),
                    down=mlp.down_proj.weight.detach(),
                ))
        self._fingerprint = self.fingerprint()

    def refresh(self) -> bool:
        """Copy the current parameters into the concatenated buffers. Returns True when the model's
        tensors were reallocated since the last call (then everything is rebuilt: new buffers)."""
        if self.fingerprint() != self._fingerprint:
            self._build()
            return True
        s = self.shape
        with torch.no_grad():
            for lw, layer in zip(self.layers, self.model.model.layers):
                a, mlp = layer.self_attn, layer.mlp
                torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight], out=lw.qkv)
                torch.cat([a.q_norm.weight.expand(s.q_heads, -1), a.k_norm.weight.expand(s.kv_heads, -1)],
                          out=lw.qk_norm)
                torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight], out=lw.gate_up)
        return False

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.dtype

    @property
    def device(self) -> torch.device:
        return self.embed.device


class KVCache:
    """Preallocated keys and values for `rows` sequences of up to `capacity` positions.

    ``keys[l]`` / ``values[l]``: (rows, Hkv, capacity, D), already normed and rotated as the model
    stores them. ``bias``: (rows, capacity) additive attention mask in the cache dtype, 0 where a row
    holds a real key and -inf on left pads and positions not written yet. It is the float mask SDPA
    would build from a boolean one, built once per step instead of once per layer.
    """

    def __init__(self, shape: Qwen3Shape, rows: int, capacity: int, dtype: torch.dtype, device: torch.device):
        self.rows, self.capacity = rows, capacity
        kv = torch.zeros((shape.layers, 2, rows, shape.kv_heads, capacity, shape.head_dim), dtype=dtype, device=device)
        self.keys = list(kv[:, 0].unbind(0))
        self.values = list(kv[:, 1].unbind(0))
        self._storage = kv
        self.bias = torch.full((rows, capacity), float("-inf"), dtype=dtype, device=device)

    def load_prefill(self, layer_kv: list[tuple[torch.Tensor, torch.Tensor]], rows: torch.Tensor | None,
                     prompt_mask: torch.Tensor) -> None:
        """Copy a prefill's keys/values (per layer ``(n, Hkv, P, D)``) into cache rows ``rows`` (all
        rows when None) at positions ``[0, P)``; their mask opens where ``prompt_mask`` (n, P) bool is
        True there and is closed everywhere else."""
        width = prompt_mask.shape[1]
        for (k, v), kc, vc in zip(layer_kv, self.keys, self.values):
            if rows is None:
                kc[:, :, :width].copy_(k)
                vc[:, :, :width].copy_(v)
            else:
                kc[:, :, :width].index_copy_(0, rows, k)
                vc[:, :, :width].index_copy_(0, rows, v)
        prompt_bias = torch.zeros(prompt_mask.shape, dtype=self.bias.dtype, device=self.bias.device)
        prompt_bias.masked_fill_(~prompt_mask.to(torch.bool), float("-inf"))
        if rows is None:
            self.bias.fill_(float("-inf"))
            self.bias[:, :width] = prompt_bias
        else:
            self.bias.index_fill_(0, rows, float("-inf"))
            self.bias[:, :width].index_copy_(0, rows, prompt_bias)

    def open_position(self, rows: torch.Tensor, position: int) -> None:
        """Let rows ``rows`` attend to cache position ``position`` (used to keep idle rows finite)."""
        self.bias[rows, position] = 0.0


def rope_tables(model: torch.nn.Module, capacity: int, device: torch.device, dtype: torch.dtype):
    """RoPE ``(cos, signed_sin)`` for positions ``[0, capacity)``, each (capacity, D) in ``dtype``.

    Computed by the model's own rotary module (so any static RoPE variant and its scaling apply);
    ``signed_sin`` has its first half negated so that ``rotate_half(x) * sin == roll(x, D/2) *
    signed_sin`` exactly.
    """
    positions = torch.arange(capacity, device=device)[None, :]
    probe = torch.empty(0, device=device, dtype=dtype)
    with torch.no_grad():
        cos, sin = model.model.rotary_emb(probe, positions)  # (1, capacity, D) each
    cos, sin = cos[0].to(dtype), sin[0].to(dtype)
    half = sin.shape[-1] // 2
    signed_sin = torch.cat([-sin[:, :half], sin[:, half:]], dim=-1)
    return cos.contiguous(), signed_sin.contiguous()


def decode_step(
    w: Qwen3StepWeights,
    cache: KVCache,
    cos_table: torch.Tensor,
    sin_table: torch.Tensor,
    tokens: torch.Tensor,
    rope_pos: torch.Tensor,
    write_pos: torch.Tensor,
    window: int,
    use_mask: bool = True,
) -> torch.Tensor:
    """Feed one token per row; returns next-token logits (rows, V) in the model's dtype.

    tokens, rope_pos, write_pos: (rows,) long. Row ``b``'s new key/value is stored at cache position
    ``write_pos[b]`` (its mask opens there) and rotated for logical position ``rope_pos[b]``. Attention
    reads cache positions ``[0, window)`` under ``cache.bias``; every row must have
    ``write_pos < window``. ``use_mask=False`` skips the mask (allowed only when every position below
    ``window`` is real in every row; it mirrors the reference engine's unpadded path exactly).
    """
    s = w.shape
    rows = tokens.shape[0]
    d, hq, hkv = s.head_dim, s.q_heads, s.kv_heads
    half = d // 2
    cos = cos_table.index_select(0, rope_pos)[:, None, :]  # (rows, 1, D)
    sin = sin_table.index_select(0, rope_pos)[:, None, :]
    slot = write_pos.view(rows, 1, 1, 1).expand(rows, hkv, 1, d)  # scatter index into (rows, Hkv, cap, D)
    cache.bias.scatter_(1, write_pos[:, None], 0.0)
    mask = cache.bias[:, None, None, :window] if use_mask else None  # (rows, 1, 1, window)

    x = F.embedding(tokens, w.embed)  # (rows, H)
    for lw, kc, vc in zip(w.layers, cache.keys, cache.values):
        h = F.rms_norm(x, (s.hidden,), lw.input_norm, s.eps)
        qkv = F.linear(h, lw.qkv).view(rows, hq + 2 * hkv, d)
        qk = F.rms_norm(qkv[:, : hq + hkv], (d,), None, s.eps) * lw.qk_norm  # (rows, Hq+Hkv, D)
        qk = qk * cos + qk.roll(half, dims=-1) * sin
        q, k, v = qk[:, :hq], qk[:, hq:], qkv[:, hq + hkv :]
        kc.scatter_(2, slot, k[:, :, None, :])
        vc.scatter_(2, slot, v[:, :, None, :])
        if use_mask:  # one query per row, packed per KV head as transformers does: (rows, Hkv, group, D)
            attn = F.scaled_dot_product_attention(
                q.reshape(rows, hkv, s.group, d), kc[:, :, :window], vc[:, :, :window], attn_mask=mask,
                scale=d**-0.5)
        else:  # no mask: the grouped-query SDPA kernel, as transformers calls it then
            attn = F.scaled_dot_product_attention(
                q[:, :, None, :], kc[:, :, :window], vc[:, :, :window], scale=d**-0.5, enable_gqa=True)
        x = x + F.linear(attn.reshape(rows, hq * d), lw.o_proj)
        h = F.rms_norm(x, (s.hidden,), lw.post_norm, s.eps)
        gate, up = F.linear(h, lw.gate_up).chunk(2, dim=-1)
        x = x + F.linear(F.silu(gate) * up, lw.down)
    x = F.rms_norm(x, (s.hidden,), w.final_norm, s.eps)
    return F.linear(x, w.lm_head)

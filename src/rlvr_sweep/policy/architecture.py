"""Is a model folder the model the run expects? Checked from the files, before any weight is loaded.

`check_architecture(folder, expected)` reads `config.json`, the safetensors headers (tensor names and
shapes; a header that declares more bytes than its file holds is a truncated file) and the tokenizer's
config, and names every difference from `expected`: the architecture, the vocabulary, the layer shape,
the parameter count (tied: the hub checkpoint, whose output head is the embedding; untied: a folder
saved after the baseline's untying) and the EOS token. The paper's model, Qwen3-0.6B-Base, has
596,049,920 parameters tied and 751,632,384 untied, a 151,936-token vocabulary and EOS 151643
(`<|endoftext|>`); the family's 1.7B, 4B and 8B Base checkpoints are expected as their published configs say
(`model=qwen3_1_7b_base` and so on: 1,720,574,976, 4,022,468,096 tied; 8,190,735,360 untied). `run.plan`
checks every run whose `model.name` has an expectation here before a run folder is written;
`python -m rlvr_sweep.policy check-model DIR [--model NAME]` checks a folder by hand, and
`python -m rlvr_sweep.policy fetch-model --out DIR [--model NAME]` downloads a model into DIR and checks it.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Expected:
    hub_id: str
    architecture: str
    vocab_size: int
    hidden_size: int
    layers: int
    params_tied: int
    params_untied: int
    eos_id: int
    eos_token: str


QWEN3_0_6B_BASE = Expected(hub_id="Qwen/Qwen3-0.6B-Base", architecture="Qwen3ForCausalLM", vocab_size=151_936,
                           hidden_size=1024, layers=28, params_tied=596_049_920, params_untied=751_632_384,
                           eos_id=151_643, eos_token="<|endoftext|>")
QWEN3_0_6B_CONFIG = {  # Qwen/Qwen3-0.6B-Base's config.json (a randomly initialised folder of its shape)
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151_936, "hidden_size": 1024,
    "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
    "head_dim": 128, "max_position_embeddings": 32768, "rope_theta": 1_000_000, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True, "bos_token_id": 151_643, "eos_token_id": 151_643, "attention_bias": False,
    "hidden_act": "silu",
}


def _qwen3_config(hidden: int, intermediate: int, layers: int, heads: int, tied: bool) -> dict:
    """A Qwen3 Base checkpoint's published config.json: the family shares all but these five numbers."""
    return {**QWEN3_0_6B_CONFIG, "hidden_size": hidden, "intermediate_size": intermediate, "num_hidden_layers": layers,
            "num_attention_heads": heads, "tie_word_embeddings": tied}


# The Qwen3 Base family's published config.json files (Qwen/Qwen3-{1.7B,4B,8B}-Base on the hub): 8 KV heads of 128,
# vocabulary 151,936, EOS 151643, 32,768 positions, rope_theta 1e6 throughout; 8B alone stores an untied output head.
QWEN3_1_7B_CONFIG = _qwen3_config(2048, 6144, 28, 16, tied=True)
QWEN3_4B_CONFIG = _qwen3_config(2560, 9728, 36, 32, tied=True)
QWEN3_8B_CONFIG = _qwen3_config(4096, 12288, 36, 32, tied=False)


def qwen3_parameters(config: dict) -> tuple[int, int]:
    """(tied, untied) parameter counts of a Qwen3 config: per layer the q, k, v, o projections, q / k norms, the
    gated MLP and two RMSNorms; the embedding, a final norm and, untied, an output head (no biases)."""
    h, head, q, kv = config["hidden_size"], config["head_dim"], config["num_attention_heads"], config["num_key_value_heads"]
    layer = h * q * head * 2 + h * kv * head * 2 + 2 * head + 3 * h * config["intermediate_size"] + 2 * h
    tied = config["num_hidden_layers"] * layer + config["vocab_size"] * h + h
    return tied, tied + config["vocab_size"] * h


def _expected(hub_id: str, config: dict) -> Expected:
    tied, untied = qwen3_parameters(config)
    return Expected(hub_id=hub_id, architecture="Qwen3ForCausalLM", vocab_size=config["vocab_size"],
                    hidden_size=config["hidden_size"], layers=config["num_hidden_layers"], params_tied=tied,
                    params_untied=untied, eos_id=151_643, eos_token="<|endoftext|>")


QWEN3_1_7B_BASE = _expected("Qwen/Qwen3-1.7B-Base", QWEN3_1_7B_CONFIG)  # 1,720,574,976 tied
QWEN3_4B_BASE = _expected("Qwen/Qwen3-4B-Base", QWEN3_4B_CONFIG)  # 4,022,468,096 tied
QWEN3_8B_BASE = _expected("Qwen/Qwen3-8B-Base", QWEN3_8B_CONFIG)  # 8,190,735,360 untied
EXPECTED = {"qwen3_0_6b_base": QWEN3_0_6B_BASE, "qwen3_1_7b_base": QWEN3_1_7B_BASE, "qwen3_4b_base": QWEN3_4B_BASE,
            "qwen3_8b_base": QWEN3_8B_BASE}  # model.name -> what its folder must hold
CONFIGS = {"qwen3_0_6b_base": QWEN3_0_6B_CONFIG, "qwen3_1_7b_base": QWEN3_1_7B_CONFIG, "qwen3_4b_base": QWEN3_4B_CONFIG,
           "qwen3_8b_base": QWEN3_8B_CONFIG}  # model.name -> its published config.json (shape tests, memory plans)


def safetensors_shapes(folder: Path) -> tuple[dict[str, list[int]], list[str]]:
    """({tensor name: shape} over every *.safetensors file of `folder`, problems) from the headers only."""
    shapes, problems = {}, []
    for path in sorted(Path(folder).glob("*.safetensors")):
        size = path.stat().st_size
        try:
            with path.open("rb") as f:
                (length,) = struct.unpack("<Q", f.read(8))
                if length > size - 8:
                    raise ValueError("header longer than the file")
                header = json.loads(f.read(length))
        except (struct.error, ValueError, UnicodeDecodeError) as err:
            problems.append(f"{path.name} is not a safetensors file ({err})")
            continue
        end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
        if 8 + length + end > size:
            problems.append(f"{path.name} is truncated: its header declares {8 + length + end:,} bytes, "
                            f"the file holds {size:,}")
        shapes.update({k: t["shape"] for k, t in header.items() if k != "__metadata__"})
    return shapes, problems


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def check_architecture(folder, expected: Expected) -> list[str]:
    """Every way `folder` differs from `expected` (empty when it holds that model)."""
    folder = Path(folder)
    problems = []
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as err:
        return [f"config.json cannot be read ({err})"]
    for key, want in (("vocab_size", expected.vocab_size), ("hidden_size", expected.hidden_size),
                      ("num_hidden_layers", expected.layers)):
        if config.get(key) != want:
            problems.append(f"config.json {key} is {config.get(key)!r}, expected {want:,}")
    if expected.architecture not in (config.get("architectures") or []):
        problems.append(f"config.json architectures {config.get('architectures')!r}, expected {expected.architecture}")
    shapes, broken = safetensors_shapes(folder)
    problems += broken
    if not shapes and not broken:
        problems.append("no *.safetensors weights (a pickle checkpoint is never loaded)")
    elif shapes:
        count = sum(_count(s) for s in shapes.values())
        if count not in (expected.params_tied, expected.params_untied):
            problems.append(f"the weights hold {count:,} parameters, expected {expected.params_tied:,} (tied) "
                            f"or {expected.params_untied:,} (untied)")
    problems += _eos_problems(folder, expected)
    return problems


def _eos_problems(folder: Path, expected: Expected) -> list[str]:
    try:
        tok = json.loads((folder / "tokenizer_config.json").read_text())
    except (OSError, ValueError) as err:
        return [f"tokenizer_config.json cannot be read ({err})"]
    eos = tok.get("eos_token")
    eos = eos.get("content") if isinstance(eos, dict) else eos
    ids = {int(i): t.get("content") for i, t in (tok.get("added_tokens_decoder") or {}).items()}
    try:  # a tokenizer.json lists its special tokens too
        ids.update({t["id"]: t["content"] for t in json.loads((folder / "tokenizer.json").read_text())["added_tokens"]})
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if eos != expected.eos_token or ids.get(expected.eos_id) != expected.eos_token:
        return [f"the tokenizer's EOS is {eos!r} (id {next((i for i, c in ids.items() if c == eos), None)}), "
                f"expected {expected.eos_token!r} = {expected.eos_id}"]
    return []

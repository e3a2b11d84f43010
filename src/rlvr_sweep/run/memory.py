"""What a run holds in memory beyond the paper's recipe, known before it starts: the frozen reference policy
of an objective with KL to the initial weights (`objective.kl_beta > 0` or `objective.measure_kl`), a second
copy of the weights at `model.dtype` (docs/configuration.md#objectives).

The parameter count comes from the model folder's safetensors headers (no weights are read), so the preflight
can print the cost of every job that keeps such a copy before anything is launched.
"""

from __future__ import annotations

from pathlib import Path

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def needs_reference(objective) -> bool:
    """An objective's settings (`config.ObjectiveConfig`) keep the initial weights: KL in it, or measured."""
    return objective.kl_beta > 0 or objective.measure_kl


def parameter_count(folder: Path) -> int | None:
    """The parameters in a model folder's `*.safetensors` files, from their headers; None without any."""
    from safetensors import safe_open

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for path in files:
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():
                n = 1
                for dim in f.get_slice(name).get_shape():
                    n *= dim
                total += n
    return total


def reference_bytes(dtype: str, folder: Path) -> int | None:
    """The bytes of a frozen copy of the weights at `dtype` (a tied output head is stored once)."""
    count = parameter_count(folder)
    return None if count is None else count * DTYPE_BYTES[dtype]


def size_words(size: int) -> str:
    """`1.41 GiB`, `0.57 MiB`."""
    return f"{size / 2**30:.2f} GiB" if size >= 2**30 else f"{size / 2**20:.2f} MiB"


def reference_note(dtype: str, folder: Path) -> str:
    """`a frozen copy of the initial weights as the KL reference: 1.41 GiB (751,632,384 parameters at bfloat16)`."""
    count = parameter_count(folder)
    if count is None:
        return "a frozen copy of the initial weights as the KL reference (as much memory again as the weights)"
    size = count * DTYPE_BYTES[dtype]
    return (f"a frozen copy of the initial weights as the KL reference: {size_words(size)} ({count:,} parameters "
            f"at {dtype})")

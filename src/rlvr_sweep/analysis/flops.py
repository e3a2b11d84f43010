"""Analytical dense-work proxies of training (seed paper §5.1), in TFLOPs.

    Out     = (2 gen + 6 bwd_out) P / 1e12
    Full    = [2 (pref + gen) + 6 bwd_full] P / 1e12
    PadFull = [2 (pad_pref + untrim_gen) + 6 bwd_full] P / 1e12

P is the trained model's parameter count as the run recorded it (`run.json` `params`), never a
constant here. These are proxies, not hardware counts: attention's quadratic term and the O(P)
AdamW steps are left out, as in the paper.
"""

from __future__ import annotations

TOKEN_KEYS = ("gen", "pref", "pad_pref", "untrim_gen", "bwd_out", "bwd_full")
# run.json `totals` / steps-table column behind each token count of the proxies
LEDGER_COLUMNS = {"gen": "gen_tokens", "pref": "prefill_tokens", "pad_pref": "padded_prefill_tokens",
                  "untrim_gen": "untrimmed_steps", "bwd_out": "bwd_out_tokens", "bwd_full": "bwd_full_tokens"}


def proxies(tokens: dict, params: float) -> dict[str, float]:
    """{"out", "full", "pad_full"} TFLOPs from token counts (`TOKEN_KEYS`) and P.

    >>> p = proxies(dict(gen=135.7e3, pref=33.7e3, pad_pref=33.7e3, untrim_gen=169.6e3,
    ...                  bwd_out=135.7e3, bwd_full=169.4e3), 751_632_384)   # Arm 1's means
    >>> [round(p[k], 1) for k in ("out", "full", "pad_full")]
    [816.0, 1018.6, 1069.6]
    """
    missing = [k for k in TOKEN_KEYS if k not in tokens]
    if missing:
        raise ValueError(f"proxies needs token counts {list(TOKEN_KEYS)}; missing {missing}")
    t = {k: float(tokens[k]) for k in TOKEN_KEYS}
    scale = float(params) / 1e12
    return {
        "out": (2 * t["gen"] + 6 * t["bwd_out"]) * scale,
        "full": (2 * (t["pref"] + t["gen"]) + 6 * t["bwd_full"]) * scale,
        "pad_full": (2 * (t["pad_pref"] + t["untrim_gen"]) + 6 * t["bwd_full"]) * scale,
    }


def ledger_tokens(totals: dict) -> dict[str, float]:
    """The proxies' token counts from a run's `totals` (or a steps-table column sum) by ledger name."""
    return {k: totals[column] for k, column in LEDGER_COLUMNS.items()}

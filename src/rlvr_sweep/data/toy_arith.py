"""Toy arithmetic: a seeded, synthetic multi-step math task for CPU smoke runs and tests.

Each problem is an integer expression over 2 to 6 small non-negative operands (0-9) with
the operators ``+``, ``-`` and ``*`` and, sometimes, one pair of parentheses, e.g.::

    problem:  "Compute (7 + 3) * 4 - 5."
    solution: "(7 + 3) * 4 - 5 = 10 * 4 - 5\\n10 * 4 - 5 = 40 - 5\\n40 - 5 = 35\\n\\\\boxed{35}"
    answer:   "35"

The worked solution performs exactly one binary operation per line, in the order a person
would: inside the parentheses first, then multiplications left to right, then additions
and subtractions left to right.  Each line is ``"<expression> = <expression with that one
operation done>"``; the first left-hand side is the problem's expression, each right-hand
side is the next line's left-hand side, the last one is the answer, and the final line is
``\\boxed{<answer>}``.  Rewriting the remaining expression on every line keeps each step
local (easy for a tiny model to copy) and makes solution length grow with the operand
count: worked solutions of 6-operand problems are longer than 64 tokens.  Intermediate
values may be negative; a negative value after the first position is parenthesised, e.g.
``"5 * (2 - 9) = 5 * (-7)"``.  The answer is ``str(int)`` of Python's own evaluation of the
expression, so the verifiable reward (last ``\\boxed{...}`` content equals the gold
answer) is an exact string match.

Splits.  ``load_split("train" | "heldout", n, seed)`` draws problems from a per-split
seeded stream (``random.Random("toy_arith:<split>:<seed>")``) and keeps only problems whose
text falls into that split's hash partition (sha256 of the problem text; 1 in 5 texts
belongs to ``heldout``), so the two splits never share a problem text, for any seeds.
Rows are deterministic and prefix-stable: ``load_split(s, n, k)[:m] == load_split(s, m, k)``.
Duplicates *within* a split are possible (the space of 2-operand problems is small).
"""

from __future__ import annotations

import functools
import hashlib
import random

SPLITS = ("train", "heldout")
HELDOUT_BUCKETS = 5  # 1 in HELDOUT_BUCKETS problem texts belongs to the heldout split

# Number of operands: 2..6.  The 6-operand problems have worked solutions long enough
# that some rollouts hit a 64-token horizon.
N_OPERANDS = (2, 3, 4, 5, 6)
N_OPERANDS_WEIGHTS = (1, 3, 4, 3, 1)
MAX_OPERAND = 9
OPS = ("+", "-", "*")
P_PARENS = 0.3


def _render(vals: list[int], ops: list[str], span: tuple[int, int] | None) -> str:
    """Render an expression; a negative value after the first position is parenthesised."""
    parts: list[str] = []
    for i, v in enumerate(vals):
        s = f"({v})" if v < 0 and i > 0 else str(v)
        if span and i == span[0]:
            s = "(" + s
        if span and i == span[1] - 1:
            s = s + ")"
        parts.append(s)
        if i < len(ops):
            parts.append(ops[i])
    return " ".join(parts)


def _apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def _pick(ops: list[str], lo: int, hi: int) -> int:
    """Index of the next operation among ops[lo:hi]: first '*', else the first one."""
    window = ops[lo:hi]
    return lo + (window.index("*") if "*" in window else 0)


def make_problem(rng: random.Random) -> dict:
    """Draw one problem from ``rng``; returns ``{"problem", "answer", "solution"}``."""
    n = rng.choices(N_OPERANDS, weights=N_OPERANDS_WEIGHTS)[0]
    vals = [rng.randint(0, MAX_OPERAND) for _ in range(n)]
    ops = [rng.choice(OPS) for _ in range(n - 1)]
    span = None  # operands [lo, hi) are parenthesised
    if n >= 3 and rng.random() < P_PARENS:
        length = rng.randint(2, n - 1)
        lo = rng.randint(0, n - length)
        span = (lo, lo + length)
    expr = _render(vals, ops, span)

    lines: list[str] = []
    while ops:
        before = _render(vals, ops, span)
        i = _pick(ops, span[0], span[1] - 1) if span else _pick(ops, 0, len(ops))
        vals[i : i + 2] = [_apply(vals[i], ops[i], vals[i + 1])]
        del ops[i]
        if span:
            span = (span[0], span[1] - 1) if span[1] - span[0] > 2 else None
        lines.append(f"{before} = {_render(vals, ops, span)}")
    answer = str(vals[0])
    lines.append(f"\\boxed{{{answer}}}")
    return {"problem": f"Compute {expr}.", "answer": answer, "solution": "\n".join(lines)}


def problem_expression(problem: str) -> str:
    """The Python-evaluable expression inside a problem text ("Compute <expr>.")."""
    assert problem.startswith("Compute ") and problem.endswith("."), problem
    return problem[len("Compute ") : -1]


def split_of(problem: str) -> str:
    """Which split a problem text belongs to (hash partition)."""
    h = int.from_bytes(hashlib.sha256(problem.encode("utf-8")).digest()[:8], "big")
    return "heldout" if h % HELDOUT_BUCKETS == 0 else "train"


def load_split(split: str, n: int, seed: int = 0) -> list[dict]:
    """``n`` deterministic rows ``{"id", "problem", "answer", "solution"}`` of ``split`` (made once per
    process and arguments: a sweep's jobs share them; each call gets its own copies of the rows)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return [dict(row) for row in _made(split, n, seed)]


@functools.lru_cache(maxsize=32)
def _made(split: str, n: int, seed: int) -> tuple[dict, ...]:
    rng = random.Random(f"toy_arith:{split}:{seed}")
    rows: list[dict] = []
    while len(rows) < n:
        p = make_problem(rng)
        if split_of(p["problem"]) != split:
            continue
        rows.append({"id": f"toy_arith-{split}-{seed}-{len(rows):06d}", **p})
    return tuple(rows)

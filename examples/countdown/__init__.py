"""Countdown: a verifiable task of one's own, registered from outside the package (docs/extending.md).

Each problem gives three numbers and a target; a response is correct when its last `\\boxed{...}` holds an
arithmetic expression that uses each number exactly once (with + - * / and parentheses) and equals the
target, so many answers are right and the gold answer is the puzzle itself ("43: 3 5 8"), not one string
(the task of TinyZero and of Gandhi et al.'s "Cognitive behaviors" study, in small). Rows are generated from
a seed: every target is reachable by construction. Naming this package once,

    RLVR_SWEEP_PLUGINS=examples/countdown python -m rlvr_sweep +arm=countdown_grpo profile=smoke -m seed=42,101,7

registers the task as `data=countdown` (its parameters: `data.params.size`, `data.params.seed`) with its
held-out benchmark `countdown_heldout`, and finds the arm in `conf/arm/`.
"""

from __future__ import annotations

import ast
import hashlib
import random
from fractions import Fraction

from rlvr_sweep.extend import TASKS, at_least, extract_answer, param

PROMPT = ("Use each of the given numbers exactly once, with + - * / and parentheses, to make the target.\n"
          "Write the expression on the last line as:\n\\boxed{EXPRESSION}\n\n"
          "{problem}\n\nAnswer:")
NUMBERS, LOW, HIGH = 3, 1, 9  # three numbers from 1 to 9
HELDOUT_BUCKETS = 5  # 1 in 5 puzzles is held out (by a hash of its text): train and held-out never share one
HELDOUT_SIZE = 100
MAX_EXPRESSION = 64  # characters of an answer the grader reads; longer is wrong


def puzzle(rng: random.Random) -> dict:
    """A reachable puzzle: numbers, and the value of a random expression over them in a random order."""
    while True:
        numbers = [rng.randint(LOW, HIGH) for _ in range(NUMBERS)]
        order = rng.sample(numbers, len(numbers))
        ops = [rng.choice("+-*") for _ in range(len(order) - 1)]
        expression = " ".join(str(x) + (f" {op}" if i < len(ops) else "") for i, (x, op) in
                              enumerate(zip(order, [*ops, ""])))
        target = eval(expression)  # noqa: S307  (our own digits and operators)
        if 1 <= target <= 100:
            shown = " ".join(map(str, sorted(numbers)))
            return {"problem": f"Numbers: {shown}\nTarget: {target}", "answer": f"{target}: {shown}",
                    "solution": expression}


def split_rows(split: str, size: int, seed: int) -> list[dict]:
    rng, rows, seen = random.Random(f"countdown:{split}:{seed}"), [], set()
    while len(rows) < size:
        row = puzzle(rng)
        held_out = int(hashlib.sha256(row["problem"].encode()).hexdigest(), 16) % HELDOUT_BUCKETS == 0
        if held_out == (split == "heldout") and row["problem"] not in seen:
            seen.add(row["problem"])
            rows.append({"id": f"countdown-{split}-{seed}-{len(rows):05d}", **row})
    return rows


def is_puzzle(gold: str) -> bool:
    """A gold answer is '<target>: <n1> <n2> <n3>'."""
    target, _, numbers = gold.partition(":")
    return target.strip().isdigit() and len(numbers.split()) == NUMBERS and all(n.isdigit() for n in numbers.split())


def _value(node):
    """(value, the numbers used) of an expression of integers, + - * / and parentheses; None otherwise."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Fraction(node.value), [node.value]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        left, right = _value(node.left), _value(node.right)
        if left is None or right is None or (isinstance(node.op, ast.Div) and right[0] == 0):
            return None
        a, b = left[0], right[0]
        value = a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) \
            else a * b if isinstance(node.op, ast.Mult) else a / b
        return value, left[1] + right[1]
    return None


def reaches_target(pred: str, gold: str) -> bool:
    """The grader: `pred` uses each number of the puzzle exactly once and equals its target."""
    if not isinstance(pred, str) or not pred or len(pred) > MAX_EXPRESSION or not is_puzzle(gold):
        return False
    target, _, numbers = gold.partition(":")
    try:
        found = _value(ast.parse(pred.replace("\\times", "*").replace("\\div", "/"), mode="eval").body)
    except (SyntaxError, ValueError):
        return False
    return found is not None and found[0] == int(target) and sorted(found[1]) == sorted(map(int, numbers.split()))


def expression(text: str) -> str:
    """The answer of a response: its last `\\boxed{...}` (none: "")."""
    return extract_answer(text, fallback=None)


def heldout(*, seed: int) -> list[dict]:
    """The held-out puzzles (100), disjoint from every training puzzle of the same seed."""
    return split_rows("heldout", HELDOUT_SIZE, seed)


@TASKS.register("countdown", prompt=PROMPT, extract=expression, grade=reaches_target,
                gold=("'<target>: <three numbers>'", is_puzzle), benchmarks={"countdown_heldout": heldout},
                test_sets=("countdown_heldout",),
                checksums={"train": "518c7a7c4abb0d9a386d319617cde682ef1d40413053fc0065db4fe7b35b2802",
                           "countdown_heldout": "7f0cc34d67144e25b3707d3f496877a28318abebe50f25c41a14ace8f093403a"},
                params={"size": param(1000, at_least(1)), "seed": param(0, at_least(0))})
def countdown(*, size: int, seed: int) -> list[dict]:
    """Countdown puzzles in training order."""
    return split_rows("train", size, seed)

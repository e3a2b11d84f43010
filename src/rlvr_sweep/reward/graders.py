"""Answer graders by name: `(pred, gold) -> bool` on bare answers (`\\frac{1}{2}`, `(3, -1)`).

- `baseline` is `grading.grade`, the baseline spec's grader and the default; the paper's numbers
  use it.
- `math_verify` is Hugging Face's Math-Verify (`pip install math-verify`, optional): both strings
  are wrapped as inline math, `"$" + s + "$"`, parsed with `math_verify.parse` and compared with
  `math_verify.verify(gold, pred)`. `$...$` was chosen over `\\boxed{...}` because on the gold
  answers of math500/gsm8k/amc23/math_train it leaves fewer answers unparsed to a sympy value
  (12 of 13,859 against 59: in a box Math-Verify does not parse `17\\%` or `30^\\circ.`), and a
  `\\$` inside an answer (`\\$42409`) parses either way.

Bounding Math-Verify. Its own timeouts use `signal.alarm`, which only works in the main thread, so
they are switched off (`parse(..., parsing_timeout=None)`, `verify(..., timeout_seconds=None)`).
Instead all Math-Verify work runs in one persistent subprocess (`sandbox.SandboxWorker`, as
grading.py's sympy worker): the parent sends a request over a pipe and waits at most `timeout_s`
(default `MATH_VERIFY_TIMEOUT_S`) for the reply with `Connection.poll`, which works from any thread
and in daemonic pool workers; on timeout or worker death the worker is killed and replaced in the
background, the grade is False and `stats()` counts it. The worker runs under memory / file-size /
process rlimits and kills itself (SIGALRM's default action) if its parent vanishes mid-request.
Inputs that are not strings, or empty, grade False without reaching the worker. A missing or
unimportable package is an installation problem, not a grade: it raises ImportError
(`get_grader("math_verify")` checks up front).

Normal forms (used by `python -m rlvr_sweep.verify compare`):
- baseline: `grading.normalize(s)` (spec §4 steps 1-13, e.g. `\\frac{1}{2}` -> `(1)/(2)`).
- math_verify: the first element of `parse("$" + s + "$")`; a sympy value is written with `str()`
  (sympy's default printer: `1/2`, `sqrt(2)/2`, `(3, -1)`, `Interval.Lopen(0, 3)`), a string (the
  raw match, when Math-Verify could not parse it) is taken as is, no result gives `""`; None when
  the worker timed out or failed, or the form is over `MAX_NORMAL_FORM_CHARS`.
"""
from __future__ import annotations

import importlib.util
import math
from typing import Callable

if __package__:
    from . import grading, sandbox
else:  # loaded by file path in the Math-Verify worker: no package __init__ (nor torch) with it
    import _rlvr_sweep_sandbox as sandbox

    grading = sandbox.load_sibling("grading")

MATH_VERIFY_TIMEOUT_S = 5.0  # per grade: both parses and the comparison
STARTUP_TIMEOUT_S = 60.0  # importing math_verify/sympy on a cold filesystem; charged to no grade
MAX_NORMAL_FORM_CHARS = 10_000
MATH_VERIFY_WRAP = "${}$"
INSTALL_HINT = "pip install math-verify"
_PARSE_CACHE_SIZE = 4096
_MAX_REPLY_BYTES = 4 * MAX_NORMAL_FORM_CHARS + 1024


class _MathVerifyUnavailable(ImportError):
    pass


def math_verify_available() -> bool:
    """Whether the `math_verify` package is installed (it is imported only in the worker)."""
    return importlib.util.find_spec("math_verify") is not None


def _require_math_verify() -> None:
    if not math_verify_available():
        raise _MathVerifyUnavailable(
            f"the math_verify grader needs the math-verify package: {INSTALL_HINT}")


def _resolve_timeout(timeout_s) -> float:
    limit = MATH_VERIFY_TIMEOUT_S if timeout_s is None else float(timeout_s)
    if not (limit > 0 and math.isfinite(limit)):
        raise ValueError(f"timeout_s must be a positive finite number, got {timeout_s!r}")
    return limit


def math_verify_grade(pred, gold, timeout_s=None) -> bool:
    """Math-Verify's `verify(parse($gold$), parse($pred$))`; False on timeout, error or bad input.

    Raises only ImportError (package missing or unimportable) and ValueError (bad `timeout_s`).
    """
    limit = _resolve_timeout(timeout_s)
    _require_math_verify()
    if not isinstance(pred, str) or not isinstance(gold, str):
        if pred is not None and gold is not None:
            _count("non_str_inputs")
        return False
    if not pred.strip() or not gold.strip():
        return False  # parse("$$") is [], which never verifies
    return _WORKER.request(["verify", [gold, pred]], limit) is True


def math_verify_normal_form(answer, timeout_s=None) -> str | None:
    """`str()` of Math-Verify's parsed value of `$answer$` (see module docstring); None on failure."""
    limit = _resolve_timeout(timeout_s)
    _require_math_verify()
    if not isinstance(answer, str):
        return None
    if not answer.strip():
        return ""
    result = _WORKER.request(["normal_form", [answer]], limit)
    return result if isinstance(result, str) else None


def baseline_normal_form(answer) -> str:
    """The baseline's normal form: `grading.normalize` (spec §4 steps 1-13)."""
    return grading.normalize(answer) if isinstance(answer, str) else ""


GRADERS: dict[str, Callable[[str, str], bool]] = {
    "baseline": grading.grade,
    "math_verify": math_verify_grade,
}
NORMAL_FORMS: dict[str, Callable[[str], str | None]] = {
    "baseline": baseline_normal_form,
    "math_verify": math_verify_normal_form,
}
DEFAULT_GRADER = "baseline"
# what a grader decides without its worker pool (None: ask the pool); a grader not named asks the pool
SETTLED_HERE: dict[str, Callable[[str, str], bool | None]] = {"baseline": grading.settled}


def get_grader(name: str = DEFAULT_GRADER) -> Callable[[str, str], bool]:
    """The grader called `name`; ImportError (with the pip command) if its package is missing."""
    if name not in GRADERS:
        raise ValueError(f"unknown grader {name!r}; valid: {sorted(GRADERS)}")
    if name == "math_verify":
        _require_math_verify()
    return GRADERS[name]


_COUNTS = sandbox.Counters(("non_str_inputs",))
_count = _COUNTS.add


def stats() -> dict[str, int]:
    """Math-Verify worker event counts since import (diff two snapshots to attribute them)."""
    return {**_WORKER.stats(), **_COUNTS.snapshot()}


# ---------------------------------------------------------------- Math-Verify worker, parent side
_WORKER = sandbox.SandboxWorker(
    __file__, "_make_worker_handler", startup_timeout_s=STARTUP_TIMEOUT_S,
    max_reply_bytes=_MAX_REPLY_BYTES,
    unavailable="graders: math-verify worker unavailable ({why}); its grades are False",
    import_failure=lambda why: _MathVerifyUnavailable(
        f"math-verify does not import ({why}); {INSTALL_HINT}"))


def warm_up() -> bool:
    """Start the Math-Verify worker and wait until it has imported the package."""
    _require_math_verify()
    return _WORKER.warm_up()


def shutdown() -> None:
    """Stop the Math-Verify worker (a later grade starts a new one)."""
    _WORKER.shutdown()


def start_worker() -> None:
    """Begin starting one Math-Verify worker, returning at once (nothing when the package is missing:
    the first grade then says so)."""
    if math_verify_available():
        _WORKER.start(1)


WARM_UPS: dict[str, Callable[[], bool]] = {"baseline": grading.warm_up, "math_verify": warm_up}  # by grader
STARTS: dict[str, Callable[[], None]] = {"baseline": grading.start_worker, "math_verify": start_worker}  # no wait


# ---------------------------------------------------------------- Math-Verify worker, child side
def _make_ops() -> dict:
    """The worker's operations; imports math_verify and warms its lazy imports."""
    import logging

    logging.disable(logging.CRITICAL)  # "Timeout is disabled" etc.; stderr goes nowhere anyway
    from math_verify import parse, verify

    cache: dict = {}

    def parsed(answer: str) -> list:
        result = cache.get(answer)
        if result is None:
            if len(cache) >= _PARSE_CACHE_SIZE:
                cache.clear()
            result = cache[answer] = parse(MATH_VERIFY_WRAP.format(answer), parsing_timeout=None)
        return result

    def verify_op(gold: str, pred: str) -> bool:
        gold_parsed, pred_parsed = parsed(gold), parsed(pred)
        return bool(gold_parsed and pred_parsed
                    and verify(gold_parsed, pred_parsed, timeout_seconds=None))

    def normal_form_op(answer: str) -> str | None:
        result = parsed(answer)
        if not result:
            return ""
        first = result[0]
        text = first if isinstance(first, str) else str(first)
        return text if len(text) <= MAX_NORMAL_FORM_CHARS else None

    for gold, pred in [(r"\frac{1}{2}", "0.5"), ("(3, -1)", "(3,-1)"), ("[0,3)", "(0, 3]"),
                       (r"\sqrt{2}/2", r"\frac{1}{\sqrt{2}}"), ("x^2+2x+1", "(x+1)^2")]:
        verify_op(gold, pred)
        normal_form_op(gold)
    cache.clear()
    return {"verify": verify_op, "normal_form": normal_form_op}


def _make_worker_handler():
    """The worker's handler: `[op, args] -> ops[op](*args)`."""
    ops = _make_ops()
    return lambda request: ops[request[0]](*request[1])

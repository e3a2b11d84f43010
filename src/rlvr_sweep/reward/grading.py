"""Answer verifier: the baseline's extractor and grader, hardened.

Baseline spec (shared/research/baseline_spec.md) §3 is `extract_answer`; §4 is `normalize`,
`split_parts`, `equality_check` and `grade`; the §5 reward with the paper's derivation gate (seed
paper §4.1, `rfind("\\boxed") >= 30`) is `training_reward`. No result the spec lists changes.
Hardening:
- `grade` never raises: None, non-str, bytes and internal errors grade False.
- Text handling is linear-time (two §4 regexes are rewritten with identical results).
- Two canonical decimal integers are compared in-process (what sympy answers for them, without the
  round trip); everything else that is not identical goes to sympy.
- Sympy runs in one persistent `subprocess` worker (`sandbox.SandboxWorker`; works from any
  thread and daemonic pool workers), bounded by a pipe `poll(timeout)`; on timeout or death
  it is killed and replaced in the background, the comparison is False, `stats()` counts it.
- Model text with `__`, quotes, attribute access or words like `import`/`os` is unparsable;
  parse_expr gets a pruned sympy namespace with empty `__builtins__`; strings that sympy itself
  sympifies meet the same guard; the worker runs under memory/file/process rlimits.
"""
from __future__ import annotations

import io
import math
import re
import tokenize

if __package__:
    from . import sandbox
else:  # loaded by file path in the sympy worker: no package __init__ (nor torch) comes with it
    import _rlvr_sweep_sandbox as sandbox

GATE_CHARS = 30  # paper §4.1 L_gate
SYMBOLIC_TIMEOUT_S = 5.0
STARTUP_TIMEOUT_S = 60.0  # sympy import on a cold filesystem; not charged to any grade
MAX_PARSE_CHARS = 2000  # spec §4: longer strings are unparsable
FALLBACKS = ("number_then_full", "number_only", None)

# ---------------------------------------------------------------- §3 extraction
_NUMBER = re.compile(r"-?(?:\d+/\d+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)")
_BRACE = re.compile(r"[{}]")
_SPACES = re.compile(r"\s*")  # same character set as str.isspace


def _last_boxed(text: str) -> str | None:
    """Raw content of the last `\\boxed{...}` (nested braces kept); None if absent or unbalanced."""
    start = text.rfind("\\boxed")
    if start < 0:
        return None
    i = _SPACES.match(text, start + len("\\boxed")).end()
    if i >= len(text) or text[i] != "{":
        return None  # `\boxed 5` is not a box
    depth = 0
    for brace in _BRACE.finditer(text, i):  # jumps from brace to brace
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return text[i + 1 : brace.start()]
    return None


def extract_answer(text, fallback="number_then_full") -> str:
    """Last `\\boxed{}` content, else the fallback. `fallback=None` is the training reward's mode."""
    if fallback not in FALLBACKS:
        raise ValueError(f"unknown fallback {fallback!r}; valid: {FALLBACKS}")
    if not isinstance(text, str) or not text:
        return ""
    boxed = _last_boxed(text.strip())
    if boxed:  # an empty box falls through to the fallback
        return boxed.strip().strip("$ ")
    if fallback is None:
        return ""
    last = None
    for last in _NUMBER.finditer(text):  # on the original text, not the stripped one
        pass
    if last is not None:
        return last.group()
    return text if fallback == "number_then_full" else ""


# ---------------------------------------------------------------- §4 normalisation
_CHOICE_LABEL = re.compile(r"^[A-Za-z]\s*[.:]\s*(.+)$")
_DEGREE_BRACED, _DEGREE = re.compile(r"\^\s*\{\s*\\circ\s*\}"), re.compile(r"\^\s*\\circ")
_TEXT_WRAPPED = re.compile(r"^\\text\{(.+?)\}$")
_MATH_DELIMS = re.compile(r"\\\(|\\\)|\\\[|\\\]")
_LATEX_FIXES = [(re.compile(p), r) for p, r in [
    (r"\\left\s*", ""), (r"\\right\s*", ""), (r"\\,|\\!|\\;|\\:", ""), (r"\\cdot", "*"),
    ("\u00b7|\u00d7", "*"), (r"\\\^\\circ", ""), (r"\\dfrac", r"\\frac"), (r"\\tfrac", r"\\frac"),
    ("°", "")]]
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻", "0123456789+-")
_SUPERSCRIPT_RUN = re.compile(r"(?<=[0-9A-Za-z)\]}])[⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻]+")
_SQRT_BRACED, _SQRT_BARE = re.compile(r"\\sqrt\s*\{([^}]*)\}"), re.compile(r"\\sqrt\s+([^\\\s{}]+)")
_FRAC_BRACED = re.compile(r"\\frac\s*\{([^{}]+)\}\s*\{([^{}]+)\}")
_FRAC_BARE = re.compile(r"\\frac\s+([^\s{}]+)\s+([^\s{}]+)")
_MIXED_NUMBER = re.compile(r"(?<=\d)\s+(\d+/\d+)")
_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d\d\d(?:\D|$))")


def _strip_special_tokens(s: str) -> str:
    """`re.sub(r"<\\|[^>]+?\\|>", "", s)` in linear time.

    A match ends at the first `>` after its `<|`, so all `<|` before that `>` share one fate;
    the regex instead rescans to the end of the text from each `<|` when no `>` follows.
    """
    out, kept_from, search = [], 0, 0
    while (start := s.find("<|", search)) >= 0 and (end := s.find(">", start + 2)) >= 0:
        if end - 1 >= start + 3 and s[end - 1] == "|":  # non-empty body, closed by `|>`
            out.append(s[kept_from:start])
            kept_from = end + 1
        search = end + 1
    return "".join(out) + s[kept_from:]


def _sqrt_braced(s: str) -> str:
    # A `\sqrt{` with no `}` after it never matches; cutting at the last `}` stops the regex from
    # rescanning that tail once per `\sqrt{` (quadratic on hostile text).
    cut = s.rfind("}") + 1
    return _SQRT_BRACED.sub(r"sqrt(\1)", s[:cut]) + s[cut:]


def normalize(s) -> str:
    """Spec §4 normalize_text, steps 1-13 in order."""
    if not s:
        return ""
    s = _strip_special_tokens(s).strip()  # 1
    if label := _CHOICE_LABEL.match(s):  # 2: `A. 5` -> `5`
        s = label.group(1)
    s = _DEGREE.sub("", _DEGREE_BRACED.sub("", s)).replace("°", "")  # 3
    if wrapped := _TEXT_WRAPPED.match(s):  # 4
        s = wrapped.group(1)
    s = _MATH_DELIMS.sub("", s)  # 5
    for pattern, replacement in _LATEX_FIXES:  # 6
        s = pattern.sub(replacement, s)
    s = _SUPERSCRIPT_RUN.sub(lambda m: "**" + m.group().translate(_SUPERSCRIPTS), s)  # 7
    s = s.translate(_SUPERSCRIPTS)
    s = s.replace("\\%", "%").replace("$", "").replace("%", "")  # 8: `\$42409` -> `\42409`
    s = _SQRT_BARE.sub(r"sqrt(\1)", _sqrt_braced(s))  # 9
    s = _FRAC_BARE.sub(r"(\1)/(\2)", _FRAC_BRACED.sub(r"(\1)/(\2)", s))  # 10
    s = _MIXED_NUMBER.sub(r"+\1", s.replace("^", "**"))  # 11
    s = _THOUSANDS_COMMA.sub("", s)  # 12
    return s.replace("{", "").replace("}", "").strip().lower()  # 13


def split_parts(s: str) -> list[str]:
    """Spec §4 split_into_parts: `(a, b)` / `[a, b)` -> parts; bracket types are ignored."""
    if not s:
        return []
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]" and "," in s[1:-1]:
        parts = [p.strip() for p in s[1:-1].split(",")]
        if all(parts):
            return parts
    return [s]


# ---------------------------------------------------------------- guard on text given to sympy
_FORBIDDEN_WORD = re.compile(
    r"\b(?:lambda|import|eval|exec|open|getattr|globals|locals|compile|os|sys|subprocess)\b")
_ATTRIBUTE = re.compile(r"[A-Za-z_)\]]\s*\.\s*[A-Za-z_]")
_NON_CODE = {tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT}


def _is_unsafe(s: str) -> bool:
    # Quotes too: any str that reaches a sympy function is sympified, i.e. evaluated.
    if "__" in s or "'" in s or '"' in s or _FORBIDDEN_WORD.search(s) or _ATTRIBUTE.search(s):
        return True
    if "." not in s:
        return False
    try:  # attribute access after a number literal, which the regex misses: `1e5.real`, `1 .real`
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(s).readline)
                  if t.type not in _NON_CODE]
    except (tokenize.TokenError, SyntaxError):
        return True  # sympy tokenises the same way, so it could not parse this either
    return any(a.type == tokenize.OP and a.string == "." and b.type == tokenize.NAME
               for a, b in zip(tokens, tokens[1:]))


# ---------------------------------------------------------------- §4 grading, §5 reward
def _resolve_timeout(timeout_s) -> float:
    limit = SYMBOLIC_TIMEOUT_S if timeout_s is None else float(timeout_s)
    if not (limit > 0 and math.isfinite(limit)):
        raise ValueError(f"timeout_s must be a positive finite number, got {timeout_s!r}")
    return limit


# A decimal integer as Python writes one: sympy parses it to Integer(n), so `simplify(g - p) == 0` is
# `int(g) == int(p)`. Leading zeros are not in it (`007` tokenises otherwise), nor `+`, `_` or non-ASCII digits.
_CANONICAL_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")


def _settle(pairs) -> tuple[bool | None, list]:
    """(verdict, pending) for `all(equality_check(g, p))` on (gold, pred) part pairs: the verdict when
    no pair needs sympy (identical, too long or refused by the guard, two canonical integers; the
    loop goes on past an unequal integer pair so the guards count as they always did), else (None,
    the pairs for the worker)."""
    pending, unequal = [], False
    for gold_part, pred_part in pairs:
        if gold_part == pred_part:
            continue
        for s in (gold_part, pred_part):
            if len(s) > MAX_PARSE_CHARS:
                return False, []  # unparsable and not identical: never equal
            if _is_unsafe(s):
                _count("unsafe_rejected")
                return False, []
        if _CANONICAL_INT.fullmatch(gold_part) and _CANONICAL_INT.fullmatch(pred_part):
            unequal = unequal or int(gold_part) != int(pred_part)
            continue
        pending.append([gold_part, pred_part])
    if unequal:
        return False, []
    return (None, pending) if pending else (True, [])


def _all_equal(pairs, limit: float) -> bool:
    """all(equality_check(g, p)): what `_settle` decides in-process, one worker round trip for the rest."""
    verdict, pending = _settle(pairs)
    return verdict if verdict is not None else _WORKER.request(pending, limit) is True


def equality_check(gold_part, pred_part, timeout_s=None) -> bool:
    """Spec §4 equality_check: identical, or both parse and `simplify(g - p) == 0`."""
    limit = _resolve_timeout(timeout_s)
    if not isinstance(gold_part, str) or not isinstance(pred_part, str):
        return False
    try:
        return _all_equal([(gold_part, pred_part)], limit)
    except Exception:  # a grader bug must cost one comparison, not a training run
        _count("internal_errors")
        return False


def _part_pairs(pred, gold):
    """The (gold part, pred part) pairs `grade` compares, or its verdict (False) when there are none."""
    if pred is None or gold is None:
        return False
    if not isinstance(pred, str) or not isinstance(gold, str):
        _count("non_str_inputs")
        return False
    gold_parts, pred_parts = split_parts(normalize(gold)), split_parts(normalize(pred))
    if not gold_parts or len(gold_parts) != len(pred_parts):
        return False  # an empty gold never matches
    return list(zip(gold_parts, pred_parts))


def grade(pred, gold, timeout_s=None) -> bool:
    """Spec §4 grade_answer; never raises for any pred/gold. `timeout_s` bounds the sympy work."""
    limit = _resolve_timeout(timeout_s)
    try:
        pairs = _part_pairs(pred, gold)
        return pairs if isinstance(pairs, bool) else _all_equal(pairs, limit)
    except Exception:  # a grader bug must cost one reward, not a training run
        _count("internal_errors")
        return False


def settled(pred, gold) -> bool | None:
    """`grade(pred, gold)` when it needs no sympy worker, else None (then `grade` asks one). A caller
    grading many answers asks this first: the worker pool is needed only for what it leaves."""
    try:
        pairs = _part_pairs(pred, gold)
        return pairs if isinstance(pairs, bool) else _settle(pairs)[0]
    except Exception:
        _count("internal_errors")
        return False


def passes_gate(text: str, gate_chars: int | None) -> bool:
    """Paper §4.1 derivation gate: at least `gate_chars` characters before the last `\\boxed`."""
    return gate_chars is None or text.rfind("\\boxed") >= gate_chars


def training_reward(text, gold, gate_chars=None, timeout_s=None) -> float:
    """Spec §5 reward (needs a braced box); with `gate_chars`, also the paper §4.1 gate.
    `" \\boxed{98}<|endoftext|>"` scores 1.0 ungated and 0.0 with gate_chars=30 (box at 1)."""
    if gate_chars is not None and (isinstance(gate_chars, bool) or not isinstance(gate_chars, int)):
        raise TypeError(f"gate_chars must be an int or None, got {gate_chars!r}")
    if not isinstance(text, str):
        return 0.0
    if not passes_gate(text, gate_chars):
        return 0.0  # checked first: it is free, the grade may not be
    pred = extract_answer(text, fallback=None)
    return 1.0 if pred and grade(pred, gold, timeout_s) else 0.0


_COUNTS = sandbox.Counters(("unsafe_rejected", "non_str_inputs", "internal_errors"))
_count = _COUNTS.add


def stats() -> dict[str, int]:
    """Process-wide event counts since import (diff two snapshots to attribute them)."""
    return {**_WORKER.stats(), **_COUNTS.snapshot()}


# ---------------------------------------------------------------- sympy worker, parent side
_WORKER = sandbox.SandboxWorker(
    __file__, "_make_worker_handler", startup_timeout_s=STARTUP_TIMEOUT_S, max_reply_bytes=16,
    unavailable="grading: sympy worker unavailable ({why}); symbolic checks grade False")


def warm_up() -> bool:
    """Start the worker and wait until sympy is imported; call once before timing-critical work."""
    return _WORKER.warm_up()


def start_worker() -> None:
    """Begin starting one worker and return at once (its sympy imports then run beside the caller's work)."""
    _WORKER.start(1)


def shutdown() -> None:
    """Stop the worker (a later symbolic check starts a new one)."""
    _WORKER.shutdown()


# ---------------------------------------------------------------- sympy worker, child side
# What an answer may name. An answer is a value, so the verifier compares expressions and never runs
# an algorithm or Python code: the names it knows are sympy's mathematical functions (sqrt, sin,
# log, binomial, factorial, floor, gamma, Max, ... : `sympy.functions`), its number constructors
# and constants, and `abs` / `max` / `min` as Abs / Max / Min. Any other name, such as `isprime`,
# `factorint`, `solve`, `integrate` or Python's `len`, `sum`, `round`, parses as an undefined symbol
# or function, so `isprime(7)` is never `True` and `len((1,2))` never 2. The baseline's namespace
# (`from sympy import *` plus Python's builtins) would evaluate those; on the benchmarks' gold
# answers the two agree (`python -m rlvr_sweep.verify compare`), and a model answer that calls such
# a name is text, not a value.
_VALUE_CONSTRUCTORS = ("Integer", "Float", "Rational", "Symbol", "Function", "Add", "Mul", "Pow", "S",
                       "pi", "E", "I", "oo", "zoo", "nan", "EulerGamma", "GoldenRatio", "Catalan")


def _make_sympy_equal():
    """The worker's equality test: parse_expr over the value namespace above; warms lazy imports."""
    import sympy
    import sympy.functions
    from sympy.parsing import sympy_parser

    namespace = {name: getattr(sympy.functions, name) for name in sympy.functions.__all__}
    namespace.update((name, getattr(sympy, name)) for name in _VALUE_CONSTRUCTORS)
    namespace.update(abs=sympy.Abs, max=sympy.Max, min=sympy.Min)
    namespace["__builtins__"] = {}
    real_parse = sympy_parser.parse_expr
    transformations = (*sympy_parser.standard_transformations,
                       sympy_parser.implicit_multiplication_application)

    def guarded_parse(s, local_dict=None, transformations=transformations, global_dict=None,
                      evaluate=True):
        # sympify(str) looks parse_expr up in this module at call time, so strings that sympy
        # functions receive (e.g. built by slicing `srepr` output) meet the same guard.
        if not isinstance(s, str) or len(s) > MAX_PARSE_CHARS or _is_unsafe(s):
            raise SyntaxError("refused by grading guard")
        return real_parse(s, local_dict, transformations, namespace, evaluate)

    sympy_parser.parse_expr = guarded_parse

    def equal(gold_part: str, pred_part: str) -> bool:
        try:
            gold_expr, pred_expr = guarded_parse(gold_part, {}), guarded_parse(pred_part, {})
        except Exception:
            return False  # unparsable
        try:
            return bool(sympy.simplify(gold_expr - pred_expr) == 0)
        except Exception:
            return False

    for g, p in [("sqrt(2)/2", "1/sqrt(2)"), ("(x+1)**2", "x**2+2x+1"), ("sin(x)**2", "1-cos(x)**2")]:
        equal(g, p)
    return equal


def _make_worker_handler():
    """The worker's handler: `[[gold_part, pred_part], ...] -> all equal`."""
    equal = _make_sympy_equal()
    return lambda pairs: all(equal(g, p) for g, p in pairs)

"""The paper's baseline diagnostics (seed paper §3), per read-out and per run.

Table `baseline_readouts` (§3.1), one row per greedy read-out (each base model row and each trained arm
row) and benchmark: the short responses (< 30 tokens) and the multi-step ones (>= 30 tokens), their
counts, shares and accuracies (the paper: 426/500 short at 11.03 %, 74/500 multi-step at 36.49 % for
the base model on MATH-500), and of the correct responses that have a `\\boxed`, how many have >= 30
characters before it (`rfind`, the last `\\boxed`, as the derivation gate and the grader read it: the
paper's 219/219 and 221/221 after training). A trained row sums its seeds (counts over seeds x items).

Table `baseline_runs`, one row per training run:
- §3.1: `early_10_mean_tokens`, the mean length of the rollouts of the run's first 10 steps (the
  paper's 32.0 for the skip ablation), its all-zero groups and its total tokens (generated tokens of
  every step, the steps' `gen_tokens`: the rollout tokens of a flat run);
- §3.2: homogeneous groups, steps whose rewards are all 0 or all 1, and their share of the steps (the
  paper's seed 42: 12 all-0, 15 all-1 = 54.0 %);
- §3.3: in the active (mixed-reward) groups, the failed (R = 0) rollouts that share at least one
  equation with an R = 1 sibling of the same group (42/96 = 43.75 % in the paper), and the mean over
  the failed rollouts of the longest exact common token prefix with any R = 1 sibling (11.9 tokens;
  the longest over the siblings, then the mean over the failed rollouts). Equations come from the
  text of each rollout's first 160 tokens (`head_text`) by `equations()`: every chain of expressions
  joined by `=` (`EQUATION_CHAIN`; an expression is a run of non-space, non-`=` characters, possibly
  joined to others by + - * / ^ with spaces around), split into its adjacent `lhs=rhs` pairs with the
  spaces, `$` signs and the punctuation `.,;:!?` at both ends removed; a pair counts when it holds a
  digit. A surface proxy, as the paper says.

Every length is in the profile's units: 30 tokens, 30 characters, 10 steps is kept, 160 tokens scaled by
`profile.length_scale` (the smoke profile's 0.125: 4 tokens, 4 characters, 20 tokens of head).
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pandas as pd

from rlvr_sweep.analysis.render import Table, num
from rlvr_sweep.analysis.source import BASE_LABEL, BENCHMARK_NAMES, Sweep, benchmark_order, cut
from rlvr_sweep.config import scaled_length

SHORT_TOKENS = 30  # §3.1: a response of fewer tokens is the short mode
BOX_CHARS = 30  # §3.1: characters before the last \boxed of a correct response
EARLY_STEPS = 10  # §3.1: early_10_mean_tokens

_EXPR = r"[^\s=]+(?:\s*[-+*/^]\s*[^\s=]+)*"
EQUATION_CHAIN = re.compile(rf"{_EXPR}(?:\s*=\s*{_EXPR})+")
_TRIM = " \t\n$.,;:!?"


def equations(text: str) -> frozenset[str]:
    """The `lhs=rhs` pairs of every `=` chain in `text` (see the module docstring)."""
    return _equations(text or "")


@functools.lru_cache(maxsize=65536)
def _equations(text: str) -> frozenset[str]:
    found = set()
    for chain in EQUATION_CHAIN.finditer(text):
        parts = [re.sub(r"\s+", "", p).strip(_TRIM) for p in chain.group(0).split("=")]
        for lhs, rhs in zip(parts, parts[1:]):
            pair = f"{lhs}={rhs}"
            if lhs and rhs and any(ch.isdigit() for ch in pair):
                found.add(pair)
    return frozenset(found)


def common_prefix(a, b) -> int:
    """The length of the longest common prefix of two token sequences."""
    return _common_bytes(_packed(a), _packed(b)) // _WIDTH


_WIDTH = 8  # bytes per token id in `_packed`


def _packed(tokens) -> bytes:
    """A token sequence as the bytes of int64 ids: two sequences share a prefix of k tokens exactly when
    their bytes share a prefix of at least 8k (and fewer than 8(k + 1))."""
    return np.ascontiguousarray(tokens, dtype=np.int64).tobytes()


def _common_bytes(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix of two byte strings, halving the span that holds the first
    difference (each test compares slices in C, not item by item in Python)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while hi - lo > 1:  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _scale(frame: pd.DataFrame) -> float:
    return float(frame["length_scale"].iloc[0]) if "length_scale" in frame.columns and len(frame) else 1.0


# -- §3.1 per read-out ----------------------------------------------------------------------------

def readout_counts(grades: pd.DataFrame, short_tokens: int, box_chars: int) -> dict:
    """Counts of one read-out's graded rows (any number of seeds): short / multi-step and their
    correct, correct boxed responses and those with >= box_chars characters before the last \\boxed."""
    short = grades["length"] < short_tokens
    correct = grades["correct"].astype(bool)
    boxed = correct & grades["has_box"].astype(bool)
    before = grades["response"].fillna("").map(lambda t: t.rfind("\\boxed"))
    return {"n": len(grades), "short": int(short.sum()), "short_correct": int((short & correct).sum()),
            "multi": int((~short).sum()), "multi_correct": int((~short & correct).sum()),
            "correct_boxed": int(boxed.sum()), "boxed_derived": int((boxed & (before >= box_chars)).sum())}


def _readout_row(label: str, unit: str, benchmark: str, rows: pd.DataFrame, seeds: int, scale: float) -> dict:
    counts = readout_counts(rows, scaled_length(SHORT_TOKENS, scale), scaled_length(BOX_CHARS, scale))
    ratio = lambda a, b: 100 * a / b if b else float("nan")  # noqa: E731
    return {"label": label, "unit": unit, "benchmark": benchmark, "n_seeds": seeds,
            "short_tokens": scaled_length(SHORT_TOKENS, scale), "box_chars": scaled_length(BOX_CHARS, scale),
            **counts, "short_share": ratio(counts["short"], counts["n"]),
            "short_accuracy": ratio(counts["short_correct"], counts["short"]),
            "multi_share": ratio(counts["multi"], counts["n"]),
            "multi_accuracy": ratio(counts["multi_correct"], counts["multi"]),
            "boxed_derived_share": ratio(counts["boxed_derived"], counts["correct_boxed"])}


def build_baseline_readouts(sweep: Sweep) -> Table:
    title = "§3.1 diagnostics per greedy read-out: short (< 30 tokens) and multi-step responses, derivations before \\boxed"
    g = sweep.grades
    if not len(g) or not {"length", "response", "has_box"} <= set(g.columns):
        return Table.unbuilt("baseline_readouts", title, "the sweep has no greedy read-out with lengths and responses")
    scales = dict(zip(sweep.runs["run_hash"], sweep.runs.get("length_scale", pd.Series(1.0, index=sweep.runs.index))))
    rows = []
    base = g[g["phase"] == "base"]
    if len(base):
        of_run = dict(zip(sweep.runs["run_hash"], sweep.runs["base_hash"].fillna("")))
        base = base.assign(base_hash=base["run_hash"].map(of_run).fillna(""))
        for key, part in base.groupby("base_hash", sort=False):
            first = part[part["run_hash"] == part["run_hash"].iloc[0]]  # greedy: every run read the same
            for b in sorted(first["benchmark"].unique(), key=benchmark_order):
                rows.append(_readout_row(sweep.base_labels.get(key, BASE_LABEL), f"base:{key}", b,
                                         first[first["benchmark"] == b], 1, scales.get(first["run_hash"].iloc[0], 1.0)))
    for unit in sweep.units():
        mine = sweep.rows("grades", unit=unit, phase="trained")
        scale = float(sweep.runs_of(unit)["length_scale"].iloc[0]) if "length_scale" in sweep.runs.columns else 1.0
        for b in sorted(mine["benchmark"].unique(), key=benchmark_order):
            part = mine[mine["benchmark"] == b]
            rows.append(_readout_row(sweep.label(unit), unit, b, part, int(part["seed"].nunique()), scale))
    if not rows:
        return Table.unbuilt("baseline_readouts", title, "no greedy read-out found")
    frame = pd.DataFrame(rows)
    display = pd.DataFrame([{
        "Read-out": r["label"] + (f" ({r['n_seeds']} seeds)" if r["n_seeds"] > 1 else ""),
        "Benchmark": BENCHMARK_NAMES.get(r["benchmark"], r["benchmark"]),
        f"Short (< {r['short_tokens']} tok)": f"{r['short']}/{r['n']} ({num(r['short_share'], 1)}%)",
        "Short acc.": f"{num(r['short_accuracy'], 2)}% ({r['short_correct']}/{r['short']})",
        "Multi-step": f"{r['multi']}/{r['n']} ({num(r['multi_share'], 1)}%)",
        "Multi-step acc.": f"{num(r['multi_accuracy'], 2)}% ({r['multi_correct']}/{r['multi']})",
        f"Correct boxed with >= {r['box_chars']} chars before": f"{r['boxed_derived']}/{r['correct_boxed']}",
    } for _, r in frame.iterrows()])
    return Table("baseline_readouts", title, frame, display,
                 notes=["lengths in the profile's units (30 tokens and 30 characters scaled by profile.length_scale); "
                        "a trained row counts every seed's items; characters before the last \\boxed (rfind)"])


# -- §3.1-3.3 per run -----------------------------------------------------------------------------

def surface_divergence(rollouts: pd.DataFrame) -> dict:
    """§3.3 over one run's rollouts: failed rollouts of active groups, those sharing an equation with an
    R = 1 sibling, and the mean longest common token prefix with an R = 1 sibling (groups in (step,
    question_id) order, failed rollouts in ledger order)."""
    failed = shared = 0
    prefixes = []
    rewards = rollouts["reward"].to_numpy(dtype=float).tolist()
    heads, tokens = rollouts["head_text"].tolist(), rollouts["tokens"].tolist()
    groups: dict = {}
    for i, key in enumerate(zip(rollouts["step"].tolist(), rollouts["question_id"].tolist())):
        groups.setdefault(key, []).append(i)
    for key in sorted(groups):
        members = groups[key]
        r = [rewards[i] for i in members]
        if min(r) == max(r):
            continue
        winners = [i for i in members if rewards[i] == 1]
        win_equations = [equations(heads[i]) for i in winners]
        win_tokens = [_packed(tokens[i]) for i in winners]
        for i in members:
            if rewards[i] != 0:
                continue
            failed += 1
            mine = equations(heads[i])
            shared += any(mine & other for other in win_equations)
            if win_tokens:
                loser = _packed(tokens[i])
                prefixes.append(max(_common_bytes(loser, w) for w in win_tokens) // _WIDTH)
    return {"failed_active": failed, "shared_equation": shared,
            "shared_share": 100 * shared / failed if failed else float("nan"),
            "mean_lcp": float(np.mean(prefixes)) if prefixes else float("nan")}


def run_diagnostics(steps: pd.DataFrame, rollouts: pd.DataFrame) -> dict:
    """§3.1 / §3.2 / §3.3 figures of one run from its step and rollout ledgers."""
    rewards = [[float(x) for x in r] for r in steps[["step", "rewards"]].sort_values("step")["rewards"]]
    all0 = sum(bool(r) and max(r) == 0 for r in rewards)
    all1 = sum(bool(r) and min(r) == 1 for r in rewards)
    first = sorted(rollouts["step"].unique())[:EARLY_STEPS] if len(rollouts) else []
    early = rollouts.loc[rollouts["step"].isin(first), "length"]  # the one column read: no text is cut
    out = {"steps": len(rewards), "all_zero": all0, "all_one": all1,
           "homogeneous_share": 100 * (all0 + all1) / len(rewards) if rewards else float("nan"),
           "early_10_mean_tokens": float(early.mean()) if len(early) else float("nan"),
           "total_tokens": int(steps["gen_tokens"].sum())}
    have = {"tokens", "head_text"} <= set(rollouts.columns) and len(rollouts)
    return {**out, **(surface_divergence(rollouts) if have else
                      {"failed_active": 0, "shared_equation": 0, "shared_share": float("nan"), "mean_lcp": float("nan")})}


def _by_run(frame: pd.DataFrame, columns: list[str]):
    """run_hash -> that run's rows of `frame`'s `columns` (those it has), in ledger order."""
    narrow = frame[[c for c in columns if c in frame.columns]]
    positions = narrow.groupby("run_hash", sort=False).indices if len(narrow) else {}
    return lambda run_hash: cut(narrow, positions.get(run_hash, []))


def build_baseline_runs(sweep: Sweep) -> Table:
    title = "§3 diagnostics per run: early lengths, homogeneous groups, surface-token divergence in active groups"
    if not len(sweep.steps) or not len(sweep.rollouts):
        return Table.unbuilt("baseline_runs", title, "the sweep has no step and rollout ledgers")
    rows = []
    # each run's rows of the columns read here (a narrow frame: cutting it per run is cheap)
    steps_of = _by_run(sweep.steps, ["run_hash", "step", "rewards", "gen_tokens"])
    rollouts_of = _by_run(sweep.rollouts, ["run_hash", "step", "question_id", "reward", "length", "tokens", "head_text"])
    for _, run in sweep.runs.iterrows():
        steps = steps_of(run["run_hash"])
        rollouts = rollouts_of(run["run_hash"])
        if not len(steps):
            continue
        rows.append({"label": run["label"], "unit": run["unit"], "seed": int(run["seed"]),
                     "run_dir": sweep.relative(run["run_dir"]), "has_tokens": "tokens" in rollouts.columns,
                     **run_diagnostics(steps, rollouts)})
    if not rows:
        return Table.unbuilt("baseline_runs", title, "no run has a step ledger")
    frame = pd.DataFrame(rows)
    display = pd.DataFrame([{
        "Run": f"{r['label']} seed {r['seed']}",
        "Early-10 mean tokens": num(r["early_10_mean_tokens"], 1),
        "All-0 / all-1 groups": f"{r['all_zero']} / {r['all_one']} of {r['steps']}",
        "Homogeneous": f"{num(r['homogeneous_share'], 1)}%",
        "Total tokens": f"{r['total_tokens']:,}",
        "R=0 sharing an equation with R=1": (f"{r['shared_equation']}/{r['failed_active']} ({num(r['shared_share'], 2)}%)"
                                             if r["has_tokens"] else "not recorded"),
        "Mean LCP with R=1 (tokens)": num(r["mean_lcp"], 1) if r["has_tokens"] else "not recorded",
    } for _, r in frame.iterrows()])
    return Table("baseline_runs", title, frame, display, notes=[
        "groups are steps' reward vectors; total tokens are generated tokens; equations from each rollout's first "
        "160 tokens (scaled), regex analysis.diagnostics.EQUATION_CHAIN; LCP: longest exact common token prefix with "
        "any R=1 sibling, averaged over the R=0 rollouts of active groups"])

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
  paper's seed 42: 12 all-0, 15 all-1 = 54.0 %). A homogeneous group is one whose rewards are all equal (zero
  variance, as Table 2A and the ledger's `active` count it); with rewards other than 0 / 1 (a length penalty)
  the all-0 / all-1 counts are the all-wrong / all-right groups by correctness instead (`groups_by`);
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
from rlvr_sweep.analysis.source import BASE_LABEL, BENCHMARK_NAMES, Sweep, benchmark_order
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


def _trained_counts(sweep: Sweep) -> dict:
    """{(unit, benchmark): (readout_counts of the arm's trained rows, their number of seeds)} for every
    arm at once: each row's flags from whole columns, summed per arm and benchmark (counts: the same in any
    order), instead of cutting each arm's rows (what used to be most of this table's time)."""
    g = sweep.grades
    trained = g.loc[(g["phase"] == "trained").to_numpy(), ["unit", "benchmark", "seed", *_READOUT_COLUMNS[2:]]]
    if not len(trained):
        return {}
    runs = sweep.runs
    scale = (runs.drop_duplicates("unit").set_index("unit")["length_scale"].astype(float)
             if "length_scale" in runs.columns else pd.Series(1.0, index=pd.Index(runs["unit"].unique())))
    units = trained["unit"]
    short_tokens = units.map({u: scaled_length(SHORT_TOKENS, s) for u, s in scale.items()}).to_numpy(dtype=float)
    box_chars = units.map({u: scaled_length(BOX_CHARS, s) for u, s in scale.items()}).to_numpy(dtype=float)
    short = trained["length"].to_numpy() < short_tokens
    correct = trained["correct"].astype(bool).to_numpy()
    boxed = correct & trained["has_box"].astype(bool).to_numpy()
    before = np.full(len(trained), -1)  # where the last \boxed starts: read only where it is counted
    at = np.flatnonzero(boxed)
    before[at] = [t.rfind("\\boxed") for t in trained["response"].iloc[at].fillna("").tolist()]
    flags = pd.DataFrame({"unit": units.to_numpy(), "benchmark": trained["benchmark"].to_numpy(), "short": short,
                          "short_correct": short & correct, "multi": ~short, "multi_correct": ~short & correct,
                          "correct_boxed": boxed, "boxed_derived": boxed & (before >= box_chars)})
    by = flags.groupby(["unit", "benchmark"], sort=False)
    sums, sizes, seeds = by.sum(), by.size(), trained.groupby(["unit", "benchmark"], sort=False)["seed"].nunique()
    out = {}
    for key, row in zip(sums.index.tolist(), sums.to_dict("records")):
        out[key] = ({"n": int(sizes[key]), **{k: int(v) for k, v in row.items()}}, int(seeds[key]))
    return out


def _readout_row(label: str, unit: str, benchmark: str, counts: dict, seeds: int, scale: float) -> dict:
    ratio = lambda a, b: 100 * a / b if b else float("nan")  # noqa: E731
    return {"label": label, "unit": unit, "benchmark": benchmark, "n_seeds": seeds,
            "short_tokens": scaled_length(SHORT_TOKENS, scale), "box_chars": scaled_length(BOX_CHARS, scale),
            **counts, "short_share": ratio(counts["short"], counts["n"]),
            "short_accuracy": ratio(counts["short_correct"], counts["short"]),
            "multi_share": ratio(counts["multi"], counts["n"]),
            "multi_accuracy": ratio(counts["multi_correct"], counts["multi"]),
            "boxed_derived_share": ratio(counts["boxed_derived"], counts["correct_boxed"])}


_READOUT_COLUMNS = ("benchmark", "seed", "length", "correct", "has_box", "response")  # what a read-out row reads


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
                scale = scales.get(first["run_hash"].iloc[0], 1.0)
                counts = readout_counts(first[first["benchmark"] == b], scaled_length(SHORT_TOKENS, scale),
                                        scaled_length(BOX_CHARS, scale))
                rows.append(_readout_row(sweep.base_labels.get(key, BASE_LABEL), f"base:{key}", b, counts, 1, scale))
    trained = _trained_counts(sweep)
    benchmarks: dict = {}
    for unit, b in trained:
        benchmarks.setdefault(unit, []).append(b)
    has_scale = "length_scale" in sweep.runs.columns
    for unit in sweep.units():
        scale = float(sweep.rows("runs", unit=unit)["length_scale"].iloc[0]) if has_scale else 1.0
        for b in sorted(benchmarks.get(unit, []), key=benchmark_order):
            counts, seeds = trained[(unit, b)]
            rows.append(_readout_row(sweep.label(unit), unit, b, counts, seeds, scale))
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
    R = 1 sibling, and the mean longest common token prefix with an R = 1 sibling (the longest over the
    siblings, then the mean over the failed rollouts)."""
    rewards = rollouts["reward"].to_numpy(dtype=float)
    group = rollouts.groupby(["step", "question_id"], sort=False, dropna=False).ngroup().to_numpy() if len(rollouts) else \
        np.zeros(0, dtype=np.int64)
    return _surface(rewards, rollouts["head_text"].to_numpy(dtype=object), rollouts["tokens"].to_numpy(dtype=object),
                    group, _mixed(rewards, group))


def _mixed(rewards: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Whether each rollout's group (numbered 0..G-1) is active: its rewards are not all equal."""
    if not len(group):
        return np.zeros(0, dtype=bool)
    low, high = np.full(group.max() + 1, np.inf), np.full(group.max() + 1, -np.inf)
    np.minimum.at(low, group, rewards)
    np.maximum.at(high, group, rewards)
    return low[group] != high[group]


def _surface(rewards: np.ndarray, heads: np.ndarray, tokens: np.ndarray, group: np.ndarray,
             active: np.ndarray) -> dict:
    """`surface_divergence` of one run's rollouts given as arrays (one item per rollout): reward, head_text,
    tokens, its (step, question_id) group's number and whether that group is active. Vectorised over the
    run (a loop over groups, losers and winners in Python was most of the table's time): the failed (R = 0)
    and winning (R = 1) rollouts of the active groups, every (failed, winner) pair of a group, their
    common prefixes from one padded token matrix. Only counts and a mean of whole numbers come out, so
    no order of summation can change them."""
    losers = np.flatnonzero(active & (rewards == 0))
    winners = np.flatnonzero(active & (rewards == 1))
    winners = winners[np.argsort(group[winners], kind="stable")]  # by group
    # a failed rollout shares an equation with some winner of its group = with the union of theirs
    union: dict = {}
    for w, g in zip(winners.tolist(), group[winners].tolist()):
        union.setdefault(g, set()).update(equations(heads[w]))
    shared = sum(bool(equations(heads[i]) & union.get(g, frozenset()))
                 for i, g in zip(losers.tolist(), group[losers].tolist()))
    failed = len(losers)
    # every (failed, winner) pair of a group; each failed rollout's longest prefix over its winners
    first = np.searchsorted(group[winners], group[losers], "left")
    count = np.searchsorted(group[winners], group[losers], "right") - first
    first, count, losers = first[count > 0], count[count > 0], losers[count > 0]
    prefixes = np.zeros(0, dtype=np.int64)
    if len(losers):
        starts = np.cumsum(count) - count
        pair_loser = np.repeat(losers, count)
        pair_winner = winners[np.repeat(first, count) + np.arange(count.sum()) - np.repeat(starts, count)]
        lcp = _common_prefixes(tokens, pair_loser, pair_winner)
        prefixes = np.maximum.reduceat(lcp, starts)
    return {"failed_active": failed, "shared_equation": shared,
            "shared_share": 100 * shared / failed if failed else float("nan"),
            "mean_lcp": float(np.mean(prefixes)) if len(prefixes) else float("nan")}


_PAIR_CELLS = 1 << 24  # token comparisons per block of pairs: bounds the (pairs, width) matrix


def _common_prefixes(tokens: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`common_prefix(tokens[a[j]], tokens[b[j]])` for every j, from the rows' int64 ids padded into one
    matrix: the first position where two padded rows differ, capped at the shorter row's length."""
    rows = np.union1d(a, b)
    ids = [np.ascontiguousarray(tokens[i], dtype=np.int64).ravel() for i in rows.tolist()]
    lengths = np.array([len(t) for t in ids], dtype=np.int64)
    width = int(lengths.max())
    matrix = np.full((len(rows), width), -1, dtype=np.int64)
    if width:
        flat = np.concatenate(ids)
        at = np.repeat(np.arange(len(rows)), lengths)
        matrix[at, np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = flat
    a, b = np.searchsorted(rows, a), np.searchsorted(rows, b)
    shorter = np.minimum(lengths[a], lengths[b])
    if not width:
        return shorter
    out = np.empty(len(a), dtype=np.int64)
    block = max(1, _PAIR_CELLS // width)
    for lo in range(0, len(a), block):
        same = matrix[a[lo:lo + block]] == matrix[b[lo:lo + block]]
        out[lo:lo + block] = np.where(same.all(axis=1), width, same.argmin(axis=1))
    return np.minimum(out, shorter)


_NOT_RECORDED = {"failed_active": 0, "shared_equation": 0, "shared_share": float("nan"), "mean_lcp": float("nan")}


def run_diagnostics(steps: pd.DataFrame, rollouts: pd.DataFrame) -> dict:
    """§3.1 / §3.2 / §3.3 figures of one run from its step and rollout ledgers."""
    rewards = [[float(x) for x in r] for r in steps["rewards"]]  # one list per step (their order counts for nothing)
    correct = list(steps["correct"]) if "correct" in steps.columns else None
    groups = group_counts(rewards, correct)
    have = bool({"tokens", "head_text"} <= set(rollouts.columns) and len(rollouts))
    empty = not len(rollouts)
    return _diagnostics(len(rewards), groups, steps["gen_tokens"].to_numpy(),
                        np.zeros(0, dtype=np.int64) if empty else rollouts["step"].to_numpy(),
                        np.zeros(0) if empty else rollouts["length"].to_numpy(),
                        lambda: surface_divergence(rollouts) if have else _NOT_RECORDED)


BY_REWARD, BY_CORRECTNESS = "reward", "correctness"


def group_counts(rewards: list[list[float]], correct: list | None) -> dict:
    """{"all_zero", "all_one", "homogeneous", "groups_by"} of one run's steps, as Table 2A counts activity:
    a homogeneous group's rewards are all equal (zero variance). With rewards that are all 0 or 1 (the paper's)
    the all-0 / all-1 groups are by reward, as the paper counts them (and are then exactly the homogeneous
    ones); with other rewards (a length penalty, a KL penalty) they are the all-wrong / all-right groups, by
    each rollout's correctness (`groups_by` says which)."""
    binary = all(x in (0.0, 1.0) for r in rewards for x in r)
    homogeneous = sum(bool(r) and len(set(r)) == 1 for r in rewards)
    if binary or correct is None:
        return {"all_zero": sum(bool(r) and max(r) == 0 for r in rewards),
                "all_one": sum(bool(r) and min(r) == 1 for r in rewards), "homogeneous": homogeneous,
                "groups_by": BY_REWARD}
    verdicts = [[bool(x) for x in c] for c in correct]
    return {"all_zero": sum(bool(c) and not any(c) for c in verdicts),
            "all_one": sum(bool(c) and all(c) for c in verdicts), "homogeneous": homogeneous,
            "groups_by": BY_CORRECTNESS}


def _diagnostics(n_steps: int, groups: dict, gen_tokens: np.ndarray, steps: np.ndarray,
                 lengths: np.ndarray, surface) -> dict:
    """`run_diagnostics` from one run's numbers of steps and its group counts (`group_counts`), its steps'
    `gen_tokens`, its rollouts' `step` and `length` (arrays), and `surface()` giving its §3.3 figures."""
    first = np.unique(steps)[:EARLY_STEPS]
    early = lengths[np.isin(steps, first)]  # the one column read: no text is cut
    out = {"steps": n_steps, "all_zero": groups["all_zero"], "all_one": groups["all_one"],
           "groups_by": groups["groups_by"],
           "homogeneous_share": 100 * groups["homogeneous"] / n_steps if n_steps else float("nan"),
           "early_10_mean_tokens": _mean(early) if len(early) else float("nan"),
           "total_tokens": int(np.nansum(gen_tokens))}  # pandas' sum (NaN skipped), exact on whole numbers
    return {**out, **surface()}


def _mean(values: np.ndarray) -> float:
    """pandas' mean of a column (`Series(values).mean()`): for whole numbers the float64 sum over the count."""
    if values.dtype.kind in "iu":
        return float(values.sum(dtype=np.float64) / np.float64(len(values)))
    return float(pd.Series(values).mean())


def _homogeneous(rewards: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(all 0, all 1) of each step's rewards (each an array or list), from one concatenation; None where a
    reward is NaN (Python's max and min then depend on the order: `run_diagnostics` decides those)."""
    sizes = np.fromiter((len(r) for r in rewards), dtype=np.int64, count=len(rewards))
    if not sizes.sum():
        return np.zeros(len(rewards), dtype=bool), np.zeros(len(rewards), dtype=bool)
    flat = np.concatenate([np.asarray(r, dtype=float).ravel() for r in rewards])
    if np.isnan(flat).any():
        return None
    full = sizes > 0
    starts = (np.cumsum(sizes) - sizes)[full]
    all0, all1 = np.zeros(len(rewards), dtype=bool), np.zeros(len(rewards), dtype=bool)
    all0[full] = np.maximum.reduceat(flat, starts) == 0
    all1[full] = np.minimum.reduceat(flat, starts) == 1
    return all0, all1


def _binary(rewards: np.ndarray) -> np.ndarray | None:
    """Per step: every reward is 0 or 1 (None where a reward is NaN)."""
    sizes = np.fromiter((len(r) for r in rewards), dtype=np.int64, count=len(rewards))
    out = np.ones(len(rewards), dtype=bool)
    if not sizes.sum():
        return out
    flat = np.concatenate([np.asarray(r, dtype=float).ravel() for r in rewards])
    if np.isnan(flat).any():
        return None
    full = sizes > 0
    starts = (np.cumsum(sizes) - sizes)[full]
    out[full] = ~np.maximum.reduceat((flat != 0) & (flat != 1), starts)
    return out


def build_baseline_runs(sweep: Sweep) -> Table:
    title = "§3 diagnostics per run: early lengths, homogeneous groups, surface-token divergence in active groups"
    if not len(sweep.steps) or not len(sweep.rollouts):
        return Table.unbuilt("baseline_runs", title, "the sweep has no step and rollout ledgers")
    # Each column read here is taken out of its frame once, as an array (groups and their activity for the
    # whole sweep at once), and each run's part of it by the run's row positions: no frame is cut per run
    # (the pandas work of cutting 1,024 runs' frames was most of this table's time).
    steps, rollouts = sweep.steps, sweep.rollouts
    step_rows = steps.groupby("run_hash", sort=False).indices
    rollout_rows = rollouts.groupby("run_hash", sort=False).indices
    rewards, gen_tokens = steps["rewards"].to_numpy(dtype=object), steps["gen_tokens"].to_numpy()
    homogeneous = _homogeneous(rewards)
    binary = _binary(rewards)
    correct = steps["correct"].to_numpy(dtype=object) if "correct" in steps.columns else None
    r_steps, lengths = rollouts["step"].to_numpy(), rollouts["length"].to_numpy()
    has_tokens = "tokens" in rollouts.columns
    surface_columns = None
    if {"tokens", "head_text"} <= set(rollouts.columns):  # _surface's arguments
        reward = rollouts["reward"].to_numpy(dtype=float)
        group = rollouts.groupby(["run_hash", "step", "question_id"], sort=False, dropna=False).ngroup().to_numpy()
        surface_columns = [reward, rollouts["head_text"].to_numpy(dtype=object),
                           rollouts["tokens"].to_numpy(dtype=object), group, _mixed(reward, group)]
    none = np.zeros(0, dtype=np.int64)
    runs, rows = sweep.runs, []
    for label, unit, seed, run_dir, run_hash in zip(runs["label"], runs["unit"], runs["seed"], runs["run_dir"],
                                                     runs["run_hash"]):
        mine, theirs = step_rows.get(run_hash, none), rollout_rows.get(run_hash, none)
        if not len(mine):
            continue
        if homogeneous is None or binary is None or not binary[mine].all():  # NaN, or rewards not all 0 / 1
            groups = group_counts([[float(x) for x in r] for r in rewards[mine]],
                                  list(correct[mine]) if correct is not None else None)
        else:  # the paper's 0 / 1 rewards: all-0 and all-1 are the homogeneous groups
            all0, all1 = int(homogeneous[0][mine].sum()), int(homogeneous[1][mine].sum())
            groups = {"all_zero": all0, "all_one": all1, "homogeneous": all0 + all1, "groups_by": BY_REWARD}
        surface = (lambda: _NOT_RECORDED) if surface_columns is None or not len(theirs) else \
            (lambda: _surface(*(column[theirs] for column in surface_columns)))
        rows.append({"label": label, "unit": unit, "seed": int(seed), "run_dir": sweep.relative(run_dir),
                     "has_tokens": has_tokens,
                     **_diagnostics(len(mine), groups, gen_tokens[mine], r_steps[theirs], lengths[theirs],
                                    surface)})
    if not rows:
        return Table.unbuilt("baseline_runs", title, "no run has a step ledger")
    by = [r.pop("groups_by") for r in rows]  # said in the display and a note, no column: the paper's table as it was
    frame = pd.DataFrame(rows)
    display = pd.DataFrame([{
        "Run": f"{r['label']} seed {r['seed']}",
        "Early-10 mean tokens": num(r["early_10_mean_tokens"], 1),
        "All-0 / all-1 groups": f"{r['all_zero']} / {r['all_one']} of {r['steps']}"
                                + (" (all wrong / all right)" if groups_by == BY_CORRECTNESS else ""),
        "Homogeneous": f"{num(r['homogeneous_share'], 1)}%",
        "Total tokens": f"{r['total_tokens']:,}",
        "R=0 sharing an equation with R=1": (f"{r['shared_equation']}/{r['failed_active']} ({num(r['shared_share'], 2)}%)"
                                             if r["has_tokens"] else "not recorded"),
        "Mean LCP with R=1 (tokens)": num(r["mean_lcp"], 1) if r["has_tokens"] else "not recorded",
    } for (_, r), groups_by in zip(frame.iterrows(), by)])
    if BY_CORRECTNESS in by:
        notes = ["homogeneous: all rewards equal (zero variance, as Table 2A counts activity); where a run's rewards "
                 "are not all 0 or 1, its all-0 / all-1 counts are its all-wrong / all-right groups by correctness"]
    else:
        notes = []
    return Table("baseline_runs", title, frame, display, notes=[*notes,
        "groups are steps' reward vectors; total tokens are generated tokens; equations from each rollout's first "
        "160 tokens (scaled), regex analysis.diagnostics.EQUATION_CHAIN; LCP: longest exact common token prefix with "
        "any R=1 sibling, averaged over the R=0 rollouts of active groups"])

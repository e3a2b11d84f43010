"""Table 4 (seed paper §5.5): k = 3 voting across seeds (greedy) and within one checkpoint (sampled).

Cross-seed rows: per arm and benchmark the candidates of an item are the arm's trained greedy
responses, one per seed in the paper's order (42, 101, 7; candidate 0 is seed 42). Single-seed rows:
per sampled read-out (`eval=sampled_k3`, T = 0.6) of one checkpoint and benchmark, the candidates are
its draws 0, 1, 2. Reported: Mean@1, Rand-, MaxLen- and MDL-Maj@k (with MDL's fallback count `fb`),
MDL - MaxLen with a paired question bootstrap CI, Oracle Pass@k, the test tokens of the k responses
and the Out TFLOPs of training the k checkpoints (1 for a sampled row: the run that trained it).
A response that hit the read-out cap without a `\\boxed` answer counts as an empty answer (the
paper's e_i = ""), whatever number the fallback extracted. The cap is the run's read-out cap and
MDL's lower bound 15 tokens is scaled like every paper length (`rlvr_sweep.config.scaled_length`).
`summarize_votes` is the reusable part: sampled and forked read-outs vote through it too.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlvr_sweep.analysis.candidates import candidate
from rlvr_sweep.analysis.checkpoints import MDL_MIN_LEN, readouts_of
from rlvr_sweep.analysis.render import Table, ci_text, num
from rlvr_sweep.analysis.source import BENCHMARK_NAMES, Sweep, grade_rows
from rlvr_sweep.analysis.stats import bootstrap_ci
from rlvr_sweep.analysis.table1 import run_proxies
from rlvr_sweep.analysis.voting import Candidate, vote_detail, vote_details
from rlvr_sweep.config import scaled_length

SAMPLED = "sampled_k3"


def summarize_votes(items: list[list[Candidate]], cap: int, min_len: int, n_resamples: int = 4000,
                    seed: int = 0) -> dict:
    """The voting columns of Table 4 over items (each a list of k candidates), accuracies in %."""
    k = len(items[0])
    rules = ("rand", "maxlen", "mdl")
    per_item = [vote_details(c, rules, cap, min_len) for c in items]
    votes = {rule: [v[rule] for v in per_item] for rule in rules}
    value = {rule: np.array([v.value for v in vs]) for rule, vs in votes.items()}
    correct = np.array([[float(c.correct) for c in cands] for cands in items])  # (items, k)
    diff = value["mdl"] - value["maxlen"]
    _, lo, hi = bootstrap_ci(diff, "question", n_resamples, seed)  # paired: the same items for both rules
    return {"k": k, "n_items": len(items), "mean1": 100 * correct.mean(), "rand": 100 * value["rand"].mean(),
            "maxlen": 100 * value["maxlen"].mean(), "mdl": 100 * value["mdl"].mean(),
            "fb": int(sum(v.fallback for v in votes["mdl"])), "mdl_minus_maxlen": 100 * diff.mean(),
            "diff_lo": 100 * lo, "diff_hi": 100 * hi, "oracle": 100 * correct.max(axis=1).mean(),
            "test_tokens": int(sum(c.length for cands in items for c in cands))}


def item_candidates(rows: pd.DataFrame, seeds: list, with_ids: bool = False):
    """One candidate list per item every seed answered, in the items' order and the given seed order
    (and the item ids, with `with_ids`)."""
    return _item_candidates(_candidate_lists(rows), seeds, with_ids)


def _candidate_lists(rows: pd.DataFrame) -> list[list]:
    """The columns `item_candidates` reads, as lists (not a pandas walk per cell): seed, item_id, index,
    the answer (empty for a capped response without a box), length, correct."""
    answers = rows["extracted"].where(~rows["capped_unboxed"].astype(bool), "")
    return [c.tolist() for c in (rows["seed"], rows["item_id"], rows["index"], answers, rows["length"], rows["correct"])]


def _item_candidates(columns: list[list], seeds: list, with_ids: bool = False):
    by: dict = {}  # seed -> {item_id: (index, Candidate)}
    for s, i, index, answer, length, correct in zip(*columns):
        by.setdefault(s, {})[i] = (index, Candidate(answer or "", int(length), float(correct)))
    first = by[seeds[0]]
    order = sorted(first, key=lambda i: first[i][0])
    common = [i for i in order if all(i in by[s] for s in seeds)]
    items = [[by[s][i][1] for s in seeds] for i in common]
    return (common, items) if with_ids else items


def sampled_items(rows: pd.DataFrame, with_ids: bool = False):
    """One candidate list per item (draws in order) of one sampled read-out and benchmark."""
    ids, items = [], []
    for _, item in rows.sort_values(["index", "draw"]).groupby("index", sort=True):
        ids.append(item["item_id"].iloc[0])
        items.append([candidate(r) for _, r in item.iterrows()])
    return (ids, items) if with_ids else items


def cross_vs_sampled_rows(sweep: Sweep, cross: list[dict], n_resamples: int, seed: int) -> list[dict]:
    """§5.5's second observation: an arm's cross-seed greedy MDL-Maj@k against the mean of its sampled
    checkpoints' MDL-Maj@k (each sampled read-out of a checkpoint the arm trained), per item, with a
    paired question-bootstrap CI; on the items every read-out answered."""
    sampled = [r for r in readouts_of(sweep, SAMPLED) if r.train_run is not None]
    out = []
    for row in cross:
        mine = [r for r in sampled if r.train_run["unit"] == row["unit"] and row["benchmark"] in r.benchmarks()]
        if not mine:
            continue
        ids, items = item_candidates(grade_rows(sweep, row["unit"], row["benchmark"]), row["seeds"], with_ids=True)
        per = [dict(zip(*_mdl_values(*sampled_items(r.of(row["benchmark"]), with_ids=True), r.cap, r.min_len)))
               for r in mine]
        greedy = dict(zip(ids, (vote_detail(c, "mdl", row["cap"], row["min_len"]).value for c in items)))
        common = [i for i in ids if all(i in p for p in per)]
        if not common:
            continue
        diff = np.array([greedy[i] - np.mean([p[i] for p in per]) for i in common])
        _, lo, hi = bootstrap_ci(diff, "question", n_resamples, seed)
        out.append({"mode": "cross_minus_sampled", "label": row["label"], "unit": row["unit"], "phase": "trained",
                    "benchmark": row["benchmark"], "seeds": row["seeds"], "n_items": len(common),
                    "sampled_seeds": [r.seed for r in mine], "cap": row["cap"], "min_len": row["min_len"],
                    "mdl": 100 * float(np.mean([greedy[i] for i in common])),
                    "sampled_mdl": 100 * float(np.mean([np.mean([p[i] for p in per]) for i in common])),
                    "cross_minus_sampled": 100 * float(diff.mean()), "diff_lo": 100 * lo, "diff_hi": 100 * hi,
                    "n_resamples": n_resamples, "boot_seed": seed})
    return out


def _mdl_values(ids, items, cap: int, min_len: int):
    return ids, [vote_detail(c, "mdl", cap, min_len).value for c in items]


def sampled_rows(sweep: Sweep, n_resamples: int, seed: int) -> list[dict]:
    """Table 4's single-seed sampled rows, one per sampled read-out and benchmark."""
    rows = []
    for r in readouts_of(sweep, SAMPLED):
        run = r.train_run
        train = run_proxies(run)["out"] if run is not None and pd.notna(run.get("params")) and \
            "totals.gen_tokens" in run.index else np.nan
        temperature = r.rows["temperature"].iloc[0] if "temperature" in r.rows else np.nan
        for b in r.benchmarks():
            items = sampled_items(r.of(b))
            if not items:
                continue
            rows.append({"mode": "sampled", "label": r.label, "unit": r.key, "phase": r.phase, "benchmark": b,
                         "seeds": [r.seed], "sample_seed": int(r.of(b)["sample_seed"].iloc[0]),
                         "temperature": float(temperature), "cap": r.cap, "min_len": r.min_len,
                         "train_tflops_out": train, "n_resamples": n_resamples, "boot_seed": seed,
                         **summarize_votes(items, r.cap, r.min_len, n_resamples, seed)})
    return rows


_RUN_COLUMNS = ("seed", "eval_max_new_tokens", "length_scale", "params", "totals.gen_tokens", "totals.prefill_tokens",
                "totals.padded_prefill_tokens", "totals.untrimmed_steps", "totals.bwd_out_tokens",
                "totals.bwd_full_tokens")  # what a cross-seed row reads of its runs (run_proxies)


def build_table4(sweep: Sweep, n_resamples: int = 4000, seed: int = 0) -> Table:
    title = "Table 4: k = 3 voting, cross-seed greedy and single-seed sampled; MDL vs MaxLen, Oracle Pass@k (§5.5)"
    rows = []
    # Each arm's runs and candidates are taken from lists made once for the whole sweep (an arm's grade
    # rows are its positions in them): cutting each arm's frames was most of this table's time.
    runs_of: dict = {}
    if len(sweep.runs):
        have = [c for c in _RUN_COLUMNS if c in sweep.runs.columns]
        for unit, run in zip(sweep.runs["unit"].tolist(), sweep.runs[have].to_dict("records")):
            runs_of.setdefault(unit, []).append(run)
    seeds_of = sweep.grades["seed"].tolist() if len(sweep.grades) else []
    columns = None  # _candidate_lists of every grade row, made when first needed
    for unit in sweep.units():
        runs = runs_of[unit]
        for b in sweep.benchmarks():
            at = sweep.positions("grades", unit=unit, benchmark=b, phase="trained").tolist()
            answered = {seeds_of[i] for i in at}
            seeds = [r["seed"] for r in runs if r["seed"] in answered]
            if len(seeds) < 2:
                continue
            used = [r for r in runs if r["seed"] in seeds]
            if any(pd.isna(r["eval_max_new_tokens"]) for r in used):
                continue  # MDL's window needs the read-out cap the run recorded
            cap = int(min(r["eval_max_new_tokens"] for r in used))
            min_len = scaled_length(MDL_MIN_LEN, float(used[0]["length_scale"]))
            columns = _candidate_lists(sweep.grades) if columns is None else columns
            items = _item_candidates([[column[i] for i in at] for column in columns], seeds)
            if not items:
                continue
            train = sum(run_proxies(r)["out"] for r in used) if all(pd.notna(r["params"]) for r in used) else np.nan
            rows.append({"mode": "cross_seed", "label": sweep.label(unit), "unit": unit, "phase": "trained",
                         "benchmark": b, "seeds": list(seeds), "cap": cap,
                         "min_len": min_len, "train_tflops_out": train, "n_resamples": n_resamples, "boot_seed": seed,
                         **summarize_votes(items, cap, min_len, n_resamples, seed)})
    cross = list(rows)
    rows += sampled_rows(sweep, n_resamples, seed)
    rows += cross_vs_sampled_rows(sweep, cross, n_resamples, seed)
    if not rows:
        return Table.unbuilt("table4", title, "no arm has trained read-outs from two or more seeds, and no "
                                              "checkpoint has a sampled read-out (eval=sampled_k3)")
    frame = pd.DataFrame(rows)
    return Table("table4", title, frame, _display(frame),
                 notes=[f"MDL window {int(frame['min_len'].iloc[0])} <= L < cap (15 and 2048 paper tokens, scaled); "
                        "CI: paired question bootstrap, nominal, conditional on the checkpoints"])


def _display(frame: pd.DataFrame) -> pd.DataFrame:
    out = []
    for _, r in frame.iterrows():
        if r["mode"] == "cross_minus_sampled":
            seeds = "/".join(str(s) for s in r["sampled_seeds"])
            out.append({"Evaluation mode (train cost, test tokens)": (
                f"Cross-seed {r['label']} MDL-Maj@k - mean of its {len(r['sampled_seeds'])} sampled MDL-Maj@k "
                f"(seeds {seeds}): {num(r['mdl'])} vs {num(r['sampled_mdl'])}"),
                "Benchmark (N)": f"{BENCHMARK_NAMES.get(r['benchmark'], r['benchmark'])} ({int(r['n_items'])})",
                "MDL - MaxLen (95% CI)": (f"{num(r['cross_minus_sampled'], 2, True)} "
                                          f"({ci_text(r['diff_lo'], r['diff_hi'])}) [cross - sampled]")})
            continue
        k = int(r["k"])  # the number of seeds voting (3 in the paper), or of draws
        cost = num(r["train_tflops_out"], 3 if r["train_tflops_out"] < 1 else 1)
        if r["mode"] == "sampled":
            mode = (f"Single-seed {r['label']} (T={r['temperature']:g}, {k} draws, seed {int(r['sample_seed'])}; "
                    f"1x ckpt = {cost} TFLOPs, "
                    f"TestTok = {num(r['test_tokens'] / 1e3, 1)}k)")
        else:
            mode = (f"Cross-seed {r['label']} ({'/'.join(str(s) for s in r['seeds'])}; T=0; {k}x ckpt = {cost} "
                    f"TFLOPs, TestTok = {num(r['test_tokens'] / 1e3, 1)}k)")
        out.append({
            "Evaluation mode (train cost, test tokens)": mode,
            "Benchmark (N)": f"{BENCHMARK_NAMES.get(r['benchmark'], r['benchmark'])} ({r['n_items']})",
            "Mean@1": num(r["mean1"]), "Rand-Maj@k": num(r["rand"]), "MaxLen-Maj@k": num(r["maxlen"]),
            "MDL-Maj@k (fb)": f"{num(r['mdl'])} ({r['fb']})",
            "MDL - MaxLen (95% CI)": f"{num(r['mdl_minus_maxlen'], 2, True)} ({ci_text(r['diff_lo'], r['diff_hi'])})",
            "Oracle Pass@k": num(r["oracle"]),
        })
    return pd.DataFrame(out)

"""PASS 3, ledger laws: every stored pair obeys the token conservation laws, and step and run token
totals reconstruct from the rollout and pair ledgers (paper §4.2 "Executed Pair Breakdown", §5.1, §7).

Per pair (Cap = the run's rollout horizon, `horizon_tokens`):
  stage1_leaf_tokens + stage2_generated = l0 + l1;  0 <= l_b - pl_b <= Cap - pl_b;
  flat / flat_warmup / tau_zero: tau = pl0 = pl1 = 0;  causal_non_eos and midpoint splits: pl0 = pl1 = tau > 0;
  terminal_dup: pl0 = pl1 = tau = l0 = l1, no stage-2 token, r0 = r1 (one absorbing leaf, duplicated);
  fork pairs (cf_first_gap, cf_min_margin; Arms 14-19): pl0 = pl1 = tau = t* > 0 and v1 != v0 (branch 1
  takes another token at t*); cf_no_fork: pl0 = pl1 = tau, and a finished root is one leaf duplicated;
  and the pair's (pl, l, r) equal its two rollouts' rows.
Per step: leaf tokens = sum of rollout lengths = sum over pairs of l0 + l1; the stored rewards are the
rollouts' in order; `active` means the rewards differ (less each rollout's KL penalty, `kl_penalty`, where the
run took one), except on a counterfactual fork step, whose
`cf_status` decides it (active iff "active"; "homogeneous" iff the raw rewards are all equal; the
gates themselves are replayed in PASS 4); untrimmed >= generated, padded >= unpadded prefill;
backward tokens: an update that ran a backward counts the leaf tokens (bwd_out) and leaf + prompt
tokens (bwd_full) of every question it backpropagated (active ones, or all with full_backward), once per
pass of its objective (run.json `objective_passes`, 1 when absent: the paper's), others 0; a question that
dynamic sampling filtered out (action "filtered") joins no update.
Per run: run.json `totals` equal the sums of the steps ledger.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlvr_sweep.config.categories import CATEGORIES, CF_CATEGORIES
from rlvr_sweep.store import RUN_KEYS

STEP_KEY = [*RUN_KEYS, "step"]
TOTALS = ("gen_tokens", "prefill_tokens", "padded_prefill_tokens", "untrimmed_steps", "bwd_out_tokens",
          "bwd_full_tokens", "seconds")


def credited(rewards, penalty) -> list[float]:
    """The rewards a step's credit saw: its rewards, less each rollout's KL penalty where the run took one
    (`objective.kl_in=reward`), in float32 as the run subtracted them; None when the penalty is not one number
    per rollout (a crafted or damaged row)."""
    if penalty is None or (isinstance(penalty, float) and np.isnan(penalty)):
        return list(map(float, rewards))
    try:
        r, k = np.asarray(rewards, dtype=np.float32), np.asarray(penalty, dtype=np.float32)
    except (TypeError, ValueError):
        return None
    return (r - k).tolist() if r.shape == k.shape else None


def _where(frame: pd.DataFrame, mask, law: str, limit: int = 5) -> list[str]:
    if not np.asarray(mask, dtype=bool).any():
        return []  # the law holds (the usual case): no rows to cut out
    bad = frame[mask]
    out = [f"{r.arm} h{r.horizon} seed {r.seed} step {r.step}"
           + (f" k {r.k} ({r.category})" if "k" in frame.columns and "category" in frame.columns else "")
           + f": {law}" for r in bad.head(limit).itertuples(index=False)]
    if len(bad) > limit:
        out.append(f"... {len(bad) - limit} more: {law}")
    return out


def pair_problems(pairs: pd.DataFrame, rollouts: pd.DataFrame, runs: pd.DataFrame) -> tuple[int, list[str]]:
    """(pairs checked, problems) for every stored pair row."""
    if not len(pairs):
        return 0, []
    p = pairs.merge(runs[[*RUN_KEYS, "horizon_tokens"]], on=list(RUN_KEYS), how="inner")
    cap, cat = p["horizon_tokens"], p["category"]
    zero = cat.isin(["flat", "flat_warmup", "tau_zero"])
    split = cat.isin(["causal_non_eos", "midpoint_fallback", "early_eos_gt104"])
    dup = cat == "terminal_dup"
    fork = cat.isin(["cf_first_gap", "cf_min_margin"])
    no_fork = cat == "cf_no_fork"
    in_bounds = ((0 <= p["pl0"]) & (p["pl0"] <= p["l0"]) & (p["l0"] <= cap)
                 & (0 <= p["pl1"]) & (p["pl1"] <= p["l1"]) & (p["l1"] <= cap))
    one_leaf = ((p["pl0"] == p["tau"]) & (p["pl1"] == p["tau"]) & (p["l0"] == p["tau"]) & (p["l1"] == p["tau"])
                & (p["stage2_generated"] == 0) & (p["r0"] == p["r1"]))
    valid = [*CATEGORIES, *CF_CATEGORIES]
    laws = [
        (~cat.isin(valid), f"unknown category (valid: {valid})"),
        (p["stage1_leaf_tokens"] + p["stage2_generated"] != p["l0"] + p["l1"], "stage1 + stage2 != l0 + l1"),
        (~in_bounds, "0 <= L - pl <= Cap - pl fails"),
        (zero & ((p["tau"] != 0) | (p["pl0"] != 0) | (p["pl1"] != 0)), "no shared prefix, yet pl or tau != 0"),
        (split & ((p["tau"] <= 0) | (p["pl0"] != p["tau"]) | (p["pl1"] != p["tau"])),
         "shared-prefix pair: pl0 = pl1 = tau > 0 fails"),
        (dup & ~one_leaf, "terminal_dup is not one finished leaf duplicated"),
    ]
    if fork.any() or no_fork.any():
        t_star, v0, v1 = (p[c] if c in p.columns else pd.Series(np.nan, index=p.index) for c in ("t_star", "v0", "v1"))
        laws += [
            (fork & ((p["tau"] <= 0) | (p["pl0"] != p["tau"]) | (p["pl1"] != p["tau"]) | (t_star != p["tau"])),
             "fork pair: pl0 = pl1 = tau = t* > 0 fails"),
            (fork & (v0 == v1), "fork pair: branch 1's token v1 equals the root's v0"),
            (no_fork & ((p["pl0"] != p["tau"]) | (p["pl1"] != p["tau"])), "cf_no_fork: pl0 = pl1 = tau fails"),
            (no_fork & (p["l0"] == p["tau"]) & (p["l1"] == p["tau"]) & ~one_leaf,
             "cf_no_fork with a finished root is not one leaf duplicated"),
        ]
    problems = [msg for mask, law in laws for msg in _where(p, mask, law)]
    if len(rollouts):  # the pair's two leaves are rows of the rollout table
        ro = rollouts[[*STEP_KEY, "k", "b", "prefix_len", "length", "reward"]]
        for b in (0, 1):
            m = p.merge(ro[ro["b"] == b], on=[*STEP_KEY, "k"], how="left")
            bad = m["length"].isna() | (m["length"] != m[f"l{b}"]) | (m["prefix_len"] != m[f"pl{b}"]) | (m["reward"] != m[f"r{b}"])
            problems += _where(m, bad, f"leaf b={b} differs from its rollout row (length, prefix_len or reward)")
    return len(p), problems


def _rewards_by_step(rollouts: pd.DataFrame) -> pd.Series:
    """Each step's rollout rewards in rollout-index order, as a tuple (indexed by the step's keys)."""
    ro = rollouts[[*STEP_KEY, "index", "reward"]].sort_values([*STEP_KEY, "index"], kind="stable")
    by: dict = {}
    for key, reward in zip(zip(*(ro[c].tolist() for c in STEP_KEY)), ro["reward"].tolist()):
        by.setdefault(key, []).append(reward)
    index = pd.MultiIndex.from_tuples(list(by), names=STEP_KEY)
    return pd.Series([tuple(v) for v in by.values()], index=index, name="ro_rewards", dtype=object)


def _passes(run) -> int:
    """The passes over each update's rollouts a run's objective made (run.json `objective_passes`; 1 before it)."""
    value = run.get("objective_passes") if hasattr(run, "get") else None
    return int(value) if isinstance(value, (int, float, np.integer)) and not pd.isna(value) and value >= 1 else 1


def _expected_backward(steps: pd.DataFrame, optimizer_step: str | None, passes: int = 1) -> pd.DataFrame:
    """Per step, the backward tokens its update should have counted (on the update's step, 0 elsewhere)."""
    s = steps.sort_values("step")
    n_leaves = s["rewards"].map(len)
    counted = (s["active"].astype(bool) | (optimizer_step == "full_backward")) & (s["action"] != "filtered")
    out_tok = np.where(counted, s["leaf_tokens"], 0)
    full_tok = np.where(counted, s["leaf_tokens"] + s["prompt_tokens"] * n_leaves, 0)
    exp_out, exp_full, acc_out, acc_full = [], [], 0, 0
    for action, o, f in zip(s["action"], out_tok, full_tok):
        acc_out, acc_full = acc_out + o, acc_full + f  # questions pile up until the update that uses them
        if action in ("accumulated", "filtered"):
            exp_out.append(0)
            exp_full.append(0)
            continue
        ran = action == "backward_step"
        exp_out.append(acc_out * passes if ran else 0)
        exp_full.append(acc_full * passes if ran else 0)
        acc_out = acc_full = 0
    return s.assign(exp_out=exp_out, exp_full=exp_full)


def step_problems(steps: pd.DataFrame, rollouts: pd.DataFrame, pairs: pd.DataFrame,
                  runs: pd.DataFrame) -> tuple[dict, list[str]]:
    """({"steps", "runs"} checked, problems): step and run token totals against the ledgers."""
    problems = []
    if not len(steps):
        return {"steps": 0, "runs": 0}, problems
    s = steps.copy()
    leaf = rollouts.groupby(STEP_KEY)["length"].sum().rename("ro_len") if len(rollouts) else None
    rewards = _rewards_by_step(rollouts) if len(rollouts) else None
    if len(pairs):
        pair_sums = pairs.assign(pl_sum=pairs["l0"] + pairs["l1"],
                                 st_sum=pairs["stage1_leaf_tokens"] + pairs["stage2_generated"])
        pair_sums = pair_sums.groupby(STEP_KEY)[["pl_sum", "st_sum"]].sum()
        s = s.merge(pair_sums, left_on=STEP_KEY, right_index=True, how="left")
        problems += _where(s, s["pl_sum"] != s["leaf_tokens"], "leaf_tokens != sum over pairs of l0 + l1")
        problems += _where(s, s["st_sum"] != s["leaf_tokens"], "leaf_tokens != stage-1 + stage-2 leaf tokens")
    if leaf is not None:
        s = s.merge(leaf, left_on=STEP_KEY, right_index=True, how="left").merge(
            rewards, left_on=STEP_KEY, right_index=True, how="left")
        problems += _where(s, s["ro_len"] != s["leaf_tokens"], "leaf_tokens != sum of rollout lengths")
        same = [isinstance(r, tuple) and tuple(map(float, x)) == r for x, r in zip(s["rewards"], s["ro_rewards"])]
        problems += _where(s, ~np.array(same), "step rewards differ from its rollouts' rewards")
    seen = [credited(r, k) for r, k in zip(s["rewards"], s["kl_penalty"] if "kl_penalty" in s.columns
                                           else [None] * len(s))]
    unread = pd.Series([v is None for v in seen], index=s.index)
    problems += _where(s, unread, "kl_penalty is not one number per rollout")
    differ = pd.Series([v is not None and len(set(v)) > 1 for v in seen], index=s.index)
    status = s["cf_status"] if "cf_status" in s.columns else pd.Series(None, index=s.index, dtype=object)
    fork_step = status.notna()
    active = s["active"].astype(bool)
    problems += _where(s, ~fork_step & ~unread & (differ != active), "active disagrees with the rewards")
    problems += _where(s, fork_step & (active != (status == "active")), "active disagrees with cf_status")
    problems += _where(s, fork_step & (differ == (status == "homogeneous")),
                       "cf_status 'homogeneous' disagrees with the rewards")
    problems += _where(s, s["untrimmed_steps"] < s["gen_tokens"], "untrimmed steps < generated tokens")
    problems += _where(s, s["padded_prefill_tokens"] < s["prefill_tokens"], "padded prefill < prefill")
    of_run = s.groupby(list(RUN_KEYS), sort=False).indices  # each run's step rows, in ledger order
    narrow = [c for c in (*STEP_KEY, "k", "category", "rewards", "active", "leaf_tokens", "prompt_tokens", "action",
                          "bwd_out_tokens", "bwd_full_tokens") if c in s.columns]  # what the backward law reads
    clean = _clean_runs(s, runs)
    for _, run in runs.iterrows():
        key = tuple(run[k] for k in RUN_KEYS)
        rows = of_run.get(key)
        if rows is not None and (key, run.get("optimizer_step") or None) not in clean:
            problems += _run_problems(run, s.iloc[rows], narrow)
    return {"steps": len(s), "runs": len(runs)}, problems


def _run_problems(run, mine: pd.DataFrame, narrow: list[str]) -> list[str]:
    """One run's laws: its backward tokens (with an optimizer step), run.json totals against its steps."""
    problems = []
    if run.get("optimizer_step"):
        e = _expected_backward(mine[narrow], run["optimizer_step"], _passes(run))
        problems += _where(e, (e["exp_out"] != e["bwd_out_tokens"]) | (e["exp_full"] != e["bwd_full_tokens"]),
                           f"backward tokens differ from the leaves backpropagated ({run['optimizer_step']})")
    label = f"{run['arm']} h{run['horizon']} seed {run['seed']}"
    for column in TOTALS:
        stored, summed = run.get(f"totals.{column}"), mine[column].sum()
        if stored is None or not np.isclose(float(stored), float(summed), rtol=1e-9, atol=1e-9):
            problems.append(f"{label}: run.json totals.{column} = {stored}, the steps ledger sums to {summed}")
    for column, value in (("steps", len(mine)), ("active_steps", int(mine["active"].sum()))):
        if run.get(f"totals.{column}") != value:
            problems.append(f"{label}: run.json totals.{column} = {run.get(f'totals.{column}')}, ledger {value}")
    return problems


def _clean_runs(s: pd.DataFrame, runs: pd.DataFrame) -> set:
    """{(run key, optimizer_step or None)} of the runs whose laws in `_run_problems` all hold, found for every
    run at once (grouped sums and cumulative sums, no per-run frame): only the others are checked one by one,
    so every problem is still worded by `_run_problems`. Sums are held to a tenth of its tolerance here: a
    total near the edge is checked there."""
    if not len(runs):
        return set()
    key = list(RUN_KEYS)
    o = s.sort_values([*key, "step"], kind="stable")
    run_id = o.groupby(key, sort=False).ngroup()
    ends = ~o["action"].isin(["accumulated", "filtered"])
    segment = ends.groupby(run_id).shift(fill_value=False).astype(int).groupby(run_id).cumsum()
    active = o["active"].astype(bool)
    full = o["leaf_tokens"] + o["prompt_tokens"] * o["rewards"].map(len)
    ran = o["action"] == "backward_step"
    passes = pd.Series([_passes(r) for r in runs.to_dict("records")], dtype="int64",
                       index=pd.MultiIndex.from_frame(runs[key]) if len(key) > 1 else runs[key[0]])
    per_row = passes.reindex(pd.MultiIndex.from_frame(o[key])).fillna(1).to_numpy()
    bad = {}
    kept = o["action"] != "filtered"
    for opt, counted in ((None, active & kept), ("full_backward", kept)):
        out_tok = o["leaf_tokens"].where(counted, 0)
        full_tok = full.where(counted, 0)
        exp_out = out_tok.groupby([run_id, segment]).cumsum().where(ran, 0) * per_row
        exp_full = full_tok.groupby([run_id, segment]).cumsum().where(ran, 0) * per_row
        wrong = (exp_out != o["bwd_out_tokens"]) | (exp_full != o["bwd_full_tokens"])
        bad[opt] = wrong.groupby([o[k] for k in key], sort=False).any()
    sums = o.groupby(key, sort=False).agg(**{c: (c, "sum") for c in TOTALS}, steps=("step", "size"),
                                            active_steps=("active", "sum"))
    clean = set()
    for run in runs.to_dict("records"):
        k = tuple(run[c] for c in key)
        if k not in sums.index:
            continue
        opt = run.get("optimizer_step") or None
        if opt is not None and bad["full_backward" if opt == "full_backward" else None].get(k, True):
            continue
        total = sums.loc[k]
        stored = [run.get(f"totals.{c}") for c in TOTALS]
        if any(v is None or isinstance(v, str) for v in stored) or not all(
                np.isclose(float(v), float(total[c]), rtol=1e-10, atol=1e-10) for v, c in zip(stored, TOTALS)):
            continue
        if run.get("totals.steps") != int(total["steps"]) or run.get("totals.active_steps") != int(total["active_steps"]):
            continue
        clean.add((k, opt))
    return clean

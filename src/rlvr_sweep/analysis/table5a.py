"""Table 5A and the teacher-forced agreement behind it (seed paper §5.6 items 1-2), from probe folders.

Per probe (donor A -> recipient B, `python -m rlvr_sweep.evaluation probe`), over the discordant items
(A right, B wrong):
- `table5a_tf`: B teacher-forced along A's first min(160, |y_A|) tokens, per benchmark and overall:
  positions, agreement of B's argmax with A's token, the geometric-mean probability B gives A's tokens,
  B's mean top-1 minus top-2 margin on agreed and on mismatched positions (and their ratio), and how
  often A's token is B's top-2 at a mismatch;
- `table5a`: per condition (in the probe's order, then the derived rows) the mean cut K, the items B
  now answers correctly ("rescued") over all discordant items and over the prompt-only failures (the
  items `K0_none` does not rescue), and the per-benchmark breakdown "PromptFail (All)". Derived rows:
  the two-branch unions of the self forks and of their identity controls, the forks re-indexed
  chronologically (Early = the earlier of t_min1 / t_min2, Late = the later), and the self forks
  restricted to verified token changes (B's recorded token is its teacher-forced top-1 and the inserted
  top-2 differs from it), each against its identity control on the same items.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rlvr_sweep.analysis.checkpoints import run_label
from rlvr_sweep.analysis.render import Table, num
from rlvr_sweep.analysis.source import BENCHMARK_NAMES, Sweep, benchmark_order

FORK, CTRL = "Self_MinMargin_Top2_Rank{}", "Self_Identity_Ctrl_Rank{}"
HOW = "python -m rlvr_sweep.evaluation probe DONOR RECIPIENT --out DIR"


def _frac(k: int, n: int) -> str:
    return f"{k}/{n} ({num(100 * k / n, 1) if n else '—'}%)"


def probe_label(sweep: Sweep, probe) -> str:
    """"donor -> recipient", each named as the sweep names its run when the probe read a run's model."""
    a, b = probe.info["donor"], probe.info["recipient"]
    return f"{run_label(sweep, a.get('model_digest'), a['label'])} -> {run_label(sweep, b.get('model_digest'), b['label'])}"


def agreement_rows(probe, label: str, path: str) -> list[dict]:
    items, out = probe.items, []
    if not len(items):  # no discordant item: nothing was probed
        return []
    names = sorted(items["benchmark"].unique(), key=benchmark_order)
    for b in names + (["all"] if len(names) > 1 else []):
        part = items if b == "all" else items[items["benchmark"] == b]
        agree_m, miss_m, logp, top2_hits, positions = [], [], [], 0, 0
        for _, it in part.iterrows():
            span = int(it["span"])
            donor = list(it["donor_tokens"])[:span]
            for t in range(span):
                margin = float(it["tf_margins"][t])
                if int(it["tf_top1"][t]) == donor[t]:
                    agree_m.append(margin)
                else:
                    miss_m.append(margin)
                    top2_hits += int(it["tf_top2"][t]) == donor[t]
                logp.append(float(it["tf_logprob"][t]))
            positions += span
        mean = lambda v: float(np.mean(v)) if v else math.nan  # noqa: E731
        out.append({"probe": label, "path": path, "benchmark": b, "items": len(part),
                    "positions": positions, "agreed": len(agree_m), "mismatches": len(miss_m),
                    "agreement": 100 * len(agree_m) / positions if positions else math.nan,
                    "geo_mean_prob": 100 * math.exp(sum(logp) / positions) if positions else math.nan,
                    "margin_agreed": mean(agree_m), "margin_mismatch": mean(miss_m),
                    "margin_ratio": mean(agree_m) / mean(miss_m) if miss_m and mean(miss_m) else math.nan,
                    "donor_is_top2": top2_hits})
    return out


def build_table5a_tf(sweep: Sweep) -> Table:
    title = "Table 5A (teacher forcing): the recipient's argmax along the donor's first 160 tokens (§5.6 item 1)"
    rows = [r for p in sweep.probes for r in agreement_rows(p, probe_label(sweep, p), sweep.relative(p.path))]
    if not rows:
        return Table.unbuilt("table5a_tf", title, "no prefix-splice probe folder with discordant items under the "
                                                  f"root ({HOW})")
    frame = pd.DataFrame(rows)
    display = pd.DataFrame([{
        "Probe (donor -> recipient)": r["probe"], "Benchmark (items)": f"{_bench(r['benchmark'])} ({r['items']})",
        "Agreed / positions": _frac(r["agreed"], r["positions"]),
        "Geo-mean p(donor token)": f"{num(r['geo_mean_prob'])}%",
        "Margin agreed / mismatched (ratio)": (f"{num(r['margin_agreed'])} / {num(r['margin_mismatch'])} "
                                               f"({num(r['margin_ratio'], 1)}x)"),
        "Donor token is recipient top-2": _frac(r["donor_is_top2"], r["mismatches"]),
    } for _, r in frame.iterrows()])
    return Table("table5a_tf", title, frame, display)


def _bench(b: str) -> str:
    return {"all": "All", "pool": "Pool"}.get(b, BENCHMARK_NAMES.get(b, b))


def condition_rows(probe, label: str, path: str) -> list[dict]:
    """Table 5A's rows of one probe (see the module docstring); items are keyed (benchmark, index)."""
    if not len(probe.items) or not len(probe.rows):
        return []
    items = probe.items.assign(key=list(zip(probe.items["benchmark"], probe.items["index"])))
    rows = probe.rows.assign(key=list(zip(probe.rows["benchmark"], probe.rows["index"])))
    ok = rows.pivot_table(index="key", columns="condition", values="correct", aggfunc="first")
    k = rows.pivot_table(index="key", columns="condition", values="prefix_len", aggfunc="first")
    pos = rows.pivot_table(index="key", columns="condition", values="fork_pos", aggfunc="first")
    ok = ok.reindex(items["key"]).astype(float)
    bench = dict(zip(items["key"], items["benchmark"]))
    fail = ok["K0_none"].fillna(0) == 0 if "K0_none" in ok else pd.Series(True, index=ok.index)
    names = sorted(items["benchmark"].unique(), key=benchmark_order)

    def row(name: str, rescued: pd.Series, mean_k: str, subset=None) -> dict:
        keys = list(rescued.index if subset is None else subset)
        r = rescued.reindex(keys).fillna(0)
        pf = [x for x in keys if fail.get(x, True)]
        out = {"probe": label, "path": path, "condition": name, "mean_k": mean_k,
               "n_all": len(keys), "rescued_all": int(r.sum()), "n_pf": len(pf), "rescued_pf": int(r.reindex(pf).sum())}
        for b in names:
            kb = [x for x in keys if bench[x] == b]
            pb = [x for x in pf if bench[x] == b]
            out.update({f"{b}.n_all": len(kb), f"{b}.all": int(r.reindex(kb).sum()), f"{b}.n_pf": len(pb),
                        f"{b}.pf": int(r.reindex(pb).sum())})
        return out

    out = [row(c, ok[c], num(k[c].mean(), 1)) for c in dict.fromkeys(rows["condition"])]  # the probe's order
    forks = [c for c in (FORK.format(1), FORK.format(2)) if c in ok]
    ctrls = [c for c in (CTRL.format(1), CTRL.format(2)) if c in ok]
    if len(forks) == 2:
        union_k = f"{num(k[forks[0]].mean(), 1)} / {num(k[forks[1]].mean(), 1)}"
        out.append(row("Self_MinMargin_Top2_Union2", ok[forks].fillna(0).max(axis=1), union_k))
        if len(ctrls) == 2:
            out.append(row("Self_Identity_Ctrl_Union2", ok[ctrls].fillna(0).max(axis=1), union_k))
        both = pos[forks].reindex(ok.index).dropna()
        early = both.idxmin(axis=1)  # the rank whose fork comes first
        for name, pick in (("Self_MinMargin_Top2_Early", early),
                           ("Self_MinMargin_Top2_Late", both.apply(lambda p: forks[1] if p[forks[0]] < p[forks[1]]
                                                                   else forks[0], axis=1))):
            chosen = pd.Series({x: ok.at[x, pick[x]] for x in pick.index})
            kk = pd.Series({x: k.at[x, pick[x]] for x in pick.index})
            out.append(row(name, chosen, num(kk.mean(), 1), subset=list(ok.index)))
    for rank in (1, 2):
        fork, ctrl = FORK.format(rank), CTRL.format(rank)
        if fork not in ok or ctrl not in ok:
            continue
        sel = rows[rows["condition"] == fork]
        verified = [x for x, o, t1, ins in zip(sel["key"], sel["orig_token"], sel["top1_token"], sel["inserted_token"])
                    if o == t1 and ins != o]
        out.append(row(f"{fork} (verified changes)", ok[fork], num(k[fork].reindex(verified).mean(), 1), verified))
        out.append(row(f"{ctrl} (verified changes)", ok[ctrl], num(k[ctrl].reindex(verified).mean(), 1), verified))
    return out


def build_table5a(sweep: Sweep) -> Table:
    title = "Table 5A: donor-prefix splicing and native top-2 forks into the recipient (§5.6 item 2)"
    rows = [r for p in sweep.probes for r in condition_rows(p, probe_label(sweep, p), sweep.relative(p.path))]
    if not rows:
        return Table.unbuilt("table5a", title, "no prefix-splice probe folder with discordant items under the root "
                                               f"({HOW})")
    frame = pd.DataFrame(rows)
    names = [c[: -len(".n_all")] for c in frame.columns if c.endswith(".n_all")]
    display = []
    for _, r in frame.iterrows():
        breakdown = " / ".join(
            f"{int(r[f'{b}.pf'])}/{int(r[f'{b}.n_pf'])} ({int(r[f'{b}.all'])}/{int(r[f'{b}.n_all'])})"
            for b in names if pd.notna(r.get(f"{b}.n_all")))
        display.append({"Probe": r["probe"], "Condition": r["condition"], "Mean cut K": r["mean_k"],
                        "All discordant": _frac(r["rescued_all"], r["n_all"]),
                        "Prompt-only fail": _frac(r["rescued_pf"], r["n_pf"]),
                        f"PromptFail (All): {' / '.join(_bench(b) for b in names)}": breakdown})
    return Table("table5a", title, frame, pd.DataFrame(display),
                 notes=["rescued: the recipient's continuation from the condition's prefix is graded correct; "
                        "prompt-only failures: items K0_none does not rescue; continuations in length-sorted "
                        "batches, eff_cap = cap - max K + K"])

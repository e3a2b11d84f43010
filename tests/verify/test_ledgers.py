"""PASS 3 on the hand-made sweep: intact ledgers pass, and each broken law is named."""

from __future__ import annotations

import pandas as pd
import pytest

from rlvr_sweep.analysis import Sweep, build_tables, save_tables
from rlvr_sweep.verify.ledgers import pair_problems, step_problems
from rlvr_sweep.verify.rebuild import saved_problems, table1_problems, table2a_problems, table3_problems
from tests.analysis import handmade


def sweep_with(change=None) -> Sweep:
    t = handmade.tables()
    if change:
        change(t)
    return Sweep.from_tables(t)


def problems_of(s: Sweep) -> list[str]:
    out = pair_problems(s.pairs, s.rollouts, s.runs)[1] + step_problems(s.steps, s.rollouts, s.pairs, s.runs)[1]
    for check in (table1_problems, table2a_problems, table3_problems):
        out += check(s)[1]
    return out


def test_intact_ledgers_pass():
    s = sweep_with()
    assert pair_problems(s.pairs, s.rollouts, s.runs) == (28, [])
    assert step_problems(s.steps, s.rollouts, s.pairs, s.runs) == ({"steps": 14, "runs": 7}, [])
    assert table1_problems(s)[1] == [] and table1_problems(s)[0] > 0
    assert table2a_problems(s) == (9, [])
    assert table3_problems(s) == (3, [])


def edit(table: str, row: int, **values):
    def change(t):
        for column, value in values.items():
            t[table].loc[row, column] = value
    return change


def tree_pair(t, category: str) -> int:
    p = t["pairs"]
    return int(p.index[(p["category"] == category)][0])


@pytest.mark.parametrize("law, change", [
    ("stage1 + stage2", lambda t: t["pairs"].__setitem__("stage2_generated", t["pairs"]["stage2_generated"] + (t["pairs"].index == 0))),
    ("0 <= L - pl", lambda t: edit("pairs", tree_pair(t, "causal_non_eos"), pl0=9)(t)),
    ("unknown category", lambda t: edit("pairs", 0, category="fork")(t)),
    ("terminal_dup is not one", lambda t: edit("pairs", tree_pair(t, "terminal_dup"), r1=1.0 - t["pairs"].loc[tree_pair(t, "terminal_dup"), "r0"])(t)),
    ("no shared prefix", lambda t: edit("pairs", 0, tau=2)(t)),
    ("pl0 = pl1 = tau > 0", lambda t: edit("pairs", tree_pair(t, "causal_non_eos"), pl1=1)(t)),
])
def test_each_pair_law_is_named(law, change):
    problems = pair_problems(*(lambda s: (s.pairs, s.rollouts, s.runs))(sweep_with(change)))[1]
    assert any(law in p for p in problems), problems


def test_a_pair_that_disagrees_with_its_rollouts():
    def change(t):
        r = t["rollouts"]
        r.loc[(r["arm"] == "stopped_tree") & (r["step"] == 1) & (r["k"] == 0) & (r["b"] == 1), "reward"] = 0.5
    problems = pair_problems(*(lambda s: (s.pairs, s.rollouts, s.runs))(sweep_with(change)))[1]
    assert any("leaf b=1 differs from its rollout row" in p for p in problems)


def test_table_2a_recounted_from_the_pairs_names_the_arm_that_differs():
    """A failed leaf that the pair ledger says hit the cap, where its rollout did not: Table 2A (from the
    rollouts) and its recount from the pairs disagree on CapR0, and the arm is named."""
    def change(t):
        p, steps = t["pairs"], t["steps"]
        active = set(zip(steps.loc[steps["active"].astype(bool), "run_hash"], steps.loc[steps["active"].astype(bool), "step"]))
        caps = t["runs"].set_index("run_hash")["horizon_tokens"]
        row = next(i for i, r in p.iterrows()
                   if (r["run_hash"], r["step"]) in active and r["r0"] == 0 and r["l0"] != caps[r["run_hash"]])
        p.loc[row, "l0"] = caps[p.loc[row, "run_hash"]]
    problems = table2a_problems(sweep_with(change))[1]
    assert any(p.startswith("Table 2A ") and "capr0_leaves" in p and "from the pairs" in p for p in problems), problems


@pytest.mark.parametrize("law, change", [
    ("leaf_tokens != sum of rollout lengths", edit("steps", 0, leaf_tokens=99)),
    ("active disagrees", edit("steps", 1, active=True)),
    ("untrimmed steps < generated", edit("steps", 0, untrimmed_steps=1)),
    ("step rewards differ from its rollouts' rewards", edit("rollouts", 0, reward=0.25)),
    ("backward tokens differ", edit("steps", 0, bwd_out_tokens=3)),
    ("run.json totals.gen_tokens", edit("runs", 0, **{"totals.gen_tokens": 1})),
    ("run.json totals.active_steps", edit("runs", 0, **{"totals.active_steps": 0})),
    ("grades give", edit("runs", 0, **{"accuracy.trained.toy_heldout": 0.9})),
    ("Table 1 base row", edit("runs", 1, **{"accuracy.base.toy_heldout": 0.5})),
])
def test_each_total_and_rebuild_law_is_named(law, change):
    problems = problems_of(sweep_with(change))
    assert any(law in p for p in problems), problems


def test_backward_accounting_of_accumulated_questions():
    """Four questions per update (Arm 11): the update's step carries the active questions' tokens."""
    steps = pd.DataFrame({
        "arm": "x", "horizon": 512, "seed": 1, "run_hash": "h", "step": range(6),
        "rewards": [[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0]],
        "active": [True, False, False, True, True, False], "leaf_tokens": [10, 20, 30, 40, 50, 60],
        "prompt_tokens": 3, "action": ["accumulated"] * 3 + ["backward_step", "accumulated", "accumulated"],
        "bwd_out_tokens": [0, 0, 0, 50, 0, 0], "bwd_full_tokens": [0, 0, 0, 50 + 12, 0, 0],
    })
    from rlvr_sweep.verify.ledgers import _expected_backward
    e = _expected_backward(steps, "zero_grad")
    assert list(e["exp_out"]) == [0, 0, 0, 10 + 40, 0, 0]  # the last two wait for an update that never came
    assert list(e["exp_full"]) == [0, 0, 0, 50 + 2 * 2 * 3, 0, 0]
    assert list(_expected_backward(steps, "full_backward")["exp_out"]) == [0, 0, 0, 100, 0, 0]
    assert list(_expected_backward(steps, "zero_grad", passes=2)["exp_out"]) == [0, 0, 0, 100, 0, 0]  # mu = 2


def test_an_update_of_two_passes_counts_its_tokens_twice():
    """PASS 3 on the hand-made sweep with run.json objective_passes = 2: the stored one-pass counts are wrong."""
    def two_passes(t):
        t["runs"]["objective_passes"] = 2

    assert not any("backward tokens" in p for p in problems_of(sweep_with()))
    assert any("backward tokens differ" in p for p in problems_of(sweep_with(two_passes)))


def test_saved_tables_rebuild_or_differ(tmp_path):
    s = sweep_with()
    save_tables(build_tables(s, n_resamples=200, seed=3), tmp_path)
    # runs, table1 .. audit (table2b: its rows against the baseline arm), the §3 diagnostics and the strata
    assert saved_problems(s, tmp_path) == (10, [])
    def flip(t):
        g = t["grades"]
        g.loc[g.index[(g["phase"] == "trained") & ~g["correct"]][0], "correct"] = True
    changed = sweep_with(flip)
    n, problems = saved_problems(changed, tmp_path)
    assert n == 10 and any(p.startswith("table1:") for p in problems)
    assert any(p.startswith("baseline_readouts:") for p in problems)  # one more correct short or long answer


def test_tables_md_the_copy_a_person_reads_is_checked_against_the_rebuilds(tmp_path):
    """Seen: Table 1's accuracy edited to 95.00 in tables.md passed `verify all --tables` (only the parquet
    files were compared). Want: each block of tables.md equals its rebuild's rendering, and its notes the
    sweep's (whatever path the root was given by)."""
    from rlvr_sweep.analysis.report import header_lines
    from rlvr_sweep.verify.rebuild import markdown_problems

    s = sweep_with()
    header = header_lines(s, "/somewhere/runs")
    save_tables(build_tables(s, n_resamples=200, seed=3), tmp_path, [*header, *(n for n in s.notes if n not in header)])
    rendered = {}
    assert saved_problems(s, tmp_path, rendered=rendered) == (10, [])
    checked, problems = markdown_problems(s, "elsewhere/runs", tmp_path, rendered)
    assert problems == [] and checked == 10 + len(header)
    md = tmp_path / "tables.md"
    clean = md.read_text()
    row = next(line for line in clean.splitlines() if line.startswith("| 5. stopped_tree |"))
    cells = row.split(" | ")
    md.write_text(clean.replace(row, " | ".join([cells[0], "95.00 ± 0.00 (95.0 / 95.0)", *cells[2:]])))
    problems = markdown_problems(s, "elsewhere/runs", tmp_path, rendered)[1]
    assert len(problems) == 1 and "'## Table 1: accuracy" in problems[0] and "differs from table1's rebuild: it says " \
        "'| 5. stopped_tree | 95.00" in problems[0]
    md.write_text(clean.replace(header[-1], header[-1] + " (edited)"))
    assert "its notes differ from the sweep's" in markdown_problems(s, "x", tmp_path, rendered)[1][0]
    table3 = clean.index("## Table 3")
    md.write_text(clean[:table3] + clean[clean.index("## ", table3 + 3):])  # a block cut out
    assert any("is saved but missing from it" in p for p in markdown_problems(s, "x", tmp_path, rendered)[1])
    md.write_text(clean + "\n## Table 9: made up\n\n| a |\n|---|\n| 1 |\n")
    assert markdown_problems(s, "x", tmp_path, rendered)[1] == [
        f"{md}: '## Table 9: made up' holds a table with no saved parquet to check it against"]
    md.write_text(clean + "\n## Table 9: made up\n\nNot built: nothing to build\n")  # no number: nothing to check
    assert markdown_problems(s, "x", tmp_path, rendered)[1] == []
    md.unlink()
    assert markdown_problems(s, "x", tmp_path, rendered) == (0, [])


RUN = {"arm": "rg_cf_grpo", "horizon": 1024, "seed": 42, "run_hash": "h"}


def fork_pairs(change: dict) -> pd.DataFrame:
    """One fork pair (t* = 3), one cf_no_fork pair of a finished 5-token root, Cap 64."""
    rows = [dict(RUN, step=0, k=0, category="cf_first_gap", tau=3, pl0=3, pl1=3, l0=9, l1=12, r0=1.0, r1=0.0,
                 stage1_leaf_tokens=13, stage2_generated=8, t_star=3, v0=5, v1=6),
            dict(RUN, step=0, k=1, category="cf_no_fork", tau=5, pl0=5, pl1=5, l0=5, l1=5, r0=0.0, r1=0.0,
                 stage1_leaf_tokens=10, stage2_generated=0, t_star=None, v0=-1, v1=-1)]
    frame = pd.DataFrame(rows)
    for (row, column), value in change.items():
        frame.loc[row, column] = value
    return frame


@pytest.mark.parametrize("change, law", [
    ({}, None),
    ({(0, "pl1"): 4}, "fork pair: pl0 = pl1 = tau = t* > 0 fails"),
    ({(0, "t_star"): 2}, "fork pair: pl0 = pl1 = tau = t* > 0 fails"),
    ({(0, "v1"): 5}, "fork pair: branch 1's token v1 equals the root's v0"),
    ({(1, "pl0"): 0}, "cf_no_fork: pl0 = pl1 = tau fails"),
    ({(1, "r1"): 1.0}, "cf_no_fork with a finished root is not one leaf duplicated"),
])
def test_fork_pair_laws(change, law):
    runs = pd.DataFrame([{**RUN, "horizon_tokens": 64}])
    checked, problems = pair_problems(fork_pairs(change), pd.DataFrame(), runs)
    assert checked == 2
    assert problems == [] if law is None else any(law in p for p in problems), problems


@pytest.mark.parametrize("status, active, law", [
    ("active", True, None), ("gated_rescue_dup", False, None), ("skipped_pb_unrescued", False, None),
    ("gated_rescue_dup", True, "active disagrees with cf_status"),
    ("homogeneous", False, "cf_status 'homogeneous' disagrees with the rewards"),
])
def test_a_fork_step_is_active_by_its_counterfactual_status(status, active, law):
    """Differing rewards but a gated step: inactive is right there (the gate is replayed in PASS 4)."""
    steps = pd.DataFrame([dict(RUN, step=0, rewards=[1.0, 0.0, 0.0, 0.0], active=active, cf_status=status,
                               untrimmed_steps=8, gen_tokens=8, padded_prefill_tokens=4, prefill_tokens=4)])
    problems = step_problems(steps, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(columns=list(RUN)))[1]
    assert problems == [] if law is None else any(law in p for p in problems), problems


def test_the_prefix_audit_is_rederived_from_the_rows(monkeypatch):
    """PASS 3 re-derives the audit: every long rollout's prefix regraded and its first box checked against
    the texts; a table whose counts the rows do not give, or a box position the texts contradict, fails."""
    from rlvr_sweep.verify.audit import audit_problems

    checked, problems = audit_problems(sweep_with())
    assert (checked, problems) == (9, [])  # Arm 5's 9 rollouts longer than the cut of 4

    def moved_box(t):
        r = t["rollouts"]
        at = r.index[(r["arm"] == "stopped_tree") & (r["seed"] == 101) & (r["step"] == 1) & (r["index"] == 0)][0]
        r.loc[at, "first_box_token"] = 7  # the prefix "a \boxed{4}" holds a box: it cannot start after the cut

    _, problems = audit_problems(sweep_with(moved_box))
    assert any("first_box_token 7 vs a cut at 4, but the prefix holds a \\boxed" in p for p in problems)
    # the audit table grades its prefixes with its own call; a fault there shows against the recount
    monkeypatch.setattr("rlvr_sweep.analysis.audit.training_reward", lambda text, gold, gate=None: 1.0)
    _, problems = audit_problems(sweep_with())
    assert "audit 5. stopped_tree pass_at_cut: the table says 2, the rows give 1" in problems


def test_a_box_split_by_the_audit_cut_is_the_paper_s_legitimate_case(qwen3_tokenizer):
    """Paper §5.4 accepts an unboxed 512-token prefix when first_box_tok == -1 or >= 510: Qwen3 splits
    ` \\boxed{98}` into ' \\', 'boxed', '{', ..., so a box whose ' \\' is token 511 (or 510) is cut in two and
    the prefix holds no `\\boxed`. Earlier, PASS 3 required the box to start at or after the cut."""
    from rlvr_sweep.reward import first_box_token
    from rlvr_sweep.verify.audit import box_problem

    tok = qwen3_tokenizer
    filler = tok(" 1" * 600, add_special_tokens=False)["input_ids"]
    tail = tok(" so \\boxed{98}", add_special_tokens=False)["input_ids"]
    at_box = [tok.decode([i]) for i in tail].index(" \\")  # where ' \\' stands in the tail
    for start, split in ((511, True), (510, False), (512, False)):
        ids = filler[: start - at_box] + tail
        text, prefix = tok.decode(ids), tok.decode(ids[:512])
        assert first_box_token(ids, tok.decode) == start
        assert ("\\boxed" in prefix) is (start == 510)  # 511: ' \\' kept, 'boxed' cut off; 512: none of it
        assert box_problem(start, 512, text, prefix) is None
        assert split is (prefix.endswith(" \\"))
    assert box_problem(509, 512, "x \\boxed{1}", "x") == (
        "first_box_token 509 vs a cut at 512, but the prefix lacks a \\boxed (a box split by the cut starts at or "
        "after token 510)")
    assert box_problem(600, 512, "a \\boxed{1} b \\boxed{2}", "a \\boxed{1}") == (
        "first_box_token 600 vs a cut at 512, but the prefix holds a \\boxed")
    assert box_problem(-1, 512, "no box", "no box") is None
    assert box_problem(-1, 512, "a \\boxed{1}", "a") == "first_box_token -1 but the rollout holds a \\boxed"


@pytest.mark.parametrize("text", [b"- {row: x, a: 1}\n", b"- {row: 1, a: 1, b: 5, benchmark: toy_heldout, seeds: 5}\n",
                                  b"just: text\n", b"\x00\xff garbage: ["])
def test_a_garbled_contrast_list_beside_table2b_is_one_problem_line(tmp_path, text):
    """The contrast list saved beside Table 2B is a file a user could edit: one that is not such a list is
    named in one problem line of the saved tables' check, never a traceback; the other tables still checked."""
    from rlvr_sweep.analysis.contrasts import CONTRASTS_FILE

    s = sweep_with()
    save_tables(build_tables(s, n_resamples=200, seed=3), tmp_path)
    (tmp_path / CONTRASTS_FILE).write_bytes(text)
    checked, problems = saved_problems(s, tmp_path)
    assert checked == 10 and len(problems) == 1
    assert problems[0].startswith(f"table2b: its contrast list {tmp_path / CONTRASTS_FILE} cannot be read (")


@pytest.mark.parametrize("seed", range(6))
def test_runs_found_clean_at_once_are_those_the_one_by_one_laws_pass(seed):
    """`_clean_runs` (every run's laws at once) lets a run skip `_run_problems` exactly when that would find
    nothing: random ledgers of accumulated and skipped updates, rows shuffled across runs, each run's stored
    backward tokens and totals right or off by one, under both optimizer steps."""
    import numpy as np

    from rlvr_sweep.store import RUN_KEYS
    from rlvr_sweep.verify.ledgers import TOTALS, _clean_runs, _expected_backward, _run_problems

    rng = np.random.default_rng(seed)
    frames, runs = [], []
    for r in range(8):
        n = int(rng.integers(1, 9))
        steps = pd.DataFrame({
            "arm": "a", "horizon": 512, "seed": r, "run_hash": f"h{r}", "step": range(n),
            "rewards": [list(rng.integers(0, 2, 2).astype(float)) for _ in range(n)],
            "active": rng.integers(0, 2, n).astype(bool), "leaf_tokens": rng.integers(1, 50, n),
            "prompt_tokens": 3, "action": rng.choice(["accumulated", "backward_step", "skipped"], n),
            **{c: rng.integers(0, 9, n) for c in TOTALS if c not in ("bwd_out_tokens", "bwd_full_tokens")},
        })
        opt = ["zero_grad", "full_backward", None][r % 3]
        passes = 1 + (r // 3) % 3  # an objective's passes over each update (run.json objective_passes)
        e = _expected_backward(steps.assign(bwd_out_tokens=0, bwd_full_tokens=0), opt, passes)
        steps["bwd_out_tokens"], steps["bwd_full_tokens"] = e.sort_index()["exp_out"], e.sort_index()["exp_full"]
        if r % 4 == 1:
            steps.loc[int(rng.integers(0, n)), "bwd_out_tokens"] += 1
        totals = {f"totals.{c}": float(steps[c].sum()) for c in TOTALS}
        totals.update({"totals.steps": n, "totals.active_steps": int(steps["active"].sum())})
        if r % 4 == 2:
            totals[f"totals.{TOTALS[int(rng.integers(0, len(TOTALS)))]}"] += 1
        frames.append(steps)
        runs.append({"arm": "a", "horizon": 512, "seed": r, "run_hash": f"h{r}", "optimizer_step": opt, **totals,
                     **({"objective_passes": passes} if passes > 1 or r % 2 else {})})  # absent before the objectives
    s = pd.concat(frames, ignore_index=True).sample(frac=1.0, random_state=seed).reset_index(drop=True)
    runs = pd.DataFrame(runs)
    clean = _clean_runs(s, runs)
    for _, run in runs.iterrows():
        key = tuple(run[k] for k in RUN_KEYS)
        mine = s[s["run_hash"] == run["run_hash"]]
        found = _run_problems(run, mine, list(s.columns))
        assert ((key, run["optimizer_step"] or None) in clean) == (not found), (run["run_hash"], found)

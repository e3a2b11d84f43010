"""A store holding many variants of one arm, made as a new user makes it (issue 48 item 5): the quick start's
runs, the baseline beside them, a 3-trial learning-rate search, the quick start's arm with a plugin's reward, and
two versions of a plugin arm (its reward edited between launches). Seen before: Table 2B and the report named
rows by 12-hex hashes, the README's row 13 vanished ("arm 4 names 4 rows"), the plugin's two versions had one
name, and `status` pooled every variant under "ra_flat 4". Want: every row named by what it changes from its
arm's preset, never by a hash alone, and no run whose options are not its paper arm's under the paper number."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from rlvr_sweep.analysis import build_tables, load_sweep
from rlvr_sweep.sweep.status import sweep_report
from rlvr_sweep.sweep.status_cli import render
from tests.helpers import REPO, run_cli

pytestmark = pytest.mark.slow  # six launches of the tiny model in subprocesses

SHORT = ["profile=smoke", "train.steps=2", "eval.limit=16"]
HASH = re.compile(r"\b[0-9a-f]{12}\b")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    base = tmp_path_factory.mktemp("variants")
    plugin = base / "lenpen"
    shutil.copytree(REPO / "examples" / "clip_lenpen", plugin, ignore=shutil.ignore_patterns("__pycache__"))
    env = {"RLVR_SWEEP_PLUGINS": str(plugin)}
    out = f"run.out_root={base / 'runs'}"

    def launch(*line, plugins=False, sweep="m"):
        proc = run_cli([*line, out, f"hydra.sweep.dir={base / sweep}", "-m"], cwd=base, timeout=600,
                       env_extra=env if plugins else None)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc

    launch("+arm=ra_flat", *SHORT, "seed=42,101", sweep="quick")
    launch("+arm=baseline", *SHORT, "seed=42,101", sweep="base")
    search = launch("+arm=ra_flat", *SHORT, "hydra/sweeper=optuna", "hydra.sweeper.n_trials=3",
                    "train.lr=interval(1e-6,1e-4)", sweep="search")
    launch("+arm=ra_flat", *SHORT, "reward=len_penalty", "seed=42,101", plugins=True, sweep="reward")
    launch("+arm=clip_lenpen", *SHORT, "seed=42,101", plugins=True, sweep="v1")
    rewards = plugin / "rewards.py"
    rewards.write_text(rewards.read_text().replace("len(t) / max_chars", "(len(t) + 1) / max_chars"))
    launch("+arm=clip_lenpen", *SHORT, "seed=42,101", plugins=True, sweep="v2")
    return base / "runs", search.stdout


def test_every_row_of_the_tables_is_named_by_what_it_is(store):
    root, _ = store
    sweep = load_sweep(root)
    names = {sweep.label(u): sweep.names_of(u)[1] for u in sweep.units()}  # name: paper arm it keeps
    assert len(names) == len(sweep.units()) == 8  # baseline, the preset, 3 trials, the reward variant, 2 versions
    assert not [n for n in names if HASH.search(n)]
    assert names["4. ra_flat"] == "4" and names["1. baseline"] == "1"
    trials = [n for n in names if n.startswith("4. ra_flat [train.lr=")]
    assert len(trials) == 3 and {names[n] for n in trials} == {"4"}  # another learning rate: still Arm 4
    assert names["ra_flat [reward=len_penalty]"] == ""  # another option: not Arm 4
    assert {n for n in names if n.startswith("clip_lenpen")} == {"clip_lenpen [plugin lenpen.rewards v1]",
                                                                "clip_lenpen [plugin lenpen.rewards v2]"}
    assert any("train.steps=2" in n and "said here, not in each row's name" in n for n in sweep.notes)

    t2b = build_tables(sweep, only=["table2b"], n_resamples=200)["table2b"]
    shown = list(t2b.display["Contrast"])
    assert not [c for c in shown if HASH.search(c)], shown
    assert "Read-out cap hits (AllCap): 4 - 1 (AllCap)" in shown  # row 13: "4" is the preset's row
    assert "vs baseline: ra_flat [reward=len_penalty] - 1 (acc)" in shown
    assert "vs baseline: clip_lenpen [plugin lenpen.rewards v2] - 1 (acc)" in shown
    assert set(t2b.frame["verdict"]) <= {"detected", "— (one seed)"} | {v for v in t2b.frame["verdict"]
                                                                        if v.startswith(("inconclusive", "powered"))}


def test_status_names_each_row_and_never_pools_variants(store):
    root, _ = store
    rows, _ = sweep_report(root)
    assert len(rows) == 13
    by_row = {}
    for r in rows:
        by_row.setdefault(r["row"], []).append(r)
        assert not HASH.search(r["row"])
    assert {len(v) for k, v in by_row.items() if "train.lr=" in k} == {1} and len(by_row) == 8
    assert {r["paper_arm"] for r in by_row["ra_flat [reward=len_penalty]"]} == {""}
    assert {r["paper_arm"] for r in by_row["ra_flat"]} == {"4"}
    lines = render(rows)
    assert "  ra_flat h512: 2 finished" in lines and "  ra_flat [reward=len_penalty] h512: 2 finished" in lines
    assert "  clip_lenpen [plugin lenpen.rewards v2] h512: 2 finished" in lines


def test_the_search_says_its_best_is_within_noise(store):
    root, out = store
    # 2 steps on 16 items: three learning rates a few items apart at most
    assert re.search(r"within noise: the best is not told apart from [12] of 2 other trial\(s\) at 5% \(trial \d: "
                     r"[+-]\d+ of 16 items, p = [01]\.\d\d", out), out[-2000:]
    summary = json.loads(next((root / ".searches").iterdir()).joinpath("summary.json").read_text())
    assert summary["trials"] == 3


def test_the_report_names_no_row_by_a_hash(store, tmp_path):
    from rlvr_sweep.analysis.html_report import write_report

    root, _ = store
    page = write_report(load_sweep(root), root, tmp_path / "r.html", verify=False, n_resamples=200,
                        progress=lambda _: None).read_text()
    tables = page[page.index("id='tables'"):page.index("id='figures'")]
    assert not HASH.search(tables.replace("sha256", ""))
    configs = page[page.index("id='configs'"):]
    assert "labels and bookkeeping that differ (not what a run computes): paper_arms.512" in configs
    assert "<td><code>paper_arms.512</code>" not in configs.split("<details>")[0]  # never among the settings

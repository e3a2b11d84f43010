"""Every test-time mode completes on the smoke profile, and `analysis tables` shows Tables 4, 5A, 5B."""

from __future__ import annotations

import json

import pandas as pd

from tests.sweeps import cli, row_name


def grades_of(root, pattern: str) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in root.glob(f"{pattern}/grades.parquet")], ignore_index=True)


def test_every_mode_completes(testtime_sweep):
    root = testtime_sweep
    done = {p.parent.relative_to(root).parts[1] for p in root.glob("smoke/*/*/DONE")}
    assert {"baseline", "stopped_tree", "ra_flat", "gate_flat", "evaluate"} <= done
    sampled = grades_of(root, "smoke/ra_flat/*")
    assert set(sampled["phase"]) == {"base", "trained"} and set(sampled["draw"]) == {0, 1, 2}
    assert (sampled.groupby(["phase", "index"]).size() == 3).all() and set(sampled["readout"]) == {"sampled_k3"}
    forks = grades_of(root, "smoke/gate_flat/*")
    assert set(forks["readout"]) == {"fork3"} and (forks["branch"] == 0).sum() == 2 * 6
    assert forks["eff_cap"].max() <= 256 and (forks.groupby(["phase", "index"])["branches"].first() >= 1).all()
    evaluated = grades_of(root, "smoke/evaluate/*")
    assert set(evaluated["phase"]) == {"eval"} and set(evaluated["readout"].fillna("greedy")) == {
        "greedy", "sampled_k3", "fork3"}
    probe = root / "smoke" / "probes" / "noisy_to_s42"
    info = json.loads((probe / "probe.json").read_text())
    assert info["discordant"]["toy_heldout"] >= 1 and info["settings"]["cap"] == 256
    assert info["settings"]["tf_tokens"] == 20 and info["settings"]["self_cuts"] == [12, 20]  # 160, 96 at 1/8
    rows = pd.read_parquet(probe / "probe_rows.parquet")
    assert (rows.groupby("condition").size() <= info["discordant"]["toy_heldout"]).all()
    assert {"K0_none", "MismatchPrefix_1_donor", "K160_donor_full"} <= set(rows["condition"])
    again = cli("rlvr_sweep.evaluation", "probe", "x", "y", "--out", str(probe))
    assert again.returncode == 0 and "already holds a finished probe" in again.stdout


def test_analysis_prints_the_test_time_tables(testtime_sweep, tmp_path):
    out = tmp_path / "tables"
    proc = cli("rlvr_sweep.analysis", "tables", str(testtime_sweep), "--out", str(out), "--resamples", "200")
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    tree, flat = row_name(testtime_sweep, "stopped_tree"), row_name(testtime_sweep, "ra_flat")
    # each row named by what it changes from its arm's preset (Arm 12: h1024, the fixture's short training)
    assert tree.startswith("12. stopped_tree h1024 [") and "sampler.bifurcate_after_active=1" in tree
    assert flat.startswith("4. ra_flat [") and "eval=sampled_k3" in flat  # another read-out: an option chosen
    assert f"Single-seed {tree} seed 42 (T=0.6, 3 draws, seed 1042" in text
    assert f"Single-seed {flat} seed 42 (base) (T=0.6" in text  # a training run's base read-out
    assert f"Cross-seed {tree} (42/101; T=0" in text
    assert "## Table 5A: donor-prefix splicing" in text and "MismatchPrefix_1_donor" in text
    assert "## Table 5A (teacher forcing)" in text
    assert "## Table 5B" in text and "batch 32 vs 64" in text
    t5b = pd.read_parquet(out / "table5b.parquet")
    gate = row_name(testtime_sweep, "gate_flat")
    labels = {f"{tree} seed 101", f"{gate} seed 42", f"{gate} seed 42 (base)"}
    assert labels <= set(t5b["label"])
    audit = t5b[t5b["label"] == f"{tree} seed 101"].iloc[0]
    assert audit["audit.n"] == 16 and audit["n_items"] == 16
    bad = cli("rlvr_sweep.analysis", "tables", str(testtime_sweep), "--out", str(out), "--only", "table9")
    assert bad.returncode == 2 and "table5b" in bad.stderr

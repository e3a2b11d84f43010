"""Shared fixtures: paths to the shared benchmark files and a small random Qwen3 model.

Tests that need something outside the repository (a SLURM controller, the benchmark files, the
real Qwen3 tokenizer) skip with a reason that says how to provide it, unless the environment
variable RLVR_SWEEP_REQUIRE_<WHAT> is set (SLURM, DATA, TOKENIZER): then they fail instead.
`.ci/run` sets them, so CI can never skip those tests silently.

Two tiers. `python -m pytest -q` runs the fast tier: every test not marked `slow`. The slow tier is
what starts real processes or real sweeps (the command line in a subprocess, SLURM jobs, kills and
resumes, notebooks, the benchmarks' scripts, the shared sweeps of `tests/sweeps.py`, whose users are
marked here): `python -m pytest -q -m slow` runs it alone, `python -m pytest -q --all` runs both.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RLVR_SWEEP_TEST_DATA", REPO.parent / "shared" / "data"))
QWEN3_TOKENIZER = REPO.parent / "shared" / "tokenizers" / "qwen3"
CONF_DIR = REPO / "conf"

pytest_plugins = ("tests.sweeps",)  # the shared sweeps: one definition, built once per session


# The slow tier in two halves of about equal time, for two cores (`.ci/run`: half 1 beside the fast tier,
# half 2 after it): half 1 is every user of a shared sweep (each sweep then built once) and the modules below.
SLOW_HALF_ONE = ("tests/sweep/test_paper_path.py", "tests/examples/test_plugin_sweeps.py", "tests/sweep/test_cli.py",
                 "tests/run/test_resume.py", "tests/run/test_reporting.py", "tests/sweep/test_search_optuna.py",
                 "tests/sweep/test_relaunch.py", "tests/run/test_objective_arms.py", "tests/bench/test_bench_scripts.py",
                 "tests/run/test_ranks.py")


def pytest_addoption(parser):
    parser.addoption("--all", action="store_true", help="run the slow tier too (default: the fast tier only)")
    parser.addoption("--slow-half", choices=("1", "2"), default=None,
                     help="with -m slow: only half 1 (the users of the shared sweeps and SLOW_HALF_ONE) or half 2")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line("markers", "slow: starts real processes or sweeps; left out unless -m slow or --all")
    # The fast tier runs on every core (pyproject's addopts: `-n auto`); the slow tier serially, unless `-n`
    # is typed: its tests share sweeps built once per session, one SLURM node and the machine's cores.
    typed = config.invocation_params.args
    asked_for_workers = any(a in ("-n", "--numprocesses") or a.startswith(("-n", "--numprocesses=")) for a in typed)
    if (config.getoption("--all") or config.getoption("markexpr")) and not asked_for_workers \
            and getattr(config.option, "numprocesses", None):
        config.option.numprocesses, config.option.dist, config.option.tx = None, "no", []
    # A worker of the fast tier beside others takes its share of the cores for torch's threads, and so do the
    # processes its tests start (OMP_NUM_THREADS, unless set): more threads than cores spin and wait on each
    # other (tests/rollout, tests/policy and tests/update took 3x as long on two workers of two cores each).
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers > 1:
        share = max(1, torch.get_num_threads() // workers)
        torch.set_num_threads(share)
        os.environ.setdefault("OMP_NUM_THREADS", str(share))


def pytest_collection_modifyitems(config, items):
    """Mark the users of the shared sweeps slow; keep only the fast tier unless `--all` or `-m` is given."""
    from tests.sweeps import SWEEP_FIXTURES

    for item in items:
        if any(name in SWEEP_FIXTURES for name in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    half = config.getoption("--slow-half")
    if half:
        def in_half_one(item) -> bool:
            return (any(name in SWEEP_FIXTURES for name in getattr(item, "fixturenames", ()))
                    or Path(item.path).relative_to(REPO).as_posix() in SLOW_HALF_ONE)

        other = [item for item in items if item.get_closest_marker("slow") and in_half_one(item) != (half == "1")]
        if other:
            config.hook.pytest_deselected(items=other)
            left_out = set(map(id, other))
            items[:] = [item for item in items if id(item) not in left_out]
    if config.getoption("--all") or config.getoption("markexpr"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


def unavailable(what: str, why: str) -> None:
    """Skip the test (fail it when RLVR_SWEEP_REQUIRE_<WHAT> is set) because `why`."""
    variable = f"RLVR_SWEEP_REQUIRE_{what}"
    if os.environ.get(variable, "") not in ("", "0"):
        pytest.fail(f"{why} ({variable} is set, so this is a failure, not a skip)", pytrace=False)
    pytest.skip(f"{why} (set {variable}=1 to make this a failure)")


def need_data(*names: str) -> Path:
    missing = [n for n in names or ("math500.jsonl",) if not (SHARED_DATA / n).is_file()]
    if missing:
        unavailable("DATA", f"benchmark files {missing} not found under {SHARED_DATA}: put them there "
                            "(see ../shared/data/README.md) or point RLVR_SWEEP_TEST_DATA at their folder")
    return SHARED_DATA


@pytest.fixture
def shared_data() -> Path:
    return need_data("math500.jsonl", "math_train.jsonl", "gsm8k_test.jsonl", "amc23.jsonl")


@pytest.fixture(scope="session")
def qwen3_tokenizer():
    """The real Qwen3 tokenizer (newline-bearing tokens such as `.\\n`, EOS 151643)."""
    if not (QWEN3_TOKENIZER / "vocab.json").is_file():
        unavailable("TOKENIZER", f"the Qwen3 tokenizer (vocab.json, merges.txt) is not under {QWEN3_TOKENIZER}")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(QWEN3_TOKENIZER)


def make_random_qwen3(seed: int = 0, vocab: int = 64):
    """A randomly initialised float32 Qwen3ForCausalLM small enough for exact CPU tests."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
        tie_word_embeddings=False, eos_token_id=vocab - 1, pad_token_id=vocab - 1,
    )
    return Qwen3ForCausalLM(config).float().eval()


@pytest.fixture
def random_qwen3():
    return make_random_qwen3()


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory):
    """One real finished smoke run (2 steps, 4 eval items), built once per session and shared by the fast
    tier's workers (the first to ask builds it under a lock in their common temporary folder; the others
    wait, then find it finished); tests read it or copy it into sweeps of their own
    (`tests.store.test_collect.sweep_of`), never change it in place."""
    from rlvr_sweep.run import run
    from rlvr_sweep.store.lock import run_lock
    from rlvr_sweep.store.rundir import is_finished
    from tests.helpers import compose_cfg, run_dir_of

    base = tmp_path_factory.getbasetemp()
    common = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # a worker's is <session's>/popen-gwN
    root = common / "finished_run"
    with run_lock(root, wait=True):  # the folder's lock, as a run holds its own
        cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "train.steps=2", "eval.limit=4", f"run.out_root={root}"])
        run_dir = run_dir_of(cfg)
        if not is_finished(run_dir):
            run(cfg)
    return run_dir

"""A relaunch decides "finished, skip" from the run's identity alone: neither torch nor transformers
is imported, in a single run or in a sweep (its preflight included)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, need_data

pytestmark = pytest.mark.slow  # launches of real runs in subprocesses

RUN = ["+arm=ra_flat", "profile=smoke", "train.steps=2", "eval.limit=4"]


def launch(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "rlvr_sweep", *args,
                           f"run.out_root={tmp_path / 'runs'}"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)


def imported(proc: subprocess.CompletedProcess) -> set[str]:
    return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}


def test_a_relaunch_of_finished_runs_imports_neither_torch_nor_transformers(tmp_path):
    first = launch(tmp_path, *RUN, "-m", "seed=42,101")
    assert first.returncode == 0, first.stderr[-3000:]
    assert {"torch", "transformers"} <= imported(first)  # they ran
    again = launch(tmp_path, *RUN, "-m", "seed=42,101")
    assert again.returncode == 0 and "runs: 2 skipped" in again.stdout, again.stdout[-2000:] + again.stderr[-2000:]
    assert not {"torch", "transformers"} & imported(again)
    single = launch(tmp_path, *RUN, "seed=42")
    assert single.returncode == 0 and "skipped" in single.stdout
    assert not {"torch", "transformers"} & imported(single)
    other = launch(tmp_path, *RUN, "-m", "seed=42,7")  # one new run: then they are needed
    assert other.returncode == 0 and "torch" in imported(other)


def test_a_relaunch_after_an_input_changed_under_the_same_settings_runs_again(tmp_path):
    """The command-line path (the preflight's finished-run check, before torch): the same line after one
    training answer, then one benchmark gold, of a data folder of the test's own was rewritten is a new
    run in a new folder each time, never the finished one; unchanged since, it is skipped."""
    shared = need_data("math_train.jsonl", "math500.jsonl")
    data = tmp_path / "data"
    data.mkdir()
    for name, n in (("math_train.jsonl", 4), ("math500.jsonl", 4)):
        (data / name).write_text("".join((shared / name).read_text().splitlines(True)[:n]))
    line = ["+arm=ra_flat", "profile=smoke", "train.steps=1", "eval.limit=2", "eval.benchmarks=[math500]",
            "data.name=math_train", "data.train_file=math_train.jsonl", f"data.root={data}", "-m", "seed=42"]
    folders = lambda: sorted(p.name for p in (tmp_path / "runs" / "smoke" / "ra_flat").glob("h512_s42_*"))  # noqa: E731

    def relaunch(expected: str) -> None:
        proc = launch(tmp_path, *line)
        assert proc.returncode == 0 and expected in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]

    relaunch("runs: 1 finished")
    first = folders()
    rewrite_first_row(data / "math_train.jsonl", "answer", "a changed answer")
    relaunch("runs: 1 finished")
    second = folders()
    rewrite_first_row(data / "math500.jsonl", "answer", "a changed gold")
    relaunch("runs: 1 finished")
    third = folders()
    assert (len(first), len(second), len(third)) == (1, 2, 3)
    relaunch("runs: 1 skipped")
    assert folders() == third


def rewrite_first_row(path, field: str, value: str) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0][field] = value
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))

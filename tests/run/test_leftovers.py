"""Everything else a run can leave behind: prompts too long for the model, a full disk, a killed base
read-out, a setting that trains nothing, bad checkpoint folders, two probes into one folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rlvr_sweep import store
from rlvr_sweep.config import ConfigError
from rlvr_sweep.data import DataError
from rlvr_sweep.run import plan, run
from rlvr_sweep.store.lock import run_lock
from tests.conftest import REPO, need_data
from tests.helpers import compose_cfg, run_cli, run_dir_of

SMOKE = ["+arm=ra_flat", "profile=smoke"]


def math_root(tmp_path, rows: int = 4):
    root = tmp_path / "data"
    root.mkdir(exist_ok=True)
    lines = (need_data("math500.jsonl") / "math500.jsonl").read_text().splitlines()[:rows]
    (root / "math500.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_a_prompt_longer_than_the_context_is_refused_naming_file_and_line(tmp_path):
    """Seen: a 30 MB problem passed the data check, the tokenizer exhausted memory (exit 134) and
    run.json stayed 'running'. Want: refused at the data check, naming the file and line, with
    nothing written."""
    root = math_root(tmp_path)
    rows = [json.loads(line) for line in (root / "math500.jsonl").read_text().splitlines()]
    rows[2]["problem"] = "x" * 30_000_000
    (root / "math500.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = compose_cfg([*SMOKE, "eval.benchmarks=[math500]", f"data.root={root}", f"run.out_root={tmp_path}/runs"])
    with pytest.raises(DataError, match=rf"{root / 'math500.jsonl'}:3: math500 item .* the prompt is 30,000,\d+ "
                                        r"bytes, longer than the model's context of 32,768 tokens"):
        plan(cfg)
    assert not (tmp_path / "runs").exists()


def test_a_prompt_just_over_the_context_is_measured_with_the_models_tokenizer(tmp_path):
    root = math_root(tmp_path)
    rows = [json.loads(line) for line in (root / "math500.jsonl").read_text().splitlines()]
    rows[1]["problem"] = "7 " * 20_000  # 40,000 bytes: 40,000 tokens of the tiny tokenizer, more than its 32,768
    (root / "math500.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = compose_cfg([*SMOKE, "eval.benchmarks=[math500]", f"data.root={root}"])
    with pytest.raises(DataError, match=r"math500.jsonl:2: .* tokens, longer than the model's context"):
        plan(cfg)


def test_a_setting_that_trains_nothing_is_refused():
    with pytest.raises(ConfigError, match=r"train.steps=0 trains nothing .* task=evaluate"):
        compose_cfg([*SMOKE, "train.steps=0"])


@pytest.mark.parametrize("what", ["file", "missing"])
def test_every_bad_model_path_of_a_read_out_is_one_line(tmp_path, what):
    """Seen: task=evaluate with model.path naming a file or a missing folder ended in a traceback.
    Want: one line naming it, exit 2."""
    target = tmp_path / "weights.safetensors"
    if what == "file":
        target.write_bytes(b"not a folder")
    proc = run_cli(["task=evaluate", "profile=smoke", f"model.path={target}", "run.out_root=runs"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("rlvr_sweep: ModelLoadError: model.path=") and str(target) in line
    assert ("is a file, not a folder" if what == "file" else "does not exist") in line


def test_a_run_killed_during_its_base_read_out_resumes_benchmark_by_benchmark(tmp_path, monkeypatch):
    """Seen: a training run killed during its base read-out redid the whole read-out. Want: the
    benchmarks graded before the kill are kept, the others read out, the run ends as an unkilled one."""
    from rlvr_sweep.run import readouts

    root = math_root(tmp_path, rows=3)
    args = [*SMOKE, "train.steps=2", "eval.benchmarks=[toy_heldout,math500]", "eval.limit=3", f"data.root={root}"]
    whole = run(compose_cfg([*args, f"run.out_root={tmp_path}/whole"]))
    cfg = compose_cfg([*args, f"run.out_root={tmp_path}/killed"])
    real, seen = readouts.read_out, []

    def read_out(cfg, policy, rows, *, benchmark, phase, **kw):
        seen.append((phase, benchmark))
        if (phase, benchmark) == ("base", "math500") and len(seen) == 2:
            raise KeyboardInterrupt("killed during the base read-out")
        return real(cfg, policy, rows, benchmark=benchmark, phase=phase, **kw)

    monkeypatch.setattr(readouts, "read_out", read_out)
    with pytest.raises(KeyboardInterrupt):
        run(cfg)
    info = run(cfg)
    assert seen[2:] == [("base", "math500"), ("trained", "toy_heldout"), ("trained", "math500")]  # toy kept
    killed, uninterrupted = store.read_table(info["run_dir"], "grades"), store.read_table(whole["run_dir"], "grades")
    columns = [c for c in uninterrupted.columns if c != "run_hash"]
    assert killed[columns].equals(uninterrupted[columns])
    assert info["accuracy"] == whole["accuracy"] and "resumed_from_step" not in info


def test_a_probe_into_a_folder_another_probe_writes_writes_nothing(tmp_path):
    """Seen: two probes started together into the same --out both said 'wrote'; the folder kept only
    the later one's results. Want: one writer: the other exits 3 and writes nothing."""
    out = tmp_path / "probes" / "p"
    tiny = "pkg:rlvr_sweep.policy/assets/tiny_qwen3"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src")}
    with run_lock(out):  # what a first probe holds for its whole life
        proc = subprocess.run([sys.executable, "-m", "rlvr_sweep.evaluation", "probe", tiny, tiny, "--out", str(out),
                               "--length-scale", "0.125", "--limit", "2", "--benchmarks", "toy_heldout"],
                              capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "is being run by pid" in proc.stderr and "writes nothing" in proc.stderr
    assert not out.exists()


def test_a_probe_refuses_a_busy_or_finished_folder_before_importing_torch(tmp_path):
    """Seen: the refusal came only after 5-9 s of imports (torch, transformers); want: before them."""
    out, tiny = tmp_path / "p", "pkg:rlvr_sweep.policy/assets/tiny_qwen3"
    code = ("import sys; from rlvr_sweep.evaluation.cli import main; rc = main(sys.argv[1:]); "
            "print('heavy:', [m for m in ('torch', 'transformers') if m in sys.modules]); sys.exit(rc)")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src")}

    def probe():
        return subprocess.run([sys.executable, "-c", code, "probe", tiny, tiny, "--out", str(out)],
                              capture_output=True, text=True, env=env, timeout=120)

    with run_lock(out):
        busy = probe()
    assert busy.returncode == 3 and "is being run by pid" in busy.stderr, busy.stderr[-2000:]
    assert "heavy: []" in busy.stdout
    out.mkdir()
    (out / store.DONE_MARKER).touch()
    done = probe()
    assert done.returncode == 0 and "already holds a finished probe" in done.stdout, done.stderr[-2000:]
    assert "heavy: []" in done.stdout


@pytest.mark.slow
def test_a_full_disk_leaves_a_recorded_failure_and_no_temporary_files(tmp_path):
    """Seen: on a full disk the run exited 1 with 'No space left on device', left 2 temporary files
    that kept the disk full, and run.json stayed 'running'. Want: the temporary files removed, the
    failure recorded in run.json, one line naming the full disk, and a relaunch on free space resumes."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs as the full disk")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1500k", "tmpfs", str(disk)]).returncode:
        pytest.skip("mount -t tmpfs is not allowed here")
    try:
        args = [*SMOKE, "train.steps=12", "eval.limit=4", f"run.out_root={disk}"]
        proc = run_cli(args, cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr[-3000:]
        (line,) = [l for l in proc.stderr.strip().splitlines() if l.startswith("rlvr_sweep:")]
        assert "DiskFullError" in line and "is full" in line and "Traceback" not in proc.stderr
        run_dir = run_dir_of(compose_cfg(args))
        assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"
        assert not list(run_dir.rglob(".*.tmp-*"))
    finally:
        subprocess.run(["umount", str(disk)])

"""The fast engine and the faster read-out schedules are config options of a run; in float32 on a CPU
they produce exactly what the reference engine and the paper's fixed batches produce."""

from __future__ import annotations

import pandas as pd
import pytest

from rlvr_sweep import store
from rlvr_sweep.run import run
from tests.helpers import compose_cfg

TIMING = ["seconds", "run_hash"]


def tables(run_dir) -> dict[str, pd.DataFrame]:
    return {name: store.read_table(run_dir, name).drop(columns=TIMING, errors="ignore")
            for name in ("steps", "rollouts", "pairs", "grades")}


@pytest.mark.slow
def test_the_static_engine_trains_the_reference_ledger(tmp_path):
    args = ["+arm=stopped_tree", "profile=smoke", "train.steps=8", "sampler.bifurcate_after_active=0", "eval.limit=24"]
    reference = run(compose_cfg([*args, "model.engine=reference", f"run.out_root={tmp_path}/ref"]))
    fast = run(compose_cfg([*args, "model.engine=static", f"run.out_root={tmp_path}/fast"]))
    default = compose_cfg([*args, f"run.out_root={tmp_path}/auto"])
    assert default.model.engine == "auto"  # the smoke profile's: static here, on a CPU in float32
    auto = run(default)
    assert len({fast["run_hash"], reference["run_hash"], auto["run_hash"]}) == 3  # the engine is in the identity
    for name, frame in tables(reference["run_dir"]).items():
        pd.testing.assert_frame_equal(frame, tables(fast["run_dir"])[name], check_exact=True, obj=name)
        pd.testing.assert_frame_equal(frame, tables(auto["run_dir"])[name], check_exact=True, obj=name)


def test_auto_is_the_static_engine_only_where_it_is_proven_identical(monkeypatch):
    import torch

    from rlvr_sweep.rollout import engines
    from tests.helpers import compose_cfg as compose

    assert compose(["profile=smoke"]).model.engine == "auto" and compose([]).model.engine == "reference"  # paper: reference
    called = []
    monkeypatch.setattr(engines.static_engine, "generate", lambda *a, **k: called.append("static"))
    monkeypatch.setattr(engines.engine, "generate", lambda *a, **k: called.append("reference"))
    engines.auto_generate(torch.nn.Linear(2, 2), [[1]])  # float32 on the CPU
    engines.auto_generate(torch.nn.Linear(2, 2).to(torch.bfloat16), [[1]])
    assert called == ["static", "reference"]
    # on a GPU (tests/rollout/test_gpu.py runs it there): float32 proven token-identical, bf16 and fp16 not
    by_place = {(d, str(t)): engines._by_place((d, t))[0] for d in ("cuda", "cpu")
                for t in (torch.float32, torch.bfloat16, torch.float16)}
    assert by_place == {("cuda", "torch.float32"): "static", ("cuda", "torch.bfloat16"): "reference",
                        ("cuda", "torch.float16"): "reference", ("cpu", "torch.float32"): "static",
                        ("cpu", "torch.bfloat16"): "reference", ("cpu", "torch.float16"): "reference"}


@pytest.mark.slow
def test_read_out_schedules_give_the_same_grades(tmp_path):
    tiny = "pkg:rlvr_sweep.policy/assets/tiny_qwen3"
    runs = {schedule: run(compose_cfg(["task=evaluate", "profile=smoke", f"model.path={tiny}", "eval.limit=48",
                                       "eval.batch_size=16", *extra, f"run.out_root={tmp_path}"]))
            for schedule, extra in [("fixed", []), ("length_sorted", ["eval.schedule=length_sorted"]),
                                    ("refill", ["eval.schedule=refill", "model.engine=static", "eval.slots=8"])]}
    grades = {s: store.read_table(info["run_dir"], "grades") for s, info in runs.items()}
    for schedule in ("length_sorted", "refill"):
        assert grades[schedule]["item_id"].tolist() == grades["fixed"]["item_id"].tolist()
        assert grades[schedule]["response"].tolist() == grades["fixed"]["response"].tolist(), schedule
    assert len({info["run_hash"] for info in runs.values()}) == 3

"""One run over two ranks (`run.ranks`: torchrun, gloo on the CPU, FSDP2 sharding): the same folder and files as one
process, the same rollouts and rewards before the first update (and the same tokens after, on this machine), the
weights within the tolerance Adam's sign-like first steps allow; settings it cannot take are refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from rlvr_sweep import store
from rlvr_sweep.run import ranks
from tests.conftest import REPO
from tests.helpers import compose_cfg, run_dir_of

ARGS = ["+arm=ra_flat", "profile=smoke", "train.steps=4", "train.checkpoint_every=2", "eval.limit=8",
        "model.engine=reference"]


def torchrun(args: list[str], cwd: Path, nproc: int = 2) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
                           "--standalone", "-m", "rlvr_sweep", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_two_gloo_ranks_write_the_one_process_runs_folder(tmp_path):
    """Arm 4 with KL to the initial policy measured (`objective.measure_kl`: a frozen reference, sharded alike)."""
    from rlvr_sweep.run import run

    args = [*ARGS, "objective.measure_kl=true"]
    one = Path(run(compose_cfg([*args, f"run.out_root={tmp_path}/one"]))["run_dir"])
    proc = torchrun([*args, f"run.out_root={tmp_path}/two"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    two = run_dir_of(compose_cfg([*args, f"run.out_root={tmp_path}/two"]))
    assert two.name == one.name  # the same identity: the world size is not part of it
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir())  # written once, by rank 0
    assert store.read_run_json(two)["world_size"] == 2 and "world_size" not in store.read_run_json(one)
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("rlvr_sweep-rank1-*/" + two.name))  # scratch removed
    tables = {name: [store.read_table(d, name).drop(columns=["seconds"], errors="ignore") for d in (one, two)]
              for name in ("steps", "rollouts", "pairs", "grades")}
    steps = tables["steps"][0]
    first = int(steps.loc[steps["action"] == "backward_step", "step"].min())  # the first update that moved weights
    rollouts = [r[r["step"] <= first] for r in tables["rollouts"]]
    for column in ("tokens", "text", "reward", "correct"):  # drawn from the same weights by the same generator
        if column in rollouts[0]:
            assert [list(v) if hasattr(v, "__len__") and not isinstance(v, str) else v for v in rollouts[0][column]] == \
                [list(v) if hasattr(v, "__len__") and not isinstance(v, str) else v for v in rollouts[1][column]], column
    assert tables["pairs"][0].equals(tables["pairs"][1])  # the tokens and rewards of every step, on this machine
    pd.testing.assert_frame_equal(tables["grades"][0], tables["grades"][1])
    base = [g[g["phase"] == "base"] for g in tables["grades"]]
    assert base[0].equals(base[1])
    loss = [s.loc[s["step"] == first, "loss"].item() for s in tables["steps"]]
    assert loss[0] == pytest.approx(loss[1], rel=1e-5)  # the first update's loss: each rank's share, summed
    norm = [s.loc[s["step"] == first, "grad_norm"].item() for s in tables["steps"]]
    assert norm[0] == pytest.approx(norm[1], rel=1e-5)  # the ranks' gradients summed, not averaged
    # the reference's forward takes each rank's share in its backward's chunks: the same bits, so no KL before it moves
    kl = [s.loc[s["step"] == first, "kl_ref"].item() for s in tables["steps"]]
    assert kl == [0.0, 0.0]
    later = [s["kl_ref"].fillna(-1.0).tolist() for s in tables["steps"]]  # NaN: no update measured it
    assert later[1] == pytest.approx(later[0], abs=1e-4) and max(later[0]) > 0
    weights = [load_file(d / "model" / "model.safetensors") for d in (one, two)]
    assert sorted(weights[0]) == sorted(weights[1])
    gap = max((weights[0][k] - weights[1][k]).abs().max().item() for k in weights[0])
    updates = int((steps["action"] == "backward_step").sum()) + int((steps["action"] == "zero_grad_step").sum())
    assert gap <= 4 * 5e-5 * updates  # Adam's early steps are ~lr * sign(g): a rounding-level gradient can flip one


def test_per_rollout_seeds_give_two_ranks_the_one_process_groups_each_rank_drawing_half(tmp_path):
    """train.rollout_seeding=per_rollout: each rank decodes its half of every decoding call (a tree's roots, then
    its branches) and backpropagates its half of each group. A rollout's tokens depend on its key and its logits
    only, so with the same weights they are the one process's (float32 on the CPU: the same logits at any batch).
    The weights are held equal here by a learning rate too small to move a float32 weight (1e-12; only weights near 0
    move, by about that much, and no logit with them): the updates run
    in full (two questions each, each question's gradient, the ranks' shards summed, scaled to unit norm: Arm 11's
    rule), and every rollout, reward, credit and update of the two runs can be compared."""
    from rlvr_sweep.run import run

    args = ["+arm=stopped_tree", "profile=smoke", "train.steps=6", "eval.limit=4", "model.engine=reference",
            "train.rollout_seeding=per_rollout", "train.accumulate_questions=2", "train.unit_question_grad=true",
            "sampler.bifurcate_after_active=1", "train.lr=1e-12"]
    one = Path(run(compose_cfg([*args, f"run.out_root={tmp_path}/one"]))["run_dir"])
    proc = torchrun([*args, f"run.out_root={tmp_path}/two"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    two = run_dir_of(compose_cfg([*args, f"run.out_root={tmp_path}/two"]))
    assert two.name == one.name
    tables = {name: [store.read_table(d, name).drop(columns=["seconds"], errors="ignore") for d in (one, two)]
              for name in ("steps", "rollouts", "pairs")}
    rollouts = tables["rollouts"]
    assert (rollouts[0]["prefix_len"] == 0).any() and (rollouts[0]["prefix_len"] > 0).any()  # flat warmup, then trees
    for column in ("tokens", "prefix_len", "reward", "correct", "adv_cont", "adv_prefix"):
        assert [list(v) if hasattr(v, "__len__") else v for v in rollouts[0][column]] == \
            [list(v) if hasattr(v, "__len__") else v for v in rollouts[1][column]], column
    pd.testing.assert_frame_equal(tables["pairs"][0], tables["pairs"][1])
    steps = tables["steps"]
    assert steps[1]["action"].tolist() == steps[0]["action"].tolist()
    moved = steps[0]["action"] == "backward_step"
    assert moved.sum() >= 2
    for column in ("loss", "grad_norm"):  # each rank backpropagated half of each group: the sums are the one process's
        assert steps[1].loc[moved, column].tolist() == pytest.approx(steps[0].loc[moved, column].tolist(), rel=1e-5)
    weights = [load_file(d / "model" / "model.safetensors") for d in (one, two)]
    assert max((weights[0][k] - weights[1][k]).abs().max().item() for k in weights[0]) <= 1e-10  # next to nothing moved


@pytest.mark.slow
def test_a_killed_two_rank_run_resumes_from_the_leaders_checkpoint(tmp_path):
    """torchrun and both ranks killed (SIGKILL) after the leader's checkpoint inside the tail-average window; the same
    command then resumes both ranks from it (the whole state: AdamW's keyed by name, the tail average's means gathered
    and sharded again) to the ledger and weights of the run left alone."""
    import signal
    import time

    from rlvr_sweep.run import checkpoint

    args = ["+arm=ra_mst_tail50", "profile=smoke", "train.steps=8", "train.tail_average=[3,8]",
            "train.checkpoint_every=2", "eval.limit=8", "model.engine=reference"]
    whole = torchrun([*args, f"run.out_root={tmp_path}/whole"], tmp_path)
    assert whole.returncode == 0, whole.stderr[-3000:]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--standalone", "-m", "rlvr_sweep",
           *args, f"run.out_root={tmp_path}/cut"]
    run_dir = run_dir_of(compose_cfg([*args, f"run.out_root={tmp_path}/cut"]))
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        try:
            if torch.load(run_dir / checkpoint.CHECKPOINT, weights_only=True)["progress"]["step"] >= 4:
                break
        except Exception:  # noqa: BLE001  (not written yet, or being replaced)
            pass
        time.sleep(0.1)
    import psutil  # with peft: the test extra has it

    for process in [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]:
        process.send_signal(signal.SIGKILL)  # torchrun starts each rank in a session of its own: each is killed
    proc.wait()
    assert not store.is_finished(run_dir), "the run finished before it could be killed"
    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    info = store.read_run_json(run_dir)
    assert info["status"] == "finished" and info["world_size"] == 2
    assert info.get("resumed_from_step", 0) >= 4, (again.stdout + again.stderr)[-5000:]
    left_alone = run_dir_of(compose_cfg([*args, f"run.out_root={tmp_path}/whole"]))
    for name in ("steps", "rollouts", "pairs", "grades"):
        pd.testing.assert_frame_equal(store.read_table(run_dir, name).drop(columns=["seconds"], errors="ignore"),
                                      store.read_table(left_alone, name).drop(columns=["seconds"], errors="ignore"))
    assert (run_dir / "model" / "model.safetensors").read_bytes() == \
        (left_alone / "model" / "model.safetensors").read_bytes()


def test_what_two_ranks_cannot_take_yet_is_refused_in_one_line():
    w = ranks.World(rank=0, size=2)
    assert ranks.refusals(compose_cfg(["+arm=ra_flat"]), w) == []
    said = [ranks.refusals(compose_cfg(extra), w) for extra in (
        ["+arm=ra_flat", "lora.rank=8"], ["+arm=ra_flat", "model.engine=static"])]
    for taken in (["+arm=grpo_original"], ["+arm=ra_mst_tail50"], ["+arm=stopped_tree_accum"]):  # taken over ranks
        assert ranks.refusals(compose_cfg(taken), w) == []
    assert said == [["lora.rank is not supported over 2 ranks yet"],
                    ["model.engine=static (it reads unsharded weights; use reference or auto) is not supported over 2 "
                     "ranks yet"]]
    assert ranks.refusals(compose_cfg(["+arm=grpo_original"]), ranks.World()) == []


def test_a_checkpoint_keyed_by_index_is_keyed_by_name_for_sharded_ranks():
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    model[0].bias.requires_grad_(False)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained)
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    named = ranks.by_name(model, optimizer.state_dict())
    assert list(named["state"]) == ["0.weight", "1.weight", "1.bias"]
    assert named["param_groups"][0]["params"] == ["0.weight", "1.weight", "1.bias"]
    assert torch.equal(named["state"]["1.bias"]["exp_avg"], optimizer.state[model[1].bias]["exp_avg"])
    assert ranks.by_name(model, named) is named


def test_a_sweep_under_torchrun_is_refused_before_anything(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "WORLD_SIZE": "2", "RANK": "0"}
    proc = subprocess.run([sys.executable, "-m", "rlvr_sweep", "+arm=ra_flat", "profile=smoke",
                           f"run.out_root={tmp_path}/runs", "-m", "seed=1,2"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "rlvr_sweep: torchrun launches one run over its ranks: drop -m (a sweep whose runs each take several GPUs: "
        "-m hydra/launcher=submitit_slurm hydra.launcher.tasks_per_node=N)")
    assert not (tmp_path / "runs").exists()


FAKE_RANKS = """
import json, sys, torch, torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from rlvr_sweep.config import ModelConfig
from rlvr_sweep.policy import load_policy
from rlvr_sweep.run import ranks
from rlvr_sweep.update.losses import token_logprobs
size, out = int(sys.argv[1]), []
for rank in range(size):
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=size)
    policy = load_policy(ModelConfig(name="tiny", hub_id=None, path="pkg:rlvr_sweep.policy/assets/tiny_qwen3",
                                     dtype="float32", device="cpu"))
    ranks.shard(policy.model)
    params = list(policy.model.parameters())
    optimizer = torch.optim.AdamW(params)
    ids = torch.randint(0, 400, (2, 12))
    token_logprobs(policy.model, ids, torch.ones_like(ids)).sum().backward()
    optimizer.step()
    local = lambda ts: sum(t.to_local().numel() * t.element_size() for t in ts)
    out.append({"weights": local(params), "gradients": local(p.grad for p in params),
                "AdamW moments": local(t for s in optimizer.state.values() for t in (s["exp_avg"], s["exp_avg_sq"]))})
    dist.destroy_process_group()
print(json.dumps(out))
"""


def test_eight_simulated_ranks_hold_the_memory_plans_share_of_the_tiny_model():
    """PyTorch's fake process group: 8 ranks' FSDP2 shards of the tiny model, one after another in one process (its
    collectives move nothing: shapes only). Each rank holds an eighth of the weights, gradients and AdamW moments
    (every first dimension of the tiny model divides by 8): what `run.memory_plan` keeps per rank at 8 shards."""
    import json

    from rlvr_sweep.config import ModelConfig
    from rlvr_sweep.policy.source import resolve_model_folder
    from rlvr_sweep.run.memory import parameter_count
    from rlvr_sweep.run.memory_plan import Shape, estimate_for

    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", FAKE_RANKS, "8"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    held = json.loads(proc.stdout.strip().splitlines()[-1])
    folder = resolve_model_folder(ModelConfig(name="tiny", hub_id=None, path="pkg:rlvr_sweep.policy/assets/tiny_qwen3",
                                              dtype="float32", device="cpu"))
    planned = estimate_for(compose_cfg(["+arm=ra_flat", "profile=smoke"]), Shape.of(folder), parameter_count(folder),
                           {}, shards=8).kept
    assert planned["weights"] == 149_888 * 4 // 8  # the tiny model's 149,888 float32 parameters, over 8
    for rank in held:
        assert rank == {k: planned[k] for k in ("weights", "gradients", "AdamW moments")}

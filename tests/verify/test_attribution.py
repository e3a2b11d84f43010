"""Read-outs are credited by their weights: a `task=evaluate` read-out belongs to a training run only
when it read exactly the model that run saved, and `verify` re-derives every credit from the digests."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from rlvr_sweep import store
from rlvr_sweep.analysis import build_tables, load_sweep
from rlvr_sweep.analysis.checkpoints import readouts_of
from rlvr_sweep.run import run
from rlvr_sweep.store.manifest import manifest_bytes
from rlvr_sweep.verify.attribution import attribution_problems
from tests.helpers import compose_cfg


@pytest.fixture(scope="module")
def sweep_root(tmp_path_factory, finished_run):
    """A trained ra_flat seed 42 (the session's finished run, its model saved), a sampled read-out of that
    model, and a sampled read-out of a folder named like the run's model folder that holds other weights."""
    base = tmp_path_factory.mktemp("attribution")
    root = base / "runs"
    trained_dir = root / "smoke" / "ra_flat" / finished_run.name
    shutil.copytree(finished_run, trained_dir)
    trained = {**json.loads((trained_dir / store.RUN_JSON).read_text()), "run_dir": str(trained_dir)}
    # trained alike, read out on fewer items: it saves the very same weights
    twin = run(compose_cfg(["+arm=ra_flat", "profile=smoke", "train.steps=2", "eval.limit=3", f"run.out_root={root}"]))
    assert twin["saved_model_digest"] == trained["saved_model_digest"]
    impostor = base / "elsewhere" / "smoke" / "ra_flat" / trained["run_dir"].rsplit("/", 1)[-1] / "model"
    shutil.copytree(f"{trained['run_dir']}/model", impostor)
    weights = load_file(str(impostor / "model.safetensors"))
    g = torch.Generator().manual_seed(3)
    save_file({k: v + 0.01 * torch.randn(v.shape, generator=g) for k, v in weights.items()},
              str(impostor / "model.safetensors"), metadata={"format": "pt"})
    for model in (f"{trained['run_dir']}/model", impostor):
        run(compose_cfg(["task=evaluate", "profile=smoke", f"model.path={model}", "eval=sampled_k3", "eval.limit=4",
                         "seed=42", f"run.out_root={root}"]))
    return root, trained


def test_a_read_out_is_credited_to_the_run_whose_saved_model_it_read_and_no_other(sweep_root):
    """Seen: a read-out of a folder named like seed 42's run but holding other weights (digest 1531d33e
    against the run's ad97000d) appeared in Table 4 as "4. ra_flat seed 42" with seed 42's training
    cost; verify passed. Want: it is its own checkpoint row; only the read-out of the run's own saved
    model carries the run's label and cost."""
    root, trained = sweep_root
    sweep = load_sweep(root)
    credited = {r.run_dir: r.train_run for r in readouts_of(sweep, "sampled_k3")}
    owners = [None if t is None else t["run_dir"] for t in credited.values()]
    assert sorted(owners, key=str) == sorted([None, trained["run_dir"]], key=str)  # the run whose model/ it read
    t4 = build_tables(sweep, n_resamples=50, only=["table4"])["table4"].frame
    sampled = t4[t4["mode"] == "sampled"].set_index("label")
    assert len(sampled) == 2
    row = sweep.runs.loc[sweep.runs["run_dir"] == trained["run_dir"], "label"].iloc[0]  # its twin is another row
    assert row.startswith("4. ra_flat")
    own = sampled.loc[f"{row} seed 42"]
    assert own["train_tflops_out"] > 0
    (other,) = [label for label in sampled.index if label != f"{row} seed 42"]
    impostor = next(r for _, r in sweep.eval_runs.iterrows() if r["model_digest"] != trained["saved_model_digest"])
    assert other == f"{trained['run_dir'].rsplit('/', 1)[-1]} [model {impostor['model_digest'][:8]}, not a run of this sweep]"
    assert pd_isna(sampled.loc[other, "train_tflops_out"])
    assert attribution_problems(sweep) == (2, [])


def pd_isna(value) -> bool:
    return value != value  # NaN


def test_verify_catches_a_saved_model_digest_that_is_not_the_saved_models(sweep_root, tmp_path):
    """A run.json whose saved_model_digest was rewritten (manifest regenerated) to claim the impostor's
    weights: PASS 1 names the false digest and PASS 4 the credit that no longer follows from the files."""
    from rlvr_sweep.verify.integrity import run_problems

    root, trained = sweep_root
    copy = tmp_path / "runs"
    shutil.copytree(root, copy)
    run_dir = copy / trained["run_dir"].split("/runs/", 1)[1]
    evals = [json.loads(p.read_text()) for p in (copy / "smoke" / "evaluate").rglob("run.json")]
    impostor = next(e for e in evals if e["model_digest"] != trained["saved_model_digest"])
    info = json.loads((run_dir / store.RUN_JSON).read_text())
    info["saved_model_digest"] = impostor["model_digest"]
    (run_dir / store.RUN_JSON).write_text(json.dumps(info))
    (run_dir / store.MANIFEST).write_bytes(manifest_bytes(run_dir))
    assert any("saved_model_digest" in p and "is not the digest of the saved model's files" in p
               for p in run_problems(run_dir))
    checked, (problem, *more) = attribution_problems(load_sweep(copy))
    assert checked == 2 and more == []  # the genuine read-out stays credited: its twin saved the same weights
    assert f"credited to {run_dir}" in problem and f"(digest {impostor['model_digest'][:16]}) was saved by no run" in problem

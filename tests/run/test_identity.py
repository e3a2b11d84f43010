"""A run is what it computed from: its settings, the data rows it read and the model files it started
from. Changed inputs make a new run (never a silent skip of the old one); unchanged ones skip it."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from rlvr_sweep import store
from rlvr_sweep.config import ConfigError, check_config
from rlvr_sweep.run import plan, run
from rlvr_sweep.store.identity import model_digest, rows_digest
from tests.conftest import need_data
from tests.helpers import compose_cfg

TINY_FOLDER = "src/rlvr_sweep/policy/assets/tiny_qwen3"


@pytest.fixture
def data_root(tmp_path):
    """A data folder of our own: the first 6 MATH-500 items (copied from the shared benchmark file)."""
    shared = need_data("math500.jsonl")
    root = tmp_path / "data"
    root.mkdir()
    lines = (shared / "math500.jsonl").read_text().splitlines()[:6]
    (root / "math500.jsonl").write_text("\n".join(lines) + "\n")
    return root


def smoke(tmp_path, data_root, *extra):
    return compose_cfg(["+arm=ra_flat", "profile=smoke", "train.steps=1", "eval.benchmarks=[math500]",
                        "eval.limit=3", f"data.root={data_root}", f"run.out_root={tmp_path}/runs", *extra])


def rewrite_row(path, index: int, **fields) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[index].update(fields)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_changed_gold_answer_is_a_new_run_graded_against_the_new_gold(tmp_path, data_root, caplog):
    """Seen: after a benchmark's golds changed, the relaunch skipped the finished run and kept grades
    made against the old golds. Want: a new run (its own folder) graded against the new golds; the old
    run untouched; the log names what changed."""
    first = run(smoke(tmp_path, data_root))
    old_dir = first["run_dir"]
    rewrite_row(data_root / "math500.jsonl", 0, answer="a changed gold")
    with caplog.at_level("WARNING"):
        second = run(smoke(tmp_path, data_root))
    assert not second.get("skipped") and second["run_dir"] != old_dir
    assert second["settings_hash"] == first["settings_hash"] and second["run_hash"] != first["run_hash"]
    grades = store.read_table(second["run_dir"], "grades")
    assert grades.query("item_id == @grades.item_id.iloc[0]")["gold"].unique().tolist() == ["a changed gold"]
    assert store.read_table(old_dir, "grades")["gold"].iloc[0] != "a changed gold"
    assert store.verify_manifest(old_dir) == []
    assert "read other inputs (benchmark/math500 changed)" in caplog.text


def test_rows_the_run_never_reads_are_not_part_of_it(tmp_path, data_root):
    """A change beyond eval.limit (item 5 of a 3-item read-out) leaves the identity alone: the
    relaunch skips the finished run."""
    first = run(smoke(tmp_path, data_root))
    rewrite_row(data_root / "math500.jsonl", 5, answer="never read")
    again = run(smoke(tmp_path, data_root))
    assert again["skipped"] and again["run_hash"] == first["run_hash"]


def test_a_changed_training_row_under_the_same_settings_is_a_new_run(tmp_path, data_root):
    """Same settings, same data folder, one training answer rewritten: the training rows' digest alone
    tells the runs apart (new run hash and folder, the relaunch not skipped, the old run untouched)."""
    (data_root / "math_train.jsonl").write_text(
        "".join((need_data("math_train.jsonl") / "math_train.jsonl").read_text().splitlines(True)[:4]))
    train = ("data.name=math_train", "data.train_file=math_train.jsonl")
    first = run(smoke(tmp_path, data_root, *train))
    rewrite_row(data_root / "math_train.jsonl", 0, answer="a changed answer")
    second = run(smoke(tmp_path, data_root, *train))
    assert not second.get("skipped") and second["run_dir"] != first["run_dir"]
    assert second["settings_hash"] == first["settings_hash"] and second["run_hash"] != first["run_hash"]
    digests = [json.loads((Path(r["run_dir"]) / "run.json").read_text())["inputs"]["train"]["sha256"]
               for r in (first, second)]
    assert digests[0] != digests[1]
    assert store.verify_manifest(first["run_dir"]) == []
    assert run(smoke(tmp_path, data_root, *train))["skipped"]  # unchanged since: the second run is found


def test_a_changed_training_row_is_a_new_run(tmp_path):
    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "train.steps=1", "eval=none", f"run.out_root={tmp_path}"])
    other = compose_cfg(["+arm=ra_flat", "profile=smoke", "train.steps=1", "eval=none", "data.toy_seed=1",
                         f"run.out_root={tmp_path}"])
    a, b = plan(cfg), plan(other)
    assert a.identity.inputs["train"]["sha256"] == rows_digest(a.train_rows)
    assert a.identity.inputs["train"]["sha256"] != b.identity.inputs["train"]["sha256"]
    assert a.run_dir != b.run_dir


def evaluate(tmp_path, model):
    return compose_cfg(["task=evaluate", "profile=smoke", f"model.path={model}", "eval.limit=6",
                        f"run.out_root={tmp_path}/runs"])


def test_a_changed_tokenizer_makes_a_new_read_out_of_the_checkpoint(tmp_path):
    """Seen: a task=evaluate read-out was named by the weights and config.json only; after the
    checkpoint's tokenizer changed the rerun was skipped and kept the old accuracy. Want: the
    tokenizer is part of the model input, so the rerun is a new read-out."""
    model = tmp_path / "ckpt"
    shutil.copytree(TINY_FOLDER, model)
    first = run(evaluate(tmp_path, model))
    tokenizer_config = model / "tokenizer_config.json"
    settings = json.loads(tokenizer_config.read_text())
    tokenizer_config.write_text(json.dumps({**settings, "model_max_length": 77}))
    second = run(evaluate(tmp_path, model))
    assert not second.get("skipped") and second["run_dir"] != first["run_dir"]
    files = first["inputs"]["model"]["files"]
    assert set(files) >= {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
    assert [n for n in files if files[n] != second["inputs"]["model"]["files"][n]] == ["tokenizer_config.json"]
    assert run(evaluate(tmp_path, model))["skipped"]  # unchanged inputs: the same run, skipped


def test_documentation_beside_the_weights_is_not_an_input(tmp_path):
    model = tmp_path / "ckpt"
    shutil.copytree(TINY_FOLDER, model)
    before = model_digest(model)
    (model / "README.md").write_text("notes")
    (model / ".gitattributes").write_text("*.safetensors filter=lfs")
    (model / "LICENSE").write_text("Apache-2.0")
    assert model_digest(model) == before
    (model / "generation_config.json").write_text("{}")
    assert model_digest(model)["sha256"] != before["sha256"]


def test_a_hub_id_is_the_cached_snapshot_that_is_loaded(tmp_path, monkeypatch):
    """For a hub id, the model input is the snapshot folder of the Hugging Face cache; the run loads
    from that folder, so what it digests is what it reads."""
    cache = tmp_path / "hub"
    snapshot = cache / "models--example--tiny" / "snapshots" / "0123abc"
    shutil.copytree(TINY_FOLDER, snapshot)
    (cache / "models--example--tiny" / "refs").mkdir()
    (cache / "models--example--tiny" / "refs" / "main").write_text("0123abc")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "model.path=null", "model.hub_id=example/tiny",
                       "train.steps=1", "eval.limit=2", f"run.out_root={tmp_path}/runs"])
    p = plan(cfg)
    assert p.model_folder == snapshot
    assert p.identity.inputs["model"] == {**model_digest(snapshot), "source": "example/tiny", "folder": str(snapshot)}
    info = run(cfg)
    assert info["model_source"] == "example/tiny" and info["model_digest"] == model_digest(snapshot)["sha256"]


def test_arm_and_profile_names_are_plain_folder_names():
    """Seen: runs under an arm folder starting with '.' were invisible to every reader. Want: a name
    that is not one plain path component is refused when the config is checked."""
    cfg = compose_cfg(["profile=smoke"])
    for bad in (".hidden", "..", "../up", "a/b", "/abs", "x.stale-1"):
        with pytest.raises(ConfigError, match="a plain folder name"):
            check_config(dataclasses.replace(cfg, arm=bad))
        with pytest.raises(ConfigError, match="a plain folder name"):
            check_config(dataclasses.replace(cfg, profile=dataclasses.replace(cfg.profile, name=bad)))
    check_config(dataclasses.replace(cfg, arm="my-variant.v2"))


def test_a_run_records_whether_its_data_files_are_the_canonical_ones(tmp_path, data_root):
    """The full canonical MATH-500 file: data_canonical true (run.json, and per file in the inputs); the
    6-row copy named math500.jsonl: false; the toy task reads no file with a canonical version: null."""
    from rlvr_sweep.run.plan import data_canonical
    full = tmp_path / "full"
    full.mkdir()
    shutil.copy(need_data("math500.jsonl") / "math500.jsonl", full / "math500.jsonl")
    info = run(smoke(tmp_path, full))
    saved = json.loads((Path(info["run_dir"]) / "run.json").read_text())
    assert saved["data_canonical"] is True
    assert saved["inputs"]["benchmark/math500"]["canonical"] == {str(full / "math500.jsonl"): True}
    assert data_canonical(plan(smoke(tmp_path, data_root)).identity.inputs) is False
    toy = compose_cfg(["+arm=ra_flat", "profile=smoke", f"run.out_root={tmp_path}/runs"])
    assert data_canonical(plan(toy).identity.inputs) is None


def test_the_plugins_code_is_part_of_the_run_and_its_group_never_of_its_settings():
    """Two runs alike but for their plugins' code (each module's sha256, `plugins.code_record`) are two runs
    and two groups (never pooled as seeds) with equal settings; the base read-out computed from the plugins only
    when a plugin takes part in the read-outs (#16, #20). The slow tier edits a real plugin:
    tests/examples/test_plugin_sweeps.py."""
    from rlvr_sweep.store import identify

    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke"])
    inputs = {"train": {"sha256": "t"}, "model": {"sha256": "m"}, **{f"benchmark/{b}": {"sha256": b}
                                                                    for b in cfg.eval.benchmarks}}

    def with_code(sha: str, readouts: bool = False):
        return identify(cfg, {**inputs, "plugins": {"sha256": sha, "modules": ["my_plugin"], "readouts": readouts}})

    one, two = with_code("code-1"), with_code("code-2")
    assert one.run != two.run and one.group != two.group
    assert one.settings == two.settings and one.base == two.base == identify(cfg, inputs).base
    assert with_code("code-1", readouts=True).base != with_code("code-2", readouts=True).base

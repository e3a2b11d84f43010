"""A strict results store: manifests, and a collect that includes only finished, intact,
current-schema runs, lists what it skipped and why, and refuses what would be wrong."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest

from rlvr_sweep import store
from rlvr_sweep.store import CollectError, collect, verify_manifest
from rlvr_sweep.store.manifest import manifest_bytes


def sweep_of(tmp_path, finished_run, *names):
    """A sweep root holding copies of the finished run under `names` (profile/arm/run layout)."""
    root = tmp_path / "runs"
    for name in names:
        shutil.copytree(finished_run, root / "smoke" / "ra_flat" / name)
    return root


def test_a_finished_run_is_sealed_by_its_manifest(finished_run):
    manifest = json.loads((finished_run / store.MANIFEST).read_text())["files"]
    assert set(manifest) == {"config.yaml", "run.json", "steps.parquet", "rollouts.parquet", "pairs.parquet",
                             "grades.parquet", "model/config.json", "model/generation_config.json",
                             "model/model.safetensors", "model/tokenizer.json", "model/tokenizer_config.json"}
    assert verify_manifest(finished_run) == []
    assert not (finished_run / "checkpoint.pt").exists() and not list(finished_run.glob(".*.tmp-*"))


def test_collect_takes_intact_runs_and_lists_everything_it_skipped(tmp_path, finished_run):
    root = sweep_of(tmp_path, finished_run, "good", "flipped", "no_grades", "garbage_json", "old_schema",
                    "unfinished", "good.stale-20260101-000000-1")
    data = (root / "smoke/ra_flat/flipped/steps.parquet").read_bytes()
    middle = len(data) // 2
    (root / "smoke/ra_flat/flipped/steps.parquet").write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:])
    (root / "smoke/ra_flat/no_grades/grades.parquet").unlink()
    (root / "smoke/ra_flat/garbage_json/run.json").write_text("{not json")
    table = pq.read_table(root / "smoke/ra_flat/old_schema/pairs.parquet")
    pq.write_table(table.replace_schema_metadata({b"rlvr_sweep.schema_version": b"1"}),
                   root / "smoke/ra_flat/old_schema/pairs.parquet")
    old = root / "smoke/ra_flat/old_schema"  # written whole by another version: its manifest agrees
    (old / store.MANIFEST).write_bytes(manifest_bytes(old))
    (root / "smoke/ra_flat/unfinished/DONE").unlink()

    with pytest.raises(CollectError) as err:
        collect(root)
    message = str(err.value)
    assert "5 of 6 run(s)" in message and "allow_skipped=True" in message
    out = collect(root, allow_skipped=True)
    assert out["runs"]["run_dir"].tolist() == [str(root / "smoke/ra_flat/good")]
    reasons = dict(zip(out["skipped"]["run_dir"].str.rsplit("/", n=1).str[-1], out["skipped"]["reason"]))
    assert "steps.parquet: content differs from the manifest" in reasons["flipped"]
    assert "grades.parquet: listed in the manifest but missing" in reasons["no_grades"]
    assert "garbage_json/run.json: unreadable" in reasons["garbage_json"]
    assert "pairs.parquet: written with result schema 1, this code reads 3" in reasons["old_schema"]
    assert reasons["unfinished"] == "unfinished (run.json status: finished)"  # a run.json alone proves nothing
    assert len(out["grades"]) == 8 and len(out["steps"]) == 2
    assert set(out["steps"]["paper_arm"]) == {"4"}


def test_collect_finds_runs_at_any_depth_and_says_where_it_looked(tmp_path, finished_run):
    root = sweep_of(tmp_path, finished_run, "good")
    assert len(collect(tmp_path)["runs"]) == 1  # one level too high still finds it
    assert len(collect(root / "smoke" / "ra_flat" / "good")["runs"]) == 1  # the run folder itself
    with pytest.raises(CollectError, match=f"found no run under {tmp_path / 'runs' / 'smoke'}"):
        (root / "smoke" / "ra_flat" / "good" / "run.json").rename(tmp_path / "moved.json")
        collect(root / "smoke")
    with pytest.raises(CollectError, match="no such folder"):
        collect(tmp_path / "nowhere")


def test_moved_aside_folders_are_not_runs(tmp_path, finished_run):
    root = sweep_of(tmp_path, finished_run, "good", "good.stale-20260101-000000-7")
    out = collect(root)
    assert len(out["runs"]) == 1 and len(out["skipped"]) == 0 and len(out["steps"]) == 2


def test_two_folders_with_the_same_run_are_refused_naming_both(tmp_path, finished_run):
    root = sweep_of(tmp_path, finished_run, "a", "b")
    with pytest.raises(CollectError, match="two folders hold the same run") as err:
        collect(root)
    assert str(root / "smoke/ra_flat/a") in str(err.value) and str(root / "smoke/ra_flat/b") in str(err.value)


@pytest.mark.slow
def test_collect_command_exits_non_zero_when_it_skipped_a_run(tmp_path, finished_run):
    root = sweep_of(tmp_path, finished_run, "good", "unfinished")
    info = json.loads((root / "smoke/ra_flat/unfinished/run.json").read_text())
    info["seed"] = 999
    (root / "smoke/ra_flat/unfinished/run.json").write_text(json.dumps(info))
    (root / "smoke/ra_flat/unfinished/DONE").unlink()
    cmd = [sys.executable, "-m", "rlvr_sweep.store", "collect", str(root), "--out", str(tmp_path / "out" / "sweep")]
    strict = subprocess.run(cmd, capture_output=True, text=True)
    assert strict.returncode == 2 and "unfinished (run.json status: finished)" in strict.stderr
    allowed = subprocess.run([*cmd, "--allow-skipped"], capture_output=True, text=True)
    assert allowed.returncode == 0 and "collected 1 runs" in allowed.stdout and "(1 skipped)" in allowed.stdout
    assert (tmp_path / "out" / "sweep.skipped.parquet").is_file()


def test_a_column_stored_as_text_in_one_run_and_empty_floats_in_another_is_joined(tmp_path):
    """A counterfactual arm fills `cf_pb_loser` with text; another arm leaves it empty, which parquet
    stores as null floats. Collecting both keeps every value."""
    from rlvr_sweep.store.collect import _joined
    for name, values in (("pb", ["balanced", None]), ("rg", [float("nan"), None])):
        (tmp_path / name).mkdir()
        # the rows as the step writer turns them into parquet (pandas -> pyarrow type inference)
        pd.DataFrame([{"arm": name, "step": i, "cf_pb_loser": v} for i, v in enumerate(values)]).to_parquet(
            tmp_path / name / "steps.parquet", index=False)
    types = {str(pq.read_schema(tmp_path / n / "steps.parquet").field("cf_pb_loser").type) for n in ("pb", "rg")}
    assert types == {"large_string", "double"}
    frame = _joined([pq.read_table(tmp_path / n / "steps.parquet") for n in ("pb", "rg")])
    assert list(frame["arm"]) == ["pb", "pb", "rg", "rg"] and frame["cf_pb_loser"].iloc[0] == "balanced"
    assert frame["cf_pb_loser"].iloc[1:].isna().all()


def test_a_flipped_byte_in_the_weights_is_verify_s_to_catch_a_resized_file_collect_s(tmp_path, finished_run):
    """collect hashes every table but checks the saved model's files by size (the weights are most of
    the bytes and no table is computed from them); verify hashes the weights too."""
    from rlvr_sweep.verify.integrity import run_problems

    root = sweep_of(tmp_path, finished_run, "flipped_weights", "resized_weights")
    weights = root / "smoke/ra_flat/flipped_weights/model/model.safetensors"
    data = weights.read_bytes()
    middle = len(data) // 2
    weights.write_bytes(data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1:])
    (root / "smoke/ra_flat/resized_weights/model/model.safetensors").write_bytes(data + b"\0")
    info = json.loads((root / "smoke/ra_flat/resized_weights/run.json").read_text())
    info["seed"] = 5  # another run, so both can be collected
    (root / "smoke/ra_flat/resized_weights/run.json").write_text(json.dumps(info))
    resized = root / "smoke/ra_flat/resized_weights"
    (resized / store.MANIFEST).write_bytes(manifest_bytes(resized))  # sealed as it was, then resized
    (resized / "model/model.safetensors").write_bytes(data + b"\0\0")

    out = collect(root, allow_skipped=True)
    assert out["runs"]["run_dir"].tolist() == [str(root / "smoke/ra_flat/flipped_weights")]
    assert f"model.safetensors: {len(data) + 2} bytes, the manifest says {len(data) + 1}" in out["skipped"]["reason"][0]
    assert verify_manifest(weights.parents[1], hash_model=False) == []
    problems = run_problems(weights.parents[1])
    assert any("model/model.safetensors: content differs from the manifest" in p for p in problems), problems


def test_read_table_decodes_only_the_columns_asked_for_that_the_table_has(finished_run):
    whole = store.read_table(finished_run, "rollouts")
    few = store.read_table(finished_run, "rollouts", columns=["text", "reward", "no_such_column"])
    assert set(few.columns) == {"text", "reward"}  # an absent name is no error, the others are not decoded
    pd.testing.assert_frame_equal(few[["text", "reward"]], whole[["text", "reward"]])


def test_a_failed_run_shows_its_recorded_error_where_it_is_left_out(tmp_path, finished_run):
    """Seen: the report's runs table said only `unfinished (run.json status: failed)`. Want: the error's
    first line (escaped by the report like every cell) and, for an error in plugin code, where it was raised."""
    from rlvr_sweep.analysis import load_sweep
    from rlvr_sweep.analysis.report import build_tables

    root = sweep_of(tmp_path, finished_run, "good", "failed")
    failed = root / "smoke/ra_flat/failed"
    (failed / "DONE").unlink()
    info = json.loads((failed / "run.json").read_text())
    info.update(status="failed", error="ZeroDivisionError('division by zero')\nsecond line",
                error_in="plugin my_est.credit (/home/me/my_est.py:7: return 1 / 0)")
    (failed / "run.json").write_text(json.dumps(info))
    reason = ("unfinished (run.json status: failed: ZeroDivisionError('division by zero') (plugin my_est.credit "
              "(/home/me/my_est.py:7: return 1 / 0)))")
    out = collect(root, allow_skipped=True)
    assert out["skipped"]["reason"].tolist() == [reason]
    runs_table = build_tables(load_sweep(root), only=["runs"])["runs"].markdown()
    assert f"| smoke/ra_flat/failed |  |  | {reason} |" in runs_table


def test_unfinished_runs_with_wrong_typed_run_json_fields_are_named_and_hide_nothing(tmp_path, finished_run):
    """#21: an unfinished run's run.json that is no object, or whose `error` / `error_in` is no string, is listed
    with what could be read of it; no traceback, and the good run is still collected (and reported)."""
    from rlvr_sweep.analysis import load_sweep
    from rlvr_sweep.analysis.report import build_tables

    root = sweep_of(tmp_path, finished_run, "good", "a_list", "error_a_list", "error_in_a_number")
    crafted = {"a_list": [1, 2], "error_a_list": {"status": "failed", "error": ["boom"], "error_in": "plugin x"},
               "error_in_a_number": {"status": "failed", "error": "ValueError('x')\nmore", "error_in": 7}}
    for name, info in crafted.items():
        (root / "smoke/ra_flat" / name / "DONE").unlink()
        (root / "smoke/ra_flat" / name / "run.json").write_text(json.dumps(info))
    out = collect(root, allow_skipped=True)
    assert out["runs"]["run_dir"].tolist() == [str(root / "smoke/ra_flat/good")]
    assert dict(zip(out["skipped"]["run_dir"].str.rsplit("/", n=1).str[-1], out["skipped"]["reason"])) == {
        "a_list": "unfinished (run.json status: unknown)",
        "error_a_list": "unfinished (run.json status: failed)",
        "error_in_a_number": "unfinished (run.json status: failed: ValueError('x'))"}
    assert "| smoke/ra_flat/a_list |" in build_tables(load_sweep(root), only=["runs"])["runs"].markdown()

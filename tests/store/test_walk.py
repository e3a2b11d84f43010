"""Every reader sees every run: one walker that follows symlinked folders (without looping), reads
hidden folders, tolerates folders that appear and vanish, and names what it skips; collect refuses a
run whose tables hold another run's rows, and run folders of an older schema by name."""

from __future__ import annotations

import json
import os
import shutil
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlvr_sweep import store
from rlvr_sweep.run import run
from rlvr_sweep.store import collect, walk
from rlvr_sweep.store.manifest import manifest_bytes
from tests.helpers import compose_cfg


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    """Three real finished smoke runs (seeds 1, 2, 3: distinct runs)."""
    root = tmp_path_factory.mktemp("three")
    return [run(compose_cfg(["+arm=ra_flat", "profile=smoke", "train.steps=1", "eval.limit=2", f"seed={s}",
                             f"run.out_root={root}"]))["run_dir"] for s in (1, 2, 3)]


def test_runs_under_hidden_and_symlinked_folders_are_found_and_loops_named(tmp_path, three_runs):
    """Seen: 3 finished runs, one under an arm folder named '.x', one under a symlinked folder (a
    bigger disk): collect said 'collected 1 runs', exit 0. Want: all 3, and a link loop named."""
    root, disk = tmp_path / "runs", tmp_path / "bigger_disk"
    shutil.copytree(three_runs[0], root / "smoke" / "ra_flat" / "a")
    shutil.copytree(three_runs[1], root / "smoke" / ".hidden_arm" / "b")
    shutil.copytree(three_runs[2], disk / "c")
    (root / "smoke" / "linked").symlink_to(disk)
    (disk / "loop").symlink_to(root / "smoke")  # leads back up: followed once, never in circles
    found = walk(root)
    assert [p.relative_to(root).as_posix() for p in found.runs] == ["smoke/.hidden_arm/b", "smoke/linked/c", "smoke/ra_flat/a"]
    assert [why for _, why in found.skipped] == ["a symlink to a folder already visited (a link loop or a second link)"]
    out = collect(root)
    assert len(out["runs"]) == 3 and sorted(out["runs"]["seed"]) == [1, 2, 3] and len(out["skipped"]) == 0


def test_a_reader_never_dies_while_a_writer_moves_folders(tmp_path, three_runs):
    """Seen: the plain recursive glob raised FileNotFoundError in 37 of 3,000 walks while a writer
    renamed folders (here: 201 of 300). Want: every walk completes and finds the runs that stayed put."""
    root = tmp_path / "runs"
    shutil.copytree(three_runs[0], root / "smoke" / "ra_flat" / "stays")
    moving = root / "smoke" / "ra_flat" / "moves"
    shutil.copytree(three_runs[1], moving)
    for i in range(30):  # folders to list, so the walk and the renames overlap
        (root / "smoke" / f"arm{i}" / "x").mkdir(parents=True)
    stop = threading.Event()

    def writer():
        here, there = moving, moving.with_name("moves.stale-20260101-000000-1")
        while not stop.is_set():
            os.rename(here, there)
            here, there = there, here
            (root / "smoke" / "arm3" / "x").rename(root / "smoke" / "arm3" / "y")
            (root / "smoke" / "arm3" / "y").rename(root / "smoke" / "arm3" / "x")

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        walks = [walk(root) for _ in range(200)]  # a plain recursive glob fails most of these
    finally:
        stop.set()
        thread.join()
    assert all(root / "smoke" / "ra_flat" / "stays" in w.runs for w in walks)
    assert all(why.startswith("vanished") for w in walks for _, why in w.skipped)


def rewrite_with_manifest(folder) -> None:
    (folder / store.MANIFEST).write_bytes(manifest_bytes(folder))


def test_a_table_holding_another_runs_rows_is_refused_even_with_a_fresh_manifest(tmp_path, three_runs):
    """Seen: a sealed run folder whose grades.parquet was replaced by another run's rows (manifest
    regenerated) was collected: that run's rows twice, the folder's own run absent. Want: refused,
    naming the table and whose rows it holds."""
    root = tmp_path / "runs"
    a, b = root / "smoke" / "ra_flat" / "a", root / "smoke" / "ra_flat" / "b"
    shutil.copytree(three_runs[0], a)
    shutil.copytree(three_runs[1], b)
    shutil.copy(a / "grades.parquet", b / "grades.parquet")
    rewrite_with_manifest(b)
    out = collect(root, allow_skipped=True)
    assert out["runs"]["run_dir"].tolist() == [str(a)]
    (reason,) = out["skipped"]["reason"]
    assert "grades.parquet: holds rows of another run" in reason and "this folder's run.json says" in reason
    assert set(out["grades"]["seed"]) == {1}


def test_a_row_of_another_run_inside_a_table_is_found(tmp_path, three_runs):
    root = tmp_path / "runs"
    a = root / "smoke" / "ra_flat" / "a"
    shutil.copytree(three_runs[0], a)
    table = pq.read_table(a / "steps.parquet")
    seeds = table.column("seed").to_pylist()
    seeds[-1] = 99
    table = table.set_column(table.schema.get_field_index("seed"), "seed", pa.array(seeds, table.schema.field("seed").type))
    pq.write_table(table, a / "steps.parquet")
    rewrite_with_manifest(a)
    with pytest.raises(store.CollectError, match=r"steps.parquet: holds rows of another run \(seed 99"):
        collect(root)


@pytest.mark.parametrize("table_name", ["rollouts", "grades"])
@pytest.mark.parametrize("key, foreign", [("run_hash", "00000000"), ("run_hash", "ffffffff"), ("seed", 0),
                                          ("seed", 99), ("arm", "a_arm"), ("arm", "zz_arm")])
def test_one_foreign_row_inside_a_many_row_table_is_refused(tmp_path, three_runs, table_name, key, foreign):
    """One row in the middle of a many-row table carries another run's key, sorting below the run's own
    or above it: both bounds are checked, on more than one kind of table."""
    a = tmp_path / "runs" / "smoke" / "ra_flat" / "a"
    shutil.copytree(three_runs[1], a)  # seed 2: seeds 0 and 99 sort on either side of it
    table = pq.read_table(a / f"{table_name}.parquet")
    assert table.num_rows >= 3
    values = table.column(key).to_pylist()
    own = values[0]
    assert (foreign < own) if foreign in (0, "00000000", "a_arm") else (foreign > own)
    values[table.num_rows // 2] = foreign
    field = table.schema.field(key)
    table = table.set_column(table.schema.get_field_index(key), field, pa.array(values, field.type))
    pq.write_table(table, a / f"{table_name}.parquet")
    rewrite_with_manifest(a)
    with pytest.raises(store.CollectError, match=rf"{table_name}.parquet: holds rows of another run \({key} {foreign!r}"):
        collect(tmp_path / "runs")


def test_a_run_folder_of_the_settings_only_schema_is_refused_by_name(tmp_path, three_runs):
    root = tmp_path / "runs"
    old = root / "smoke" / "ra_flat" / "old"
    shutil.copytree(three_runs[0], old)
    info = json.loads((old / store.RUN_JSON).read_text())
    info["config_hash"] = info.pop("run_hash")
    (old / store.RUN_JSON).write_text(json.dumps(info))
    rewrite_with_manifest(old)
    out = collect(root, allow_skipped=True)
    assert "written with an older result schema (runs keyed by their settings alone" in out["skipped"]["reason"][0]

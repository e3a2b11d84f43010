"""Store stage: run folders and their parquet tables (DESIGN "Results").

Each run writes `config.yaml`, `steps` / `rollouts` / `pairs` / `grades` tables, `run.json` and a
`DONE` marker into a folder named from its identity (`rundir`), one process at a time (`lock`),
sealed by a manifest of every file's size and sha256 (`manifest`); tables carry the run keys and a
schema version (`schema`, `tables`); `collect` gathers a sweep's intact runs into one DataFrame per
table (`python -m rlvr_sweep.store collect ROOT --out PREFIX`).
"""

from rlvr_sweep.store.collect import CollectError, collect, finished_run_dirs, run_folders, run_infos
from rlvr_sweep.store.identity import Identity, identify
from rlvr_sweep.store.lock import RunBusyError, run_lock
from rlvr_sweep.store.manifest import MANIFEST, verify_manifest
from rlvr_sweep.store.rundir import (
    DONE_MARKER, RUN_JSON, RUN_KEYS, UnfinishedRunError, atomic_write_bytes, atomic_write_json, checkpoint_of, code_version,
    config_dict, finish, is_finished, is_stale, mark_done, prepare_run_dir, read_run_json,
    remove_temp_files, run_dir_for, run_keys, stale_name,
)
from rlvr_sweep.store.schema import SCHEMA_VERSION, SchemaError
from rlvr_sweep.store.tables import TABLES, read_table, write_table
from rlvr_sweep.store.walk import Walk, walk

__all__ = [
    "CollectError", "DONE_MARKER", "MANIFEST", "RUN_JSON", "RUN_KEYS", "SCHEMA_VERSION", "RunBusyError", "SchemaError",
    "TABLES", "Walk", "run_folders", "walk",
    "Identity", "UnfinishedRunError", "atomic_write_bytes", "atomic_write_json", "checkpoint_of", "code_version", "collect",
    "config_dict", "finish", "identify", "finished_run_dirs", "is_finished", "is_stale", "mark_done", "prepare_run_dir",
    "read_run_json", "read_table", "remove_temp_files", "run_dir_for", "run_infos", "run_keys", "run_lock",
    "stale_name", "verify_manifest", "write_table",
]

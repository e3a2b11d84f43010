"""Store stage: run folders and their parquet tables (DESIGN "Results").

Each run writes `config.yaml`, `steps` / `rollouts` / `pairs` / `grades` tables, `run.json` and a
`DONE` marker into a folder named from its identity (`rundir`); tables carry the run keys and a
schema version (`schema`, `tables`); `collect` gathers a sweep into one DataFrame per table
(`python -m rlvr_sweep.store collect ROOT --out PREFIX`).
"""

from rlvr_sweep.store.collect import collect, finished_run_dirs, run_infos
from rlvr_sweep.store.rundir import (
    DONE_MARKER, RUN_JSON, RUN_KEYS, UnfinishedRunError, atomic_write_bytes, atomic_write_json, code_version,
    config_dict, config_hash, is_finished, mark_done, prepare_run_dir, read_run_json, run_dir_for, run_keys,
)
from rlvr_sweep.store.schema import SCHEMA_VERSION, SchemaError
from rlvr_sweep.store.tables import TABLES, read_table, write_table

__all__ = [
    "DONE_MARKER", "RUN_JSON", "RUN_KEYS", "SCHEMA_VERSION", "SchemaError", "TABLES", "UnfinishedRunError",
    "atomic_write_bytes", "atomic_write_json", "code_version", "collect", "config_dict", "config_hash",
    "finished_run_dirs", "is_finished", "mark_done", "prepare_run_dir", "read_run_json", "read_table", "run_dir_for",
    "run_infos", "run_keys", "write_table",
]

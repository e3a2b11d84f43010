"""The result tables' schemas, in one place, checked when a table is written and when it is read.

Every table carries the run keys (arm, horizon, seed, run_hash) and the paper arm as columns, so a sweep's files
concatenate into one table with a single pyarrow dataset scan. The schema version is stored in
each parquet file's metadata; a file from a newer version is refused with a clear message, and
files from older versions are read when their required columns are present.
"""

from __future__ import annotations

SCHEMA_VERSION = 3  # 3: `run_hash` (settings, data and model) replaces `config_hash` (settings only)
# 2: tables carry `paper_arm`, `rollout_cap`, `readout_cap`; `all_cap` became `capped_unboxed`
METADATA_KEY = b"rlvr_sweep.schema_version"
RUN_KEYS = ("arm", "horizon", "seed", "run_hash")  # run_hash: the run's identity (store.identity)
# the columns every table carries: paper_arm labels arm + horizon; rollout_cap and readout_cap are the
# lengths a run actually used, in its profile's tokens (horizon is in paper tokens)
TABLE_KEYS = (*RUN_KEYS, "paper_arm", "rollout_cap", "readout_cap")

# table -> columns every row must have (more columns are allowed)
REQUIRED_COLUMNS = {
    "steps": (*TABLE_KEYS, "step", "question_id", "rewards", "mean_reward", "active", "std", "action", "grad_norm",
              "gen_tokens", "prefill_tokens", "padded_prefill_tokens", "untrimmed_steps", "bwd_out_tokens",
              "bwd_full_tokens", "seconds"),
    "rollouts": (*TABLE_KEYS, "step", "index", "k", "b", "question_id", "gold", "prefix_len", "length", "reward",
                 "correct", "finished", "capped", "text", "first_box_token", "audit_prefix_text"),
    "pairs": (*TABLE_KEYS, "step", "k", "category", "tau", "pl0", "pl1", "l0", "l1", "r0", "r1",
              "stage1_leaf_tokens", "stage2_generated"),
    "grades": (*TABLE_KEYS, "phase", "benchmark", "source", "item_id", "length", "finished", "capped", "has_box",
               "capped_unboxed", "inc_trunc", "extracted", "gold", "correct", "response"),
}


class SchemaError(ValueError):
    """A table lacks required columns or was written by a newer schema version."""


def check_columns(table: str, columns, where: str) -> None:
    if table not in REQUIRED_COLUMNS:
        raise SchemaError(f"unknown table {table!r}; valid: {sorted(REQUIRED_COLUMNS)}")
    missing = [c for c in REQUIRED_COLUMNS[table] if c not in set(columns)]
    if missing:
        raise SchemaError(f"{where}: table {table!r} lacks columns {missing} (schema version {SCHEMA_VERSION})")


def check_version(metadata: dict | None, where: str) -> int:
    """The file's schema version; refuses versions newer than this code."""
    raw = (metadata or {}).get(METADATA_KEY)
    version = int(raw) if raw else 0
    if version > SCHEMA_VERSION:
        raise SchemaError(f"{where} was written with result schema {version}, newer than this rlvr_sweep's "
                          f"{SCHEMA_VERSION}; upgrade rlvr_sweep to read it")
    return version

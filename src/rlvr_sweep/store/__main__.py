"""`python -m rlvr_sweep.store collect ROOT --out PREFIX`: one parquet file per table of a sweep."""

from rlvr_sweep.io.entry import run_command
from rlvr_sweep.store.collect_files import main

if __name__ == "__main__":
    run_command("python -m rlvr_sweep.store", main)

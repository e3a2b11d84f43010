"""`python -m rlvr_sweep.data prepare | check | build-splits` (see `rlvr_sweep.data.cli`)."""

from rlvr_sweep.io.entry import run_command
from rlvr_sweep.data.cli import main

if __name__ == "__main__":
    run_command("python -m rlvr_sweep.data", main)

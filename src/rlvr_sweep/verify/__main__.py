"""`python -m rlvr_sweep.verify regrade|compare|compare-run ...` (see `rlvr_sweep.verify.cli`)."""

from rlvr_sweep.io.entry import run_command
from rlvr_sweep.verify.cli import main

if __name__ == "__main__":
    run_command("python -m rlvr_sweep.verify", main)

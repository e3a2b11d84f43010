"""`python -m rlvr_sweep.evaluation probe DONOR RECIPIENT --out DIR` (see `rlvr_sweep.evaluation.cli`)."""

from rlvr_sweep.io.entry import run_command
from rlvr_sweep.evaluation.cli import main

if __name__ == "__main__":
    run_command("python -m rlvr_sweep.evaluation", main)

"""`python -m rlvr_sweep.policy fetch-model | check-model` (see `rlvr_sweep.policy.cli`)."""

from rlvr_sweep.io.entry import run_command
from rlvr_sweep.policy.cli import main

if __name__ == "__main__":
    run_command("python -m rlvr_sweep.policy", main)

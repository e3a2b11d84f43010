"""`python -m rlvr_sweep.analysis tables|figures SWEEP_ROOT --out DIR` (see `rlvr_sweep.analysis.cli`)."""

from rlvr_sweep.io.entry import run_command
from rlvr_sweep.analysis.cli import main

if __name__ == "__main__":
    run_command("python -m rlvr_sweep.analysis", main)

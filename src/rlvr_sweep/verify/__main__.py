"""`python -m rlvr_sweep.verify regrade|compare|compare-run ...` (see `rlvr_sweep.verify.cli`)."""

import sys

if sys.argv[1:2] == ["all"] and not {"-h", "--help"} & set(sys.argv[2:]):
    from rlvr_sweep.verify.beside import Pass2Beside

    Pass2Beside.early()  # torch's imports start on the other core before this process imports the readers

from rlvr_sweep.io.entry import run_command  # noqa: E402
from rlvr_sweep.verify.cli import main  # noqa: E402

if __name__ == "__main__":
    run_command("python -m rlvr_sweep.verify", main)

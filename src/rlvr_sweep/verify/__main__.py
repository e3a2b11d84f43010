"""`python -m rlvr_sweep.verify regrade|compare|compare-run ...` (see `rlvr_sweep.verify.cli`)."""

import sys

from rlvr_sweep.verify.cli import main

if __name__ == "__main__":
    sys.exit(main())

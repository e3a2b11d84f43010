"""`python -m rlvr_sweep.evaluation probe DONOR RECIPIENT --out DIR` (see `rlvr_sweep.evaluation.cli`)."""

import sys

from rlvr_sweep.evaluation.cli import main

if __name__ == "__main__":
    sys.exit(main())

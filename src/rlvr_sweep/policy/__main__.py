"""`python -m rlvr_sweep.policy fetch-model | check-model` (see `rlvr_sweep.policy.cli`)."""

import sys

from rlvr_sweep.policy.cli import main

if __name__ == "__main__":
    sys.exit(main())

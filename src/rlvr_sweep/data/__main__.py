"""`python -m rlvr_sweep.data prepare | check | build-splits` (see `rlvr_sweep.data.cli`)."""

import sys

from rlvr_sweep.data.cli import main

if __name__ == "__main__":
    sys.exit(main())

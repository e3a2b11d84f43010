"""`python -m rlvr_sweep.data build-splits --out DIR --seed N [--data-root DIR] [--force]`."""

import sys

from rlvr_sweep.data.splits import main

if __name__ == "__main__":
    sys.exit(main())

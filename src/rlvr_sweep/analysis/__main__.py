"""`python -m rlvr_sweep.analysis tables|figures SWEEP_ROOT --out DIR` (see `rlvr_sweep.analysis.cli`)."""

import sys

from rlvr_sweep.analysis.cli import main

if __name__ == "__main__":
    sys.exit(main())

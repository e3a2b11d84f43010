"""`python -m rlvr_sweep.store collect ROOT --out PREFIX`: one parquet file per table of a sweep."""

import sys

from rlvr_sweep.store.collect_files import main

if __name__ == "__main__":
    sys.exit(main())

"""`python -m rlvr_sweep [+arm=NAME] [group=option ...] [-m key=a,b]`: train and evaluate one run per job."""

from rlvr_sweep.sweep.cli import main

if __name__ == "__main__":
    main()

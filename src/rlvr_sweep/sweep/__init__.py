"""Sweep stage: the command line, the pre-launch check of every job, and the closing summary.

`python -m rlvr_sweep` is Hydra's entrypoint made to accept the design card's line as typed
(`cli`); before a multirun launches or submits anything, `preflight` composes and checks every job;
a mistake on the line is one line (`mistakes`: a misspelt key, arm or option with the closest valid names);
`summary` prints base vs trained accuracy per run when the sweep ends (non-zero exit on failures).
"""

"""`python -m rlvr_sweep [+arm=NAME] [group=option ...] [-m key=a,b]`: train and evaluate one run per job;
`python -m rlvr_sweep status ROOT`: the state of every run of a sweep (`sweep.status_cli`);
`python -m rlvr_sweep --version`: the installed version (`sweep.cli.main`)."""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["status"]:  # neither Hydra nor torch: a quick look at a sweep
        from rlvr_sweep.io.entry import run_command
        from rlvr_sweep.sweep.status_cli import main as status

        run_command("python -m rlvr_sweep status", lambda: status(sys.argv[2:]))
    from rlvr_sweep.sweep.cli import main

    main()

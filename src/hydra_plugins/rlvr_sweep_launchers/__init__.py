"""rlvr_sweep's Hydra plugins: its launchers (`launchers`: hydra-submitit-launcher's, waiting for every job),
its sweeper (`sweeper`) and the config folders of the plugins named in RLVR_SWEEP_PLUGINS (`searchpath`)."""

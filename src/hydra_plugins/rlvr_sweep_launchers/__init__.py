"""rlvr_sweep's Hydra launchers (`launchers`): hydra-submitit-launcher's, waiting for every job."""

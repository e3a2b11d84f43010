"""rlvr_sweep: run, compare and trust many GRPO variants ("arms") across seeds."""

__version__ = "0.1.0"

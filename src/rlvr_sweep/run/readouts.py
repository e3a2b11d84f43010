"""The run's read-outs: its `eval` config unpacked into `ReadoutSettings` and the registered read-out.

Only this module turns `cfg.eval` into plain values; the evaluation stage never sees a config.
Lengths are scaled to the profile (`profile.length_scale`), as every other paper length budget.
"""

from __future__ import annotations

from rlvr_sweep.config import Config, scaled_length
from rlvr_sweep.evaluation import ReadoutSettings, get_readout


def readout_settings(cfg: Config) -> ReadoutSettings:
    e = cfg.eval
    return ReadoutSettings(
        max_new_tokens=scaled_length(e.max_new_tokens, cfg.profile.length_scale), batch_size=e.batch_size,
        schedule=e.schedule, slots=e.slots, engine=cfg.model.engine, seed=cfg.seed,
        length_scale=cfg.profile.length_scale,
    )


def read_out(cfg: Config, policy, rows: list[dict], *, benchmark: str, phase: str, grade, on_batch=None) -> list[dict]:
    """`grades` rows of one benchmark under the read-out `cfg.eval.name` names."""
    return get_readout(cfg.eval.name)(policy, rows, benchmark=benchmark, phase=phase, settings=readout_settings(cfg),
                                      grade=grade, on_batch=on_batch)

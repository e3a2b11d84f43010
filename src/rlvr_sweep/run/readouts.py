"""The run's read-outs: its `eval` config unpacked into `ReadoutSettings` and the registered read-out.

Only this module turns `cfg.eval` into plain values; the evaluation stage never sees a config.
Lengths are scaled to the profile (`profile.length_scale`), as every other paper length budget:
the read-out cap, the fork read-out's margin pass, window and minimum continuation. Logit thresholds,
batch sizes and the forks' adjacency rule are not lengths and stay as given.
"""

from __future__ import annotations

import dataclasses

from rlvr_sweep.config import Config, scaled_length
from rlvr_sweep.data import benchmark_task
from rlvr_sweep.evaluation import READOUTS, ReadoutSettings
from rlvr_sweep.reward import answering


def readout_settings(cfg: Config) -> ReadoutSettings:
    e, scale = cfg.eval, cfg.profile.length_scale
    length = lambda paper: scaled_length(paper, scale)  # noqa: E731
    return ReadoutSettings(
        max_new_tokens=length(e.max_new_tokens), batch_size=e.batch_size,
        schedule=e.schedule, slots=e.slots, engine=cfg.model.engine, seed=cfg.seed,
        length_scale=scale,
        draws=e.draws, temperature=e.temperature, top_p=e.top_p, sample_seed_offset=e.sample_seed_offset,
        margin_tokens=length(e.margin_tokens), fork_start=length(e.fork_start) if e.fork_start else 0,
        fork_end=length(e.fork_end), fork_threshold=e.fork_threshold, fork_separation=e.fork_separation,
        tie_forks=e.tie_forks, continuation_batch_size=e.continuation_batch_size,
        min_continuation=length(e.min_continuation),
    )


def read_out(cfg: Config, policy, rows: list[dict], *, benchmark: str, phase: str, grade, on_batch=None) -> list[dict]:
    """`grades` rows of one benchmark under the read-out `cfg.eval.name` names, asked and graded as the
    benchmark's task says (a task of one's own: its prompt, extraction and grader; MATH: `grade`)."""
    task = benchmark_task(benchmark)
    settings = readout_settings(cfg)
    if not task.built_in:
        answers = answering(task, cfg.grader.name)
        settings = dataclasses.replace(settings, prompt=task.prompt, extract=answers.extract,
                                       extract_strict=answers.extract_reward)
        grade = answers.grade
    return READOUTS[cfg.eval.name].fn(policy, rows, benchmark=benchmark, phase=phase, settings=settings,
                                      grade=grade, on_batch=on_batch)

"""The preflight's compositions: each job's config is what Hydra composes for it, however it is made,
and the sweeper composes again only the jobs the preflight did not check."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from hydra_plugins.rlvr_sweep_launchers.sweeper import CheckedSweeper
from rlvr_sweep.sweep import preflight
from rlvr_sweep.sweep.cli import normalize_overrides, register_configs
from tests.conftest import CONF_DIR, REPO

GRIDS = [
    ["+arm=ra_flat", "profile=smoke", "seed=42,101,7", "train.lr=1e-6,2.5e-6"],  # values only: one composition
    ["+arm=stopped_tree", "horizon=1024", "seed=42,101,7"],
    ["+arm=ra_flat,stopped_tree", "seed=1,2", "eval.limit=null,5"],  # a group swept: one composition per arm
    ["+arm=cf_grpo", "profile=smoke", "+train.extra=3", "seed=1,2"],  # an added key: Hydra composes
    ["+sweep=smoke_grid"],
    ["+arm=rloo_flat", f"hydra.searchpath=[file://{REPO / 'examples' / 'rloo' / 'conf'}]", "seed=1,2"],  # a config folder of one's own
]


def jobs_of(overrides):
    register_configs()
    return preflight.sweep_jobs(str(CONF_DIR), normalize_overrides(overrides))


@pytest.mark.parametrize("overrides", GRIDS, ids=lambda o: " ".join(o))
def test_every_job_is_composed_as_hydra_composes_it(overrides):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        jobs = jobs_of(overrides)
        made = list(preflight.job_configs(jobs))
        sample = range(0, len(jobs), max(1, len(jobs) // 8))  # a preset's 39 jobs: every 4th, first and last
        picked = sorted({*sample, len(jobs) - 1})
        hydra = [compose("config", overrides=jobs[i]) for i in picked]
    assert len(made) == len(jobs) > 1
    for job, ours, theirs in zip([jobs[i] for i in picked], [made[i] for i in picked], hydra):
        assert OmegaConf.to_yaml(ours) == OmegaConf.to_yaml(theirs), job
        assert OmegaConf.is_struct(ours) == OmegaConf.is_struct(theirs)
        assert OmegaConf.get_type(ours) is OmegaConf.get_type(theirs)


def test_values_are_converted_and_refused_as_hydra_does():
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        lr = [cfg.train.lr for cfg in preflight.job_configs(jobs_of(["+arm=ra_flat", "train.lr=1,2e-6"]))]
        assert lr == [1.0, 2e-6] and all(type(v) is float for v in lr)
        with pytest.raises(Exception, match="could not be converted to Float"):
            list(preflight.job_configs(jobs_of(["+arm=ra_flat", "train.lr=abc,1e-6"])))
        with pytest.raises(Exception, match="Could not override 'train.stpes'"):
            list(preflight.job_configs(jobs_of(["+arm=ra_flat", "train.stpes=5,6"])))


def test_the_sweeper_validates_only_jobs_the_preflight_did_not_check(monkeypatch):
    validated = []
    # (Hydra's plugin scan may load the basic sweeper's module again: patch the class ours derives from)
    monkeypatch.setattr(CheckedSweeper.__bases__[0], "validate_batch_is_legal", lambda self, batch: validated.append(list(batch)))
    monkeypatch.setattr(preflight, "CHECKED_JOBS", set())
    monkeypatch.setattr("hydra_plugins.rlvr_sweep_launchers.sweeper.CHECKED_JOBS", preflight.CHECKED_JOBS)
    checked, other = ["+arm=ra_flat", "seed=1"], ["+arm=ra_flat", "seed=2"]
    preflight.CHECKED_JOBS.add(tuple(checked))
    sweeper = object.__new__(CheckedSweeper)  # its check reads no state of the sweeper
    sweeper.validate_batch_is_legal([checked + ["hydra.sweep.dir=x"]])
    assert validated == []  # Hydra's own settings do not reach the job's config
    sweeper.validate_batch_is_legal([checked, other])
    assert validated == [[other]]
    sweeper.validate_batch_is_legal([checked + ["hydra.launcher.partition=a"], checked + ["hydra.launcher.partition=b"]])
    assert len(validated) == 2 and len(validated[1]) == 2  # a sweep over Hydra's settings: validated as Hydra does


def test_a_line_is_composed_once_within_one_preflight(monkeypatch):
    composed = []
    real = preflight._compose_with_hydra
    monkeypatch.setattr(preflight, "_compose_with_hydra", lambda overrides: composed.append(overrides) or real(overrides))
    line = normalize_overrides(["+arm=ra_flat", "profile=smoke", "seed=1,2"])
    register_configs()

    def kind_and_jobs():
        target = preflight.search_sweeper(str(CONF_DIR), line)
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return target, preflight.sweep_jobs(str(CONF_DIR), line)

    alone = kind_and_jobs()
    assert len(composed) == 2  # outside: each step composes the line's fixed part
    with preflight.one_composition_per_line():
        shared = kind_and_jobs()
        with preflight.one_composition_per_line():  # a nested block keeps the outer one's
            assert kind_and_jobs() == shared
    assert shared == alone == (None, [[*line[:2], "seed=1"], [*line[:2], "seed=2"]])
    assert composed[2:] == [["+arm=ra_flat", "profile=smoke"]]  # within: once
    kind_and_jobs()
    assert len(composed) == 5  # and after it, each step composes again

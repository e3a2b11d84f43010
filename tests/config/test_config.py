"""Every setting is checked when the config is built: ranges, choices, unknown keys, combinations."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from rlvr_sweep import config as C
from rlvr_sweep.config import ConfigError, check_config
from tests.helpers import compose_cfg, run_cli

SMOKE = ["+arm=ra_flat", "profile=smoke"]

# The settings an audit found accepted silently, with the words the error must contain.
REFUSED = {
    "train.grad_clip=-1": "train.grad_clip=-1.0: must be > 0",
    "sampler.group_size=3": "sampler.group_size=3: must be even",
    "sampler.group_size=1": "sampler.group_size=1: must be >= 2",
    "horizon.tokens=0": "horizon.tokens=0: must be >= 1",
    "sampler.top_p=2": "sampler.top_p=2.0: must lie in (0, 1]",
    "eval.batch_size=0": "eval.batch_size=0: must be >= 1",
    "eval.limit=0": "eval.limit=0: must be >= 1",
    "train.write_every=0": "train.write_every=0: must be >= 1",
    "data.limit=0": "data.limit=0: must be >= 1",
    "train.steps=-1": "train.steps=-1: must be >= 0",
    # valid: the built-in benchmarks, then any task an earlier test in this process registered
    "eval.benchmarks=[math501]": "eval.benchmarks=['math501']: unknown ['math501']; valid: ['amc23', ",
    "sampler.temperature=0": "sampler.temperature=0.0: must be > 0",
    "model.dtype=fp8": "model.dtype='fp8': must be one of ['bfloat16', 'float16', 'float32']",
}


@pytest.mark.parametrize("override", REFUSED)
def test_out_of_range_settings_are_refused_naming_key_value_and_range(override):
    with pytest.raises(ConfigError) as err:
        compose_cfg([*SMOKE, override])
    assert REFUSED[override] in str(err.value)


def test_every_problem_is_listed_at_once():
    with pytest.raises(ConfigError) as err:
        compose_cfg([*SMOKE, "train.grad_clip=-1", "eval.batch_size=0"])
    assert "train.grad_clip" in str(err.value) and "eval.batch_size" in str(err.value)


def test_unknown_keys_are_refused_naming_the_closest_settings():
    with pytest.raises(ConfigError) as err:
        compose_cfg([*SMOKE, "+train.stpes=5"])
    assert str(err.value) == "train.stpes: no such setting; did you mean train.steps?"
    with pytest.raises(ConfigError) as err:
        compose_cfg([*SMOKE, "+xyzzy=1", "+trian.steps=5"])
    assert str(err.value) == ("xyzzy: no such setting (`python -m rlvr_sweep --cfg job` lists every setting); "
                              "trian.steps: no such setting; did you mean train.steps?")


@pytest.mark.parametrize("key,said", [
    ("train.stpes", "did you mean train.steps?"),  # within its section
    ("trian.steps", "did you mean train.steps?"),  # the section misspelt
    ("trian.stpes", "did you mean train.steps?"),  # both
    ("lr", "did you mean train.lr?"),  # a setting's own name without its section
    ("sampler.k", "did you mean sampler.K?"),  # case does not count
    ("sampelr", "did you mean sampler?"),
    ("xyzzy", "(`python -m rlvr_sweep --cfg job` lists every setting)"),  # nothing close
])
def test_a_key_the_schema_lacks_names_the_closest_declared_ones(key, said):
    assert C.no_such_setting(key, C.Config) == f"{key}: no such setting" + ("; " if said.startswith("did") else " ") + said


@pytest.mark.parametrize("key", ["train.steps", "train", "estimator.params.clip", "paper_arms.512", "train.steps.x"])
def test_a_declared_key_or_one_under_a_free_mapping_is_not_said_to_be_missing(key):
    assert C.no_such_setting(key, C.Config) is None  # Hydra's own message stands (`+estimator.params.clip=` adds it)


@pytest.mark.parametrize("overrides, words", [
    (["estimator=tree_mean"], "estimator.name='tree_mean' (tree credit) with sampler.name='flat': its groups are credited by ['leaf']"),
    (["+arm=stopped_tree", "train.loss_recipe=sum_then_scale"], "needs one advantage per sequence"),
    (["reward.gate_chars=null"], "a gated reward needs gate_chars"),
    (["+arm=stopped_tree", "sampler.split_tokens=50"], "T_max must be >= T_min"),
    (["train.tail_average=[160,170]"], "starts after the last step"),
    (["+arm=stopped_tree_accum", "train.steps=6"], "not a multiple of train.accumulate_questions=4"),
    (["task=evaluate", "model.path=null"], "task=evaluate reads out a checkpoint: set model.path"),
    (["eval.schedule=refill"], "eval.schedule=refill needs model.engine=static or vllm"),
    (["eval=fork3", "eval.fork_start=64"], "fork3 needs fork_start < fork_end <= margin_tokens"),
    (["eval=fork3", "eval.margin_tokens=32"], "eval.fork_end=64, eval.margin_tokens=32"),
    (["profile.length_scale=0.015625"], "at profile.length_scale=0.015625 give the fork window [1, 1) in tokens"),
])
def test_settings_that_cannot_go_together(overrides, words):
    base = ["profile=smoke"] if overrides[0].startswith("+arm") else SMOKE
    with pytest.raises(ConfigError) as err:
        compose_cfg([*base, *overrides])
    assert words in str(err.value)


def test_check_config_guards_configs_built_in_python():
    cfg = C.Config()
    cfg.train.grad_clip = -1.0
    with pytest.raises(ConfigError, match="train.grad_clip"):
        check_config(cfg)
    assert check_config(C.Config()) is not None


def test_every_setting_declares_what_it_may_hold():
    """Every field that is not a plain flag (or the paper-arm label) carries at least one rule."""
    def walk(cls, prefix=""):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(f.default_factory) if f.default_factory is not dataclasses.MISSING else False:
                yield from walk(f.default_factory, prefix + f.name + ".")
            elif hints[f.name] is not bool and f.name not in ("paper_arms", "params"):  # params: the option's
                yield prefix + f.name, f.metadata.get("rules", ())
    missing = [key for key, rules in walk(C.Config) if not rules]
    assert missing == []


def test_names_of_choices_live_in_their_registries_only():
    """The schema keeps no copy of a registry's names: every choice is checked against its registry
    (`run.choices`), so an option added to a registry is a valid setting at once."""
    from rlvr_sweep.run.choices import CHOICES

    copies = [n for n in dir(C.schema) if n.endswith("_NAMES") and n != "DTYPE_NAMES"]
    assert copies == []
    for group, key, registry in CHOICES:
        with pytest.raises(ConfigError, match=rf"{group}.{key}='nope': unknown {registry.what}; valid: "):
            compose_cfg([*SMOKE, f"{group}.{key}=nope"])


def test_bookkeeping_settings_do_not_change_the_run_identity():
    from tests.helpers import run_dir_of, run_hash_of as run_hash

    run_dir_for = run_dir_of
    base = compose_cfg(SMOKE)
    same = compose_cfg([*SMOKE, "train.write_every=3", "train.checkpoint_every=7", "run.out_root=elsewhere",
                        "run.on_unfinished=error", "run.wait_for_lock=true", "data.root=/data",
                        "logger=[csv,tensorboard,wandb]", "train.save_model=false"])
    assert run_hash(base) == run_hash(same) and run_dir_for(same).name == run_dir_for(base).name
    for changed in ("train.lr=3e-5", "eval.batch_size=16", "train.num_threads=2", "seed=7"):
        assert run_hash(compose_cfg([*SMOKE, changed])) != run_hash(base), changed


@pytest.mark.slow
def test_a_bad_setting_stops_a_single_run_with_one_line_before_writing(tmp_path):
    proc = run_cli([*SMOKE, "train.grad_clip=-1", "run.out_root=runs"], cwd=tmp_path)
    assert proc.returncode == 2
    assert "ConfigError: invalid config: train.grad_clip=-1.0: must be > 0" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_sweep_with_a_bad_setting_is_not_launched(tmp_path):
    proc = run_cli([*SMOKE, "train.grad_clip=-1", "run.out_root=runs", "-m", "seed=1,2"], cwd=tmp_path)
    assert proc.returncode == 2 and "Sweep not launched: job 1 of 2" in proc.stderr
    assert "train.grad_clip=-1.0: must be > 0" in proc.stderr and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_data_is_checked_before_the_model_loads(tmp_path):
    """A missing data folder is reported (one line) even though the model folder is missing too."""
    proc = run_cli(["+arm=ra_flat", "profile=smoke", "eval.benchmarks=[math500]", f"data.root={tmp_path}/nowhere",
                    f"model.path={tmp_path}/no_model", "run.out_root=runs"], cwd=tmp_path)
    assert proc.returncode == 2 and "DataError: data file not found" in proc.stderr and "math500.jsonl" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "runs").exists()

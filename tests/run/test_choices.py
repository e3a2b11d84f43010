"""Every named choice is checked against its registry, and a setting that no chosen option reads is
refused when it differs from its default (it would make a run folder that computes what another does)."""

from __future__ import annotations

import pytest

from rlvr_sweep.config import ConfigError
from rlvr_sweep.credit import ESTIMATORS
from rlvr_sweep.rollout import SAMPLERS
from tests.helpers import compose_cfg


def refused(overrides) -> str:
    with pytest.raises(ConfigError) as err:
        compose_cfg(overrides)
    return str(err.value)


def test_the_settings_a_counterfactual_arm_ignored_are_refused_by_name():
    """Seen: `+arm=cf_grpo estimator.beta=0.25 estimator.std=population estimator.zero_cont_token_mass=true
    sampler.t_min=5` composed and ran: cf credit hard-codes beta 0 and the Bessel std, fork groups skip
    the zero-mass step, cf_fork never reads t_min."""
    message = refused(["+arm=cf_grpo", "profile=smoke", "estimator.beta=0.25", "estimator.std=population",
                       "estimator.zero_cont_token_mass=true", "sampler.t_min=5"])
    for words in ("estimator.beta=0.25: no chosen option reads it (estimator 'cf_uncond' reads ['alpha', 'eps', "
                  "'hinge_weight'])", "estimator.std='population': no chosen option reads it",
                  "estimator.zero_cont_token_mass=True: no chosen option reads it",
                  "sampler.t_min=5: no chosen option reads it (sampler 'cf_fork' reads ['K', 'B', 'fork_start'"):
        assert words in message


def test_a_tree_arm_refuses_the_hinge_weight_and_options_keep_what_they_read():
    assert "estimator.hinge_weight=0.5: no chosen option reads it (estimator 'tree_mean'" in refused(
        ["+arm=stopped_tree", "estimator.hinge_weight=0.5"])
    assert "sampler.midpoint_min_len=40: no chosen option reads it (sampler 'stopped_tree'" in refused(
        ["+arm=stopped_tree", "sampler.midpoint_min_len=40"])
    compose_cfg(["+arm=midpoint_mst", "sampler.midpoint_min_len=40"])  # midpoint reads it
    compose_cfg(["+arm=rg_cf_grpo", "estimator.hinge_weight=0.3", "sampler.fork_threshold=0.4"])


def test_a_tree_sampler_reads_group_size_only_for_its_flat_warmup():
    assert "sampler.group_size=16: no chosen option reads it" in refused(["+arm=midpoint_mst", "sampler.group_size=16"])
    cfg = compose_cfg(["+arm=midpoint_mst", "sampler.group_size=16", "sampler.bifurcate_after_active=3"])
    assert cfg.sampler.group_size == 16


def test_read_out_settings_belong_to_the_read_out_that_reads_them():
    assert "eval.draws=5: no chosen option reads it (read-out 'greedy' reads none of them" in refused(
        ["+arm=ra_flat", "eval.draws=5"])
    assert "eval.slots=8: no chosen option reads it" in refused(["+arm=ra_flat", "eval.slots=8"])
    compose_cfg(["+arm=ra_flat", "eval=sampled_k3", "eval.draws=5"])
    compose_cfg(["+arm=ra_flat", "model.engine=static", "eval.schedule=refill", "eval.slots=8"])
    assert "reward.gate_chars=10: no chosen option reads it (reward 'ungated'" in refused(
        ["+arm=baseline", "reward.gate_chars=10"])


def test_an_estimator_needs_groups_it_can_credit_and_a_parameter_it_declares():
    assert "estimator.name='grpo' (leaf credit) with sampler.name='cf_fork'" in refused(["+arm=cf_grpo", "estimator=grpo"])
    assert "estimator.params has ['beta2']: not parameters of 'grpo'" in refused(["+arm=ra_flat", "+estimator.params.beta2=1"])
    shipped = [o for o in ESTIMATORS.options() if o.fn.__module__.startswith("rlvr_sweep.")]  # not a plugin's
    assert {o.name: o.kind for o in shipped} == {
        "cf_pb": "fork", "cf_rg": "fork", "cf_uncond": "fork", "clamped_prefix": "tree", "dr_grpo": "leaf",
        "grpo": "leaf", "grpo_batch_std": "batch", "tree_mean": "tree"}
    assert {o.name: o.credits for o in SAMPLERS.options()} == {
        "cf_fork": ("fork",), "flat": ("leaf",), "midpoint": ("leaf", "tree"), "root_restart": ("leaf", "tree"),
        "stopped_tree": ("leaf", "tree")}


def test_a_declared_parameter_is_bound_with_its_default_or_its_value():
    from rlvr_sweep.config.options import Option, Registry

    registry = Registry("thing", group="")  # no group: not a choice a config makes (REGISTRIES)
    option = registry.add(Option("scaled", lambda r, shape, *, eps, power=2.0: (eps, power), reads=("eps",),
                                 params={"power": 2.0}))
    cfg = compose_cfg(["+arm=ra_flat"])
    assert option.bind(cfg.estimator)(None, None) == (1e-4, 2.0)
    cfg.estimator.params = {"power": 3.0}
    assert option.bind(cfg.estimator)(None, None) == (1e-4, 3.0)
    with pytest.raises(ValueError, match="thing 'scaled' is registered twice"):
        registry.add(Option("scaled", print))


def test_a_run_and_a_sweep_refuse_an_unread_setting_themselves_before_any_folder(tmp_path):
    """`compose_cfg` checks the choices itself; a job's config is built as the entrypoint builds it (schema and
    ranges only), so `plan` (what `run` and each sweep job call) and the sweep's preflight must refuse the setting
    cf_fork never reads, naming it, before any run folder exists (#17)."""
    from hydra import compose, initialize_config_dir

    from rlvr_sweep.config import build_config, register_configs
    from rlvr_sweep.run import plan
    from rlvr_sweep.sweep import preflight
    from rlvr_sweep.sweep.cli import normalize_overrides
    from tests.conftest import CONF_DIR

    overrides = ["+arm=cf_grpo", "profile=smoke", "sampler.t_min=5", f"run.out_root={tmp_path}/runs"]
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = build_config(compose("config", overrides=normalize_overrides(overrides)))
    with pytest.raises(ConfigError, match=r"sampler.t_min=5: no chosen option reads it \(sampler 'cf_fork'"):
        plan(cfg)
    with pytest.raises(preflight.PreflightError, match=r"job 1 of 2 .*sampler.t_min=5: no chosen option reads it"):
        preflight.check_sweep(str(CONF_DIR), normalize_overrides([*overrides, "seed=1,2"]), record=False)
    assert not (tmp_path / "runs").exists()


def test_per_rollout_seeds_are_refused_with_vllms_own_sampler_and_enter_the_identity_only_when_set():
    from rlvr_sweep.config.rules import identity_dict

    said = refused(["+arm=ra_flat", "train.rollout_seeding=per_rollout", "model.engine=vllm"])
    assert "train.rollout_seeding=per_rollout draws each row from a generator of its own, which vLLM's sampler does " \
           "not take: use model.engine=reference, static or auto" in said
    assert "rollout_seeding" in refused(["+arm=ra_flat", "train.rollout_seeding=per_row"])
    stream, per_rollout = (identity_dict(compose_cfg(["+arm=ra_flat", *extra]))
                           for extra in ([], ["train.rollout_seeding=per_rollout"]))
    assert "rollout_seeding" not in stream["train"] and per_rollout["train"]["rollout_seeding"] == "per_rollout"

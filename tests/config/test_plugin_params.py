"""A plugin option's parameters are typed, ranged and checked before any folder exists; an option registered
in Python is a config option by its name alone (CONVENTIONS #20)."""

from __future__ import annotations

import pytest
import torch

from rlvr_sweep.config import ConfigError
from rlvr_sweep.config.options import Option, Param, Registry, param
from rlvr_sweep.config.rules import above, at_least, between
from rlvr_sweep.credit import ESTIMATORS, Credit, grpo_advantages, is_homogeneous
from tests.helpers import compose_cfg


@ESTIMATORS.register("t_params_clip", kind="leaf", reads=("eps",),
                     params={"clip": param(1.0, above(0)), "window": param(64, at_least(1), length=True)})
def t_params_clip(rewards, shape, *, eps, clip, window):
    adv = grpo_advantages(rewards.flatten(), eps=eps).clamp(-clip, clip).view(rewards.shape)
    return Credit(adv.clone(), adv, not is_homogeneous(rewards.flatten()))


def refused(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as err:
        compose_cfg(overrides)
    return str(err.value)


def test_a_parameter_of_the_wrong_type_or_out_of_range_is_one_line_naming_option_parameter_value_and_range():
    base = ["+arm=ra_flat", "profile=smoke", "estimator=t_params_clip"]
    assert ("estimator.params.clip='abc': must be a number (parameter 'clip' of estimator 't_params_clip', "
            "default 1.0)") in refused([*base, "estimator.params.clip=abc"])
    assert "estimator.params.clip=-1: must be > 0 (parameter 'clip' of estimator 't_params_clip'" in refused(
        [*base, "estimator.params.clip=-1"])
    assert "estimator.params.window=2.5: must be an integer" in refused([*base, "estimator.params.window=2.5"])
    assert "estimator.params.clip=True: must be a number" in refused([*base, "estimator.params.clip=true"])
    assert "estimator.params has ['clpi']: not parameters of 't_params_clip'" in refused(
        [*base, "+estimator.params.clpi=2"])
    cfg = compose_cfg([*base, "estimator.params.clip=2"])  # an int where a float is declared: a number
    assert cfg.estimator.params["clip"] == 2


def test_the_option_is_selected_by_its_registered_name_with_its_defaults_and_no_yaml_file():
    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "estimator=t_params_clip"])
    assert cfg.estimator.name == "t_params_clip"
    assert cfg.estimator.params == {"clip": 1.0, "window": 64}  # the ConfigStore node carries the defaults
    assert cfg.estimator.std == "unbiased" and cfg.estimator.eps == 1e-4  # the rest: the schema's defaults


def test_a_length_parameter_is_scaled_like_the_built_in_lengths_and_the_rest_is_not():
    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "estimator=t_params_clip", "estimator.params.clip=0.5"])
    option = ESTIMATORS["t_params_clip"]
    assert option.settings(cfg.estimator, cfg.profile.length_scale) == {"eps": 1e-4, "clip": 0.5, "window": 8}
    assert option.settings(cfg.estimator, 1.0)["window"] == 64
    credit = option.bind(cfg.estimator, 0.125)(torch.tensor([[1.0, 0.0], [0.0, 0.0]]), None)
    # GRPO gives (0.75, -0.25, -0.25, -0.25) / (0.5 + 1e-4) here; the clip keeps at most 0.5
    low = -0.25 / (0.5 + 1e-4)
    torch.testing.assert_close(credit.cont, torch.tensor([[0.5, low], [low, low]]))


def test_bare_defaults_still_declare_a_parameter_of_the_default_type():
    option = Option("bare", lambda r, s, *, power: power, params={"power": 2.0})
    assert option.params == {"power": Param(2.0)}
    assert option.param_problems("estimator", {"power": "x"}) == [
        "estimator.params.power='x': must be a number (parameter 'power' of estimator 'bare', default 2.0)"]
    assert option.param_problems("estimator", {"power": 3}) == []


@pytest.mark.parametrize("declared, message", [
    ({"p": param(-1.0, above(0))}, "parameter 'p': its default -1.0 must be > 0"),
    ({"p": param(0.5, length=True)}, "parameter 'p': a length (length=True) is an int"),
    ({"p": None}, "parameter 'p': a default of None gives it no type"),
])
def test_a_declaration_that_contradicts_itself_is_refused_when_registered(declared, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Registry("thing", group="").add(Option("x", print, params=declared))


def test_a_function_that_cannot_take_what_it_will_be_called_with_is_refused_before_any_run():
    @ESTIMATORS.register("t_params_narrow", kind="leaf", reads=("eps",), params={"clip": param(1.0, between(0, 5))})
    def narrow(rewards, shape, *, eps):  # forgot `clip`
        return None

    text = refused(["+arm=ra_flat", "profile=smoke", "estimator=t_params_narrow"])
    assert "estimator.name='t_params_narrow': 't_params_narrow' (tests.config.test_plugin_params." in text
    assert "is called with ['clip']" in text and "add them to its signature" in text


def test_the_same_function_imported_twice_under_two_module_names_is_one_option():
    registry = Registry("thing", group="")

    def make():
        def twin(rewards, shape):
            return rewards
        return twin

    first, second = make(), make()  # same code object's file and qualified name, two function objects
    registry.add(Option("twin", first))
    registry.add(Option("twin", second))
    assert registry["twin"].fn is second
    with pytest.raises(ValueError, match="thing 'twin' is registered twice"):
        registry.add(Option("twin", print))

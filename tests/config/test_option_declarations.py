"""What an option declares (docs/extending.md, "What an option declares") is what it is called with: the settings it
reads (under their conditions, renamed, lengths scaled, or left to its caller), its parameters, what it receives,
and nothing its signature cannot take or requires beyond them (siblings of issue 47 item 10, each pinned)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rlvr_sweep.config.options import Option, Registry


def cfg(**values):
    return SimpleNamespace(**{"params": {}, **values})


def test_a_setting_is_read_only_under_its_condition_renamed_scaled_or_left_to_the_caller():
    def fn(texts, gold, *, alpha, horizon, coef):
        return texts

    option = Option("t_decl", fn, reads=("coef", "horizon", "cap", "scale", "spare"), lengths=("horizon",),
                    arguments={"scale": "alpha", "cap": None}, read_when={"spare": lambda c: c.use_spare})
    group = cfg(coef=0.5, horizon=512, cap=7, scale=2.0, spare=1, use_spare=False)
    assert option.reads_of(group) == ("coef", "horizon", "cap", "scale")  # `spare` only when use_spare
    assert option.reads_of(cfg(**{**vars(group), "use_spare": True}))[-1] == "spare"
    assert option.settings(group, scale=0.125) == {"coef": 0.5, "horizon": 64, "alpha": 2.0}  # cap: the caller's
    assert option.signature_problems(group, positional=2) == []


def test_a_required_argument_beyond_the_convention_is_named_and_received_ones_count_as_given():
    def needs_extra(texts, gold, extra, *, tokens):
        return texts

    plain = Option("t_extra", needs_extra)
    (problem,) = plain.signature_problems(cfg(), positional=2)
    assert "requires ['extra', 'tokens'], which it is never called with" in problem
    receiving = Option("t_extra", needs_extra, receives=("tokens",))
    (problem,) = receiving.signature_problems(cfg(), positional=2)
    assert "requires ['extra']," in problem  # `tokens` is received: given


def test_a_function_taking_keywords_takes_what_it_reads_and_one_that_does_not_is_named():
    def loose(texts, gold, **rest):
        return texts

    def strict(texts, gold):
        return texts

    group = cfg(coef=0.5)
    assert Option("t_loose", loose, reads=("coef",)).signature_problems(group, positional=2) == []
    (problem,) = Option("t_strict", strict, reads=("coef",)).signature_problems(group, positional=2)
    assert "is called with ['coef'] (what it declares it reads, its parameters and what it receives) but does not " \
           "take them" in problem


def test_an_unknown_receive_is_refused_and_a_group_s_declared_settings_are_what_its_options_read():
    with pytest.raises(ValueError, match=r"option 't_recv': receives \['nope'\]: not among \['tokens', 'extract'\]"):
        Option("t_recv", lambda: None, receives=("nope",))
    registry = Registry("thing", group="")
    registry.add(Option("t_a", lambda: None, reads=("coef", "horizon"), lengths=("horizon",)))
    registry.add(Option("t_b", lambda: None, reads=("clip",)))
    assert registry.declared() == {"coef", "horizon", "clip"}

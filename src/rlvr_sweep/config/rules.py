"""What a setting may hold, declared beside it, and the one check that applies every declaration.

A field of the typed config is declared with `setting(default, *rules)`; `check_config(cfg)` walks
the whole config and reports every field whose value breaks a rule, as `key=value: what is allowed`
(`train.grad_clip=-1.0: must be > 0`). `identity=False` marks bookkeeping settings (where files go,
how often they are written) that do not change what a run computes, so they stay out of the run's
identity hash (`identity_dict`). `identity=WHEN_SET` marks a setting added after runs were made: it
joins the identity only when it differs from its default, so those runs keep their hashes. A key the
schema does not declare is named with the declared ones closest to it (`no_such_setting`:
`train.stpes: no such setting; did you mean train.steps?`).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import re
from dataclasses import field
from typing import Any, Callable


class ConfigError(ValueError):
    """A setting is out of range, unknown, or cannot go with another; the message names each one."""


@dataclasses.dataclass(frozen=True)
class Rule:
    ok: Callable[[Any], bool]
    allowed: str  # "must be ..." in words
    choices: tuple = ()  # for one_of: the allowed values themselves

    def __call__(self, value) -> bool:
        try:
            return bool(self.ok(value))
        except TypeError:
            return False


def at_least(low) -> Rule:
    return Rule(lambda v: v >= low, f"must be >= {low}")


def above(low) -> Rule:
    return Rule(lambda v: v > low, f"must be > {low}")


def between(low, high, *, low_open: bool = False, high_open: bool = False) -> Rule:
    left, right = "(" if low_open else "[", ")" if high_open else "]"
    return Rule(lambda v: (v > low if low_open else v >= low) and (v < high if high_open else v <= high),
                f"must lie in {left}{low}, {high}{right}")


def one_of(*choices) -> Rule:
    return Rule(lambda v: v in choices, f"must be one of {list(choices)}", tuple(choices))


def each(rule: Rule) -> Rule:
    return Rule(lambda v: all(rule(x) for x in v), f"each item {rule.allowed}")


def matches(pattern: str, words: str) -> Rule:
    compiled = re.compile(pattern)
    return Rule(lambda v: bool(compiled.fullmatch(v)), f"must be {words}")


NON_EMPTY = Rule(lambda v: isinstance(v, str) and v.strip() != "", "must be a non-empty string")
EVEN = Rule(lambda v: v % 2 == 0, "must be even")


WHEN_SET = "when_set"  # identity: part of it only when not at its default


def setting(default, *rules: Rule, identity: bool | str = True):
    """A dataclass field whose valid values are `rules` (None always passes: `Optional` fields say
    None is allowed through their type). Lists and dicts take a factory default."""
    meta = {"rules": rules, "identity": identity}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def _fields(obj, prefix: str = ""):
    """(dotted key, value, field) of every leaf setting, nested dataclasses walked."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            yield from _fields(value, key + ".")
        else:
            yield key, value, f


def range_problems(cfg) -> list[str]:
    """`key=value: allowed` for every setting that breaks one of its declared rules."""
    problems = []
    for key, value, f in _fields(cfg):
        if value is None:
            continue
        for rule in f.metadata.get("rules", ()):
            if not rule(value):
                problems.append(f"{key}={value!r}: {rule.allowed}")
                break
    return problems


def unknown_keys(node, schema, prefix: str = "") -> list[str]:
    """Keys of a composed config (a mapping) that the dataclass `schema` does not declare."""
    declared = {f.name: f for f in dataclasses.fields(schema)}
    unknown = []
    for key in node:
        if key not in declared:
            unknown.append(f"{prefix}{key}")
            continue
        child, sub = node[key], _dataclass_type(schema, key)
        if sub is not None and hasattr(child, "keys"):
            unknown += unknown_keys(child, sub, f"{prefix}{key}.")
    return unknown


def setting_names(schema, prefix: str = "") -> list[str]:
    """Every dotted key the dataclass `schema` declares, its sections too (`train`, `train.steps`, ...)."""
    names = []
    for f in dataclasses.fields(schema):
        names.append(prefix + f.name)
        sub = _dataclass_type(schema, f.name)
        if sub is not None:
            names += setting_names(sub, f"{prefix}{f.name}.")
    return names


def no_such_setting(key: str, schema) -> str | None:
    """`train.stpes: no such setting; did you mean train.steps?` for a dotted key the dataclass `schema`
    has no place for; None for a declared key or one inside a free mapping (`estimator.params.NAME`),
    where `+key=value` is the way to add it."""
    parts, node = key.split("."), schema
    for depth, part in enumerate(parts):
        fields = [f.name for f in dataclasses.fields(node)]
        if part not in fields:
            close = _nearest_settings(parts, depth, fields, schema)
            return f"{key}: no such setting" + (f"; did you mean {_either(close)}?" if close else
                                                " (`python -m rlvr_sweep --cfg job` lists every setting)")
        node = _dataclass_type(node, part)
        if node is None:  # a value or a mapping: declared, or free to add to
            return None
    return None


def _nearest_settings(parts: list[str], depth: int, fields: list[str], schema) -> list[str]:
    """The declared keys closest to `parts`, whose part at `depth` is not among its section's `fields`:
    that part corrected within its section (`train.stpes` -> train.steps, `trian.steps` -> train.steps),
    else the last part matched against every setting's own name (`lr` -> train.lr). A key's last part is a value, so a
    section is not offered for it (`lr` is not `lora`)."""
    declared = setting_names(schema)
    sections = {p.rsplit(".", 1)[0] for p in declared if "." in p}
    fixed = [".".join([*parts[:depth], name, *parts[depth + 1:]]) for name in close_names(parts[depth], fields)]
    fixed = [k for k in fixed if k in declared and not (depth == len(parts) - 1 and k in sections)]
    if fixed:
        return fixed
    by_name: dict[str, list[str]] = {}
    for k in declared:
        by_name.setdefault(k.rsplit(".", 1)[-1], []).append(k)
    return [k for name in close_names(parts[-1], by_name) for k in by_name[name]][:3]


def close_names(name: str, names) -> list[str]:
    """The valid names closest to a misspelt one, best first (`difflib.get_close_matches`: ratio >= 0.6,
    at most three), less those much further than the best (`stpes`: steps, not slots); case does not
    count (`sampler.k` -> sampler.K)."""
    lowered = {n.lower(): n for n in names}
    close = difflib.get_close_matches(name.lower(), lowered, n=3)
    ratio = [difflib.SequenceMatcher(None, name.lower(), c).ratio() for c in close]
    return [lowered[c] for c, r in zip(close, ratio) if r >= ratio[0] - 0.1]


def did_you_mean(name: str, names, prefix: str = "", suffix: str = "") -> str:
    """`did you mean a?` / `did you mean a or b?` naming the valid names closest to a misspelt one (each
    shown as `prefix + name + suffix`); "" when none is close."""
    close = [f"{prefix}{n}{suffix}" for n in close_names(name, names)]
    return f"did you mean {_either(close)}?" if close else ""


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _dataclass_type(schema, name: str):
    default = next(f for f in dataclasses.fields(schema) if f.name == name).default_factory
    if default is dataclasses.MISSING:
        return None
    sample = default()
    return type(sample) if dataclasses.is_dataclass(sample) else None


def _default(f):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def bookkeeping_keys(schema) -> set[str]:
    """Dotted keys of every setting of the dataclass `schema` declared `identity=False`."""
    out = set()

    def visit(cls, prefix: str) -> None:
        for f in dataclasses.fields(cls):
            if not f.metadata.get("identity", True):
                out.add(prefix + f.name)
            sub = _dataclass_type(cls, f.name)
            if sub is not None:
                visit(sub, f"{prefix}{f.name}.")

    visit(schema, "")
    return out


def _same_identity(value, default) -> bool:
    """A section (a dataclass) is at its default when its identity settings are; a value when it is equal."""
    if dataclasses.is_dataclass(value) and dataclasses.is_dataclass(default):
        return identity_dict(value) == identity_dict(default)
    return value == default


def identity_dict(cfg) -> dict:
    """The config as a nested dict without the settings declared `identity=False`."""
    out = {}
    for f in dataclasses.fields(cfg):
        if not f.metadata.get("identity", True):
            continue
        value = getattr(cfg, f.name)
        if f.metadata.get("identity") == WHEN_SET and _same_identity(value, _default(f)):
            continue
        out[f.name] = identity_dict(value) if dataclasses.is_dataclass(value) else copy.deepcopy(value)
    return out

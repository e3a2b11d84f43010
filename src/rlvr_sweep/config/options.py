"""Named choices and what each declares: the one registry mechanism of every stage (CONVENTIONS #4, #17).

A `Registry` maps the names of one config choice (`sampler.name`, `estimator.name`, `reward.name`, ...)
to `Option`s: a function and what it declares about itself:

- `reads`: the settings of its config group it reads (the others of the group's option-specific
  settings it ignores, so a value other than the default is refused: `run.choices`); `read_when`
  makes a read conditional (a tree sampler reads `group_size` only for its flat warmup);
- `lengths`: which of those are lengths in paper tokens (or characters), scaled by `profile.length_scale`
  when the option is bound;
- `arguments`: the function's own name for a setting where it differs (`split_tokens` -> `t_max`), or
  None for a setting the option reads that the training loop applies on its behalf (a tree sampler's
  `bifurcate_after_active` warmup);
- `params`: free parameters, for an option that needs a setting the schema lacks (set as
  `<group>.params.<name>=...`; any other key is refused): each a `Param` (`param(default, *rules,
  length=False)`: its type, taken from the default, its valid values and whether it is a length in paper
  tokens scaled by `profile.length_scale`), or a bare default (any value of the default's type);
  `param_problems` checks given values before any run folder exists;
- `receives`: what else the option is called with, beyond its convention (a reward's `tokens`: each
  rollout's token ids; `extract`: the task's answer extraction), so existing options keep their signature;
- `kind` / `credits`: what it is and what it combines with (an estimator's kind, `leaf`, `tree` or
  `fork`, must be one the sampler's groups can be credited by), and `per_token` (credit per token:
  the loss recipe must be `scale_then_sum`);
- `check`: problems of the whole config this choice makes (a gated reward without `gate_chars`).

`registry.register(name, **declared)` is a decorator, so a researcher's own module adds an option
without editing the package (`RLVR_SWEEP_PLUGINS=my_module` or `plugins=[my_module]`, docs/extending.md);
an option registered from outside the package is also stored in Hydra's `ConfigStore` as the config
option `<group>=<name>` (with its parameters' defaults), so no YAML file has to repeat its name.
`registry[name]` is the one lookup: an unknown name fails with the list of valid ones.
`option.bind(group_cfg, scale)` is the function with its settings filled in, ready for the training loop.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlvr_sweep.config.rules import Rule

BUILT_IN = "rlvr_sweep."  # the module prefix of the package's own options
RECEIVES = ("tokens", "extract")  # what an option may ask to be called with beyond its convention


@dataclass(frozen=True)
class Param:
    """A parameter of an option the schema has no field for: its default, type and valid values.

    `type` is the default's (an int default also takes no float: write 1.0 for a float parameter);
    `length`: a length in paper tokens (or characters), scaled by `profile.length_scale` when bound, as the
    built-in lengths are (an int)."""

    default: Any
    rules: tuple[Rule, ...] = ()
    length: bool = False
    doc: str = ""

    @property
    def type(self) -> type:
        return type(self.default)

    def problem(self, value) -> str | None:
        """What is wrong with `value` for this parameter ("must be ..."), or None."""
        kind = self.type
        ok_type = (isinstance(value, (int, float)) and not isinstance(value, bool)) if kind is float \
            else isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        if not ok_type:
            return f"must be {_TYPE_WORDS.get(kind, kind.__name__)}"
        for rule in self.rules:
            if not rule(value):
                return rule.allowed
        return None


_TYPE_WORDS = {float: "a number", int: "an integer", bool: "true or false", str: "a string", list: "a list",
               dict: "a mapping"}


def param(default, *rules: Rule, length: bool = False, doc: str = "") -> Param:
    """`params={"clip": param(0.2, above(0))}`: a typed, ranged parameter (see `Param`)."""
    return Param(default, tuple(rules), length, doc)


def _as_param(name: str, value) -> Param:
    out = value if isinstance(value, Param) else Param(value)
    if out.default is None:
        raise ValueError(f"parameter {name!r}: a default of None gives it no type; give a value of its type")
    if out.length and out.type is not int:
        raise ValueError(f"parameter {name!r}: a length (length=True) is an int number of paper tokens, "
                         f"not {out.default!r}")
    wrong = out.problem(out.default)
    if wrong:
        raise ValueError(f"parameter {name!r}: its default {out.default!r} {wrong}")
    return out


@dataclass(frozen=True)
class Option:
    name: str
    fn: Callable
    reads: tuple[str, ...] = ()
    read_when: dict[str, Callable[[Any], bool]] = field(default_factory=dict)  # setting -> read only if
    lengths: tuple[str, ...] = ()
    arguments: dict[str, str | None] = field(default_factory=dict)
    params: dict[str, Param] = field(default_factory=dict)  # bare defaults become `Param`s
    receives: tuple[str, ...] = ()  # of RECEIVES
    kind: str = ""
    credits: tuple[str, ...] = ()
    per_token: bool = False
    check: Callable[[Any], list[str]] | None = None  # problems of the whole config that this choice makes
    doc: str = ""
    task: Any = None  # a `data.name` option that is a task of its own: its `data.Task` (prompt, answer rules)

    def __post_init__(self):
        object.__setattr__(self, "params", {k: _as_param(k, v) for k, v in self.params.items()})
        unknown = [r for r in self.receives if r not in RECEIVES]
        if unknown:
            raise ValueError(f"option {self.name!r}: receives {unknown}: not among {list(RECEIVES)}")

    @property
    def built_in(self) -> bool:
        """Registered by the package itself (not by a plugin)."""
        module = getattr(self.fn, "__module__", None) or getattr(type(self.fn), "__module__", "")
        return module == "rlvr_sweep" or module.startswith(BUILT_IN)

    @property
    def defaults(self) -> dict:
        """{parameter: its default}."""
        return {k: p.default for k, p in self.params.items()}

    def param_problems(self, group: str, given: dict) -> list[str]:
        """One line per given parameter that breaks its declaration (option, parameter, value, allowed)."""
        problems = []
        what = "task" if self.task is not None else group
        for key, value in (given or {}).items():
            declared = self.params.get(key)
            wrong = declared.problem(value) if declared is not None else None
            if wrong:
                doc = f": {declared.doc}" if declared.doc else ""
                problems.append(f"{group}.params.{key}={value!r}: {wrong} (parameter {key!r} of {what} "
                                f"{self.name!r}{doc}, default {declared.default!r})")
        return problems

    def signature_problems(self, group_cfg, passed: tuple[str, ...] = (), positional: int = 0) -> list[str]:
        """Keyword arguments `bind` (and the caller: `passed`) would give that `fn` does not accept, and ones it
        requires that nobody gives (beyond the convention's first `positional` arguments)."""
        try:
            sig = inspect.signature(self.fn)
        except (TypeError, ValueError):
            return []
        names = [*self.settings(group_cfg), *passed, *self.receives]
        where = f"{self.fn.__module__}.{getattr(self.fn, '__qualname__', self.fn)}"
        params = list(sig.parameters.values())
        by_position = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        required = [p.name for p in [*by_position[positional:], *(p for p in params if p.kind is p.KEYWORD_ONLY)]
                    if p.default is p.empty and p.name not in names]
        problems = []
        if required:
            problems.append(f"{self.name!r} ({where}) requires {required}, which it is never called with (it "
                            f"declares it reads {list(self.reads_of(group_cfg))}, its parameters "
                            f"{sorted(self.params)} and receives {list(self.receives)}): declare them or give them "
                            "a default")
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return problems
        missing = [n for n in names if n not in sig.parameters]
        if missing:
            problems.append(f"{self.name!r} ({where}) is called with {missing} (what it declares it reads, its "
                            "parameters and what it receives) but does not take them: add them to its signature")
        return problems

    def reads_of(self, group_cfg) -> tuple[str, ...]:
        """The settings it reads under this group config (`read_when` conditions applied)."""
        return tuple(k for k in self.reads if k not in self.read_when or self.read_when[k](group_cfg))

    def settings(self, group_cfg, scale: float = 1.0) -> dict:
        """{argument name: value} of the settings it reads (lengths scaled) and its parameters."""
        from rlvr_sweep.config.schema import scaled_length

        out = {}
        for key in self.reads_of(group_cfg):
            if key in self.arguments and self.arguments[key] is None:
                continue  # read on the option's behalf by its caller
            value = getattr(group_cfg, key)
            if key in self.lengths and value is not None:
                value = scaled_length(value, scale)
            out[self.arguments.get(key, key)] = value
        given = getattr(group_cfg, "params", None) or {}
        for key, declared in self.params.items():
            value = given.get(key, declared.default)
            out[key] = scaled_length(value, scale) if declared.length and isinstance(value, int) else value
        return out

    def bind(self, group_cfg, scale: float = 1.0) -> Callable:
        """`fn` with every setting it reads filled in from the group's config."""
        return functools.partial(self.fn, **self.settings(group_cfg, scale))


REGISTRIES: list["Registry"] = []  # every registry made, in order: the choices a config can make


class Registry:
    """The options of one config choice, by name (`what`: how error messages call them)."""

    def __init__(self, what: str, group: str, key: str = "name"):
        self.what, self.group, self.key = what, group, key
        self._options: dict[str, Option] = {}
        if group:
            REGISTRIES.append(self)

    def add(self, option: Option) -> Option:
        old = self._options.get(option.name)
        if old is not None and old.fn is not option.fn and not _same_source(old.fn, option.fn):
            raise ValueError(f"{self.what} {option.name!r} is registered twice "
                             f"({old.fn.__module__} and {option.fn.__module__})")
        self._options[option.name] = option
        if not option.built_in:
            self._store_config_option(option)
        return option

    def _store_config_option(self, option: Option) -> None:
        """A plugin's option as the config option `<group>=<name>` (Hydra's ConfigStore), so selecting it
        needs no YAML file: `estimator=grpo_clip` after `@ESTIMATORS.register("grpo_clip", ...)`."""
        if self.key != "name" or not self.group:
            return  # a choice inside a group (model.engine, eval.schedule): set as a plain value
        import re
        import warnings

        from hydra.core.config_store import ConfigStore

        # a plugin that also ships a YAML option of the same name (the per-arm way, examples/rloo): Hydra then
        # merges this node as its schema, which is what it holds anyway, and warns of that merge each time
        warnings.filterwarnings("ignore", message=rf"\s*'{re.escape(self.group)}/{re.escape(option.name)}' is "
                                                  "validated against ConfigStore schema", category=UserWarning)
        node = {"name": option.name, **({"params": option.defaults} if option.params else {})}
        if option.task is not None:
            node["train_file"] = None  # a task makes its own rows
        ConfigStore.instance().store(group=self.group, name=option.name, node=node, provider="rlvr_sweep plugin")

    def register(self, name: str, **declared) -> Callable:
        """Decorator: `@ESTIMATORS.register("rloo", kind="leaf")` over the function."""
        def decorate(fn: Callable) -> Callable:
            self.add(Option(name, fn, doc=(fn.__doc__ or "").strip().split("\n")[0], **declared))
            return fn
        return decorate

    def __getitem__(self, name: str) -> Option:
        try:
            return self._options[name]
        except KeyError:
            raise ValueError(f"unknown {self.what} {name!r}; valid: {sorted(self._options)}") from None

    def __contains__(self, name) -> bool:
        return name in self._options

    def __iter__(self):
        return iter(sorted(self._options))

    def __len__(self) -> int:
        return len(self._options)

    def names(self) -> list[str]:
        return sorted(self._options)

    def options(self) -> list[Option]:
        return [self._options[n] for n in self.names()]

    def forget(self, modules: set[str]) -> None:
        """Drop the plugin options whose functions come from `modules` (another version of them is imported
        next: `plugins.versions`)."""
        for name, option in list(self._options.items()):
            if not option.built_in and getattr(option.fn, "__module__", None) in modules:
                del self._options[name]

    def plugins(self) -> list[Option]:
        """The options registered from outside the package."""
        return [o for o in self.options() if not o.built_in]

    def declared(self) -> set[str]:
        """Every setting of the group that some option declares it reads (the option-specific ones)."""
        out: set[str] = set()
        for option in self._options.values():
            out |= set(option.reads)
        return out


def _same_source(a: Callable, b: Callable) -> bool:
    """The same function imported twice (one file reached under two module names: a plugin named by its
    path in one place and by its module in another)."""
    code_a, code_b = getattr(a, "__code__", None), getattr(b, "__code__", None)
    return (code_a is not None and code_b is not None and code_a.co_filename == code_b.co_filename
            and getattr(a, "__qualname__", None) == getattr(b, "__qualname__", None))

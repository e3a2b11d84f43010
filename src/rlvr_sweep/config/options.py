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
- `params`: free parameters and their defaults, for an option that needs a setting the schema lacks
  (set as `<group>.params.<name>=...`; any other key is refused);
- `kind` / `credits`: what it is and what it combines with (an estimator's kind, `leaf`, `tree` or
  `fork`, must be one the sampler's groups can be credited by), and `per_token` (credit per token:
  the loss recipe must be `scale_then_sum`);
- `check`: problems of the whole config this choice makes (a gated reward without `gate_chars`).

`registry.register(name, **declared)` is a decorator, so a researcher's own module adds an option
without editing the package (`plugins=[my_module]`, docs/extending.md). `registry[name]` is the one
lookup: an unknown name fails with the list of valid ones. `option.bind(group_cfg, scale)` is the
function with its settings filled in, ready for the training loop.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Option:
    name: str
    fn: Callable
    reads: tuple[str, ...] = ()
    read_when: dict[str, Callable[[Any], bool]] = field(default_factory=dict)  # setting -> read only if
    lengths: tuple[str, ...] = ()
    arguments: dict[str, str | None] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    kind: str = ""
    credits: tuple[str, ...] = ()
    per_token: bool = False
    check: Callable[[Any], list[str]] | None = None  # problems of the whole config that this choice makes
    doc: str = ""

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
        return {**out, **{k: given.get(k, default) for k, default in self.params.items()}}

    def bind(self, group_cfg, scale: float = 1.0) -> Callable:
        """`fn` with every setting it reads filled in from the group's config."""
        return functools.partial(self.fn, **self.settings(group_cfg, scale))


class Registry:
    """The options of one config choice, by name (`what`: how error messages call them)."""

    def __init__(self, what: str, group: str, key: str = "name"):
        self.what, self.group, self.key = what, group, key
        self._options: dict[str, Option] = {}

    def add(self, option: Option) -> Option:
        if option.name in self._options and self._options[option.name].fn is not option.fn:
            raise ValueError(f"{self.what} {option.name!r} is registered twice "
                             f"({self._options[option.name].fn.__module__} and {option.fn.__module__})")
        self._options[option.name] = option
        return option

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

    def declared(self) -> set[str]:
        """Every setting of the group that some option declares it reads (the option-specific ones)."""
        out: set[str] = set()
        for option in self._options.values():
            out |= set(option.reads)
        return out

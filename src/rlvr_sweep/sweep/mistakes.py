"""A command line's mistake, said in one line: Hydra's composition errors flattened, and a misspelt key,
arm or option answered with the valid names closest to it.

Hydra answers `train.stpes=10` with `To append to your config use +train.stpes=10`, which the config
then refuses (`config.check_keys`: the schema declares every key); here it is
`train.stpes: no such setting; did you mean train.steps?`. A mistyped option of a config group keeps
Hydra's list of the group's options and adds the closest (`+arm=basline` -> `...; did you mean
baseline?)`). `preflight` and the entrypoint (`cli`) print these lines and exit 2.
"""

from __future__ import annotations

import re

from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from rlvr_sweep.config import Config, did_you_mean, no_such_setting


def one_line(err: BaseException) -> str:
    """Hydra's message on one line: its first line, the options it lists (comma-separated), the cause
    it wraps (`Error merging override train.lr=abc: Value 'abc' ... could not be converted to Float`), and
    for a horizon that is not an option, the setting that takes any length. A misspelt key, arm or option
    names the valid ones closest to it (`misspelt_key`, `closest_option`)."""
    said = misspelt_key(err)
    if said:
        return said
    lines = [line.strip() for line in str(err).splitlines() if line.strip()
             and not line.strip().startswith(("Config search path", "provider=", "full_key:", "object_type=",
                                               "reference_type="))]
    if not lines:
        return type(err).__name__
    if len(lines) > 1 and lines[1].startswith("Available options"):
        text = f"{lines[0]} ({lines[1].rstrip(':').lower()}: {', '.join(lines[2:])})"
    else:
        text = " ".join(lines)
    cause = err.__cause__
    if cause is not None and str(cause).strip() and str(cause).strip().splitlines()[0] not in text:
        text += f": {one_line(cause)}"
    text = closest_option(text)
    if "Could not find 'horizon/" in text:
        text += "; a rollout cap of any length: horizon.tokens=N (in paper tokens)"
    return text


_NOT_A_KEY = re.compile(r"Could not override '(?P<key>[^']+)'\.\nTo append to your config use \+"
                        r"|Could not delete from config\. '(?P<deleted>[^']+)' does not exist\.")
_LISTED = re.compile(r"Could not find '(?P<path>[^']+)' \(available options in '(?P<group>[^']+)': (?P<options>[^)]*)\)")
_UNLISTED = re.compile(r"Could not load '(?P<group>[^']+)/(?P<name>[^'/]+)'\.?")
_NOT_IN_DEFAULTS = re.compile(r"Could not override '(?P<group>[^']+)'\. No match in the defaults list\. "
                              r"To append to your default list use \+(?P=group)=(?P<name>\S+)")


def misspelt_key(err: BaseException) -> str | None:
    """`train.stpes: no such setting; did you mean train.steps?` for Hydra's `Could not override
    'train.stpes'. To append to your config use +train.stpes=5` (or `~train.stpes`) where the config has
    no place for the key: appended, it would be refused next (`config.check_keys`; a launcher, by
    Hydra's schema of it). None for any other error and for a key under a free mapping
    (`estimator.params.NAME`, `hydra.launcher.additional_parameters.NAME`), which `+` does add."""
    match = _NOT_A_KEY.match(str(err))
    key = match and (match["key"] or match["deleted"])
    if not key:
        return None
    if key.split(".")[0] != "hydra":
        return no_such_setting(key, Config) or _no_such_param(key, err.__cause__)
    cause = err.__cause__  # OmegaConf's error names the node that lacks the key
    parent, missing = getattr(cause, "parent_node", None), getattr(cause, "full_key", None)
    if not isinstance(parent, DictConfig) or OmegaConf.get_type(parent) in (dict, None) or not missing:
        return None
    section, _, name = missing.rpartition(".")
    names = [str(k) for k in parent]
    hint = did_you_mean(name, names, prefix=f"{section}.", suffix=key[len(missing):])
    return f"{key}: no such setting" + (f"; {hint}" if hint else f" ({section}'s settings: {', '.join(names)})")


def _no_such_param(key: str, cause) -> str | None:
    """`estimator.params.clp: no parameter 'clp' of estimator 'grpo_clip' (its parameters: clip); did you mean
    estimator.params.clip?` for a parameter the chosen option does not declare (a `+` would only be refused
    next); None for any other key, and for one it declares that its config node lacks (an option from a YAML
    file without it: there `+` is the way, and Hydra's hint stands)."""
    from rlvr_sweep.config.options import REGISTRIES

    parts = key.split(".")
    parent = getattr(cause, "parent_node", None)
    if len(parts) != 3 or parts[1] != "params" or not isinstance(parent, DictConfig):
        return None
    group = parent._get_parent()
    name = group.get("name") if isinstance(group, DictConfig) else None
    registry = next((r for r in REGISTRIES if r.group == parts[0] and r.key == "name"), None)
    if registry is None or not isinstance(name, str) or name not in registry:
        return None
    declared = sorted(registry[name].params)
    if parts[2] in declared:
        return None
    if not declared:
        return f"{key}: {parts[0]} {name!r} declares no parameters"
    hint = did_you_mean(parts[2], declared, prefix=f"{parts[0]}.params.")
    return (f"{key}: no parameter {parts[2]!r} of {parts[0]} {name!r} (its parameters: {', '.join(declared)})"
            + (f"; {hint}" if hint else ""))


def closest_option(text: str) -> str:
    """Hydra's one-lined message about an option its group lacks, with the options closest to it:
    `Could not find 'arm/basline' (available options in 'arm': ..., baseline, ...; did you mean baseline?)`;
    the options listed where Hydra does not (`Could not load 'logger/tensorbord'`, an element of a list
    of options) and for a group chosen without `+` whose option does not exist either (`sweep=paper_gird`)."""
    listed = _LISTED.search(text)
    if listed:
        name, options = listed["path"][len(listed["group"]) + 1:], listed["options"].split(", ")
        hint = did_you_mean(name, options)
        return text[:listed.end() - 1] + f"; {hint})" + text[listed.end():] if hint else text
    unlisted = _UNLISTED.search(text) or _NOT_IN_DEFAULTS.search(text)
    if not unlisted or not GlobalHydra.instance().is_initialized():
        return text
    group, name = unlisted["group"], unlisted["name"]
    options = GlobalHydra.instance().config_loader().get_group_options(group)
    if not options or name in options:
        return text
    hint = did_you_mean(name, options)
    listing = f"available options in '{group}': {', '.join(options)}" + (f"; {hint}" if hint else "")
    if unlisted.re is _UNLISTED:
        return f"{text[:unlisted.start()]}Could not load '{group}/{name}' ({listing}){text[unlisted.end():]}"
    return f"{text[:unlisted.end()]} ('{name}' is no option of '{group}' either: {listing}){text[unlisted.end():]}"

"""What a run chose from plugins: its choices a plugin registered, each chosen option's parameters completed,
and the environment's plugins that join the run's `plugins` setting because it uses them.
"""

from __future__ import annotations

from rlvr_sweep.config.options import REGISTRIES, Option
from rlvr_sweep.plugins.loaded import entry_of
from rlvr_sweep.plugins.loading import environment_plugins, import_plugins


def chosen_plugins(cfg) -> dict[str, Option]:
    """{"<group>.<key>": option} of every choice of `cfg` a plugin registered (its `data.name` task among
    them), and {"eval.benchmarks.<name>": its task's option} for each benchmark a plugin task added."""
    out = {}
    for registry in REGISTRIES:
        group = getattr(cfg, registry.group, None)
        name = getattr(group, registry.key, None) if group is not None else None
        if isinstance(name, str) and name in registry and not registry[name].built_in:
            out[f"{registry.group}.{registry.key}"] = registry[name]
        for option in registry.plugins():
            for bench in getattr(option.task, "benchmarks", ()) if option.task is not None else ():
                if bench in cfg.eval.benchmarks:
                    out[f"eval.benchmarks.{bench}"] = option
    return out


def complete_params(cfg):
    """Each chosen option's `params` with its declared defaults filled in, so a run's config (and identity)
    says every parameter's value whether or not it was given."""
    for registry in REGISTRIES:
        group_cfg = getattr(cfg, registry.group, None)
        name = getattr(group_cfg, registry.key, None) if group_cfg is not None else None
        if isinstance(name, str) and name in registry and registry[name].params and hasattr(group_cfg, "params"):
            group_cfg.params = {**registry[name].defaults, **(group_cfg.params or {})}
    return cfg


def resolve_plugins(cfg):
    """The environment's and the config's plugins imported; those of the environment whose options the run
    chooses put first in its `plugins` setting (each once); each chosen option's parameters completed."""
    env = environment_plugins()
    import_plugins(list(dict.fromkeys([*env, *cfg.plugins])))
    if env:
        used = [entry_of(option.fn.__module__, env) for option in chosen_plugins(cfg).values()]
        cfg.plugins = list(dict.fromkeys([*(e for e in env if e in used), *cfg.plugins]))
    return complete_params(cfg)

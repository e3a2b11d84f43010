"""The `conf/` folders of the plugins named in `RLVR_SWEEP_PLUGINS`, on Hydra's config search path.

A researcher names their plugin once, in the environment; its arms (`conf/arm/*.yaml`) and config options
are then found by every command that composes a config (a launch, `status -- ...`, `analysis diff`, the
preflight, a SLURM job) without `hydra.searchpath=[...]` on each line. The folders are found without
importing the plugin (`rlvr_sweep.plugins.conf_dirs`); the options it registers in Python are
imported by the commands themselves.
"""

from __future__ import annotations

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from rlvr_sweep.plugins import conf_dirs


class RlvrSweepPluginConfigs(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for folder in conf_dirs():
            search_path.append(provider="rlvr_sweep plugin", path=f"file://{folder}")

"""Plugins stage: a researcher's own code, named once, imported before anything is checked, and digested into
the identity (`loading`, `files`, `compiled`, `chosen`, `errors`; what a plugin imports to register options: `rlvr_sweep.extend`).

A plugin is a module (on `PYTHONPATH` or installed), a `.py` file or a package folder that registers
options (`@ESTIMATORS.register(...)`, `REWARDS`, `TASKS`, ...; docs/extending.md). It is named either in
the environment, once for every command (`RLVR_SWEEP_PLUGINS=my_pkg`, several separated by
`os.pathsep`), or per run in the `plugins` setting (an arm's YAML). The environment's plugins are imported
when a command starts, before Hydra composes anything (so their registered options are config options
and their `conf/` folders, found by `hydra_plugins/rlvr_sweep_launchers/searchpath.py`, hold arms); an
environment plugin that registered an option a run chooses joins that run's `plugins` setting
(`resolve_plugins`), so its config names it, its job processes and `verify --plugins` import it and its code
is in the run's identity, while a run that uses none of it (a paper arm) is untouched. `chosen_plugins(cfg)`
says which of a run's choices a plugin made (its estimator, reward, task, the tasks of its benchmarks), from
every registry made so far (`options.REGISTRIES`): a plugin's options can only be in a registry its import
made.

`import_plugins(entries)` imports each entry once per process and remembers its code (`files.loaded_files`:
its file, or every file under its package folder, an installed plugin's RECORD files, and the user modules it
imports by any statement, during its import or as the home of what it registers), each file's sha256 taken of
the bytes it was compiled from (`compiled`), so it is the code that runs. `code_record(entries)` is those
files as a run's identity input (`store.identity`): one digest over (module, sha256) pairs, so a plugin
moved to another folder is the same code; run.json keeps each module's file and digest.

`plugin_frame(traceback)` tells an error raised in plugin code from a bug in rlvr_sweep: the innermost
frame of the project or a plugin (library frames skipped) that lies in a plugin's file.
"""

from rlvr_sweep.plugins.chosen import chosen_plugins, complete_params, resolve_plugins
from rlvr_sweep.plugins.errors import PluginError, PluginFrame, PluginOutputError, plugin_frame
from rlvr_sweep.plugins.roots import PACKAGE_DIR, is_user_file
from rlvr_sweep.plugins.loaded import Loaded, entry_of, plugin_files
from rlvr_sweep.plugins.loading import (
    ENV, FILE_PREFIX, PluginCodeChanged, code_record, compiled_now, conf_dirs, environment_plugins, import_plugins,
    load_environment_plugins, unrecorded_code,
)

__all__ = [
    "ENV", "FILE_PREFIX", "PACKAGE_DIR", "Loaded", "PluginCodeChanged", "PluginError", "PluginFrame", "PluginOutputError", "chosen_plugins", "code_record",
    "compiled_now", "complete_params", "conf_dirs", "entry_of", "environment_plugins", "import_plugins", "is_user_file",
    "load_environment_plugins", "plugin_files", "plugin_frame", "resolve_plugins", "unrecorded_code",
]

"""Errors raised in plugin code, told from a bug in rlvr_sweep: the innermost frame of the project or a plugin
(library frames skipped) that lies in a plugin's file.
"""

from __future__ import annotations

import linecache
import os
from dataclasses import dataclass
from pathlib import Path

from rlvr_sweep.plugins.roots import PACKAGE_DIR, is_user_file
from rlvr_sweep.plugins.loaded import plugin_files


@dataclass(frozen=True)
class PluginFrame:
    module: str
    function: str
    file: str
    line: int
    source: str

    def __str__(self) -> str:
        code = f": {self.source}" if self.source else ""
        return f"{self.module}.{self.function} ({self.file}:{self.line}{code})"


def plugin_frame(tb, extra: set[str] = frozenset()) -> PluginFrame | None:
    """The plugin frame an error came from: walking from the innermost frame out, library frames skipped,
    the first frame of the project or a plugin, when it lies in a plugin file (`extra`: files of a plugin
    not yet recorded, one being imported). None when the error is rlvr_sweep's own."""
    files = {**plugin_files(), **{f: Path(f).stem for f in extra}}
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    for frame, line in reversed(frames):
        file = str(Path(frame.f_code.co_filename).resolve())
        if file in files:
            return PluginFrame(files[file], frame.f_code.co_name, file, line,
                               linecache.getline(file, line).strip())
        if file.startswith(str(PACKAGE_DIR) + os.sep):
            return None
        if is_user_file(file):  # user code that is not a recorded plugin (a test, a notebook): not ours to name
            return None
    return None


class PluginError(RuntimeError):
    """An exception raised inside a plugin's code: names the plugin's module, function and line."""

    def __init__(self, err: BaseException, frame: PluginFrame):
        self.frame = frame
        super().__init__(f"plugin {frame.module} raised {type(err).__name__}: {err} in {frame}")


class PluginOutputError(ValueError):
    """What a plugin's option returned is not what its convention asks for (a reward's NaN, a verdict that is
    not true or false): the run stops, naming the option and its function, and is recorded as failed."""

"""What this process imported as plugins: each entry's module and its source files (`files.loaded_files`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Loaded:
    """What importing one entry loaded: {module name: (file, sha256)} of its source files."""

    module: str
    files: dict[str, tuple[str, str]]


LOADED: dict[str, Loaded] = {}  # entry -> what it loaded, once per process


def entry_of(module: str, entries: list[str]) -> str | None:
    """The entry (of `entries`, imported) whose import loaded `module`, or None."""
    return next((e for e in entries if e in LOADED and module in LOADED[e].files), None)


def plugin_files() -> dict[str, str]:
    """{file: module} of every plugin file imported in this process."""
    return {file: module for loaded in LOADED.values() for module, (file, _) in loaded.files.items()}

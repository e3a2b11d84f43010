"""The command line as a user types it, made one Hydra 1.3 takes (`sweep.cli`, `sweep.status_cli`).

Stock Hydra rejects the design card's call `+arm=stopped_tree horizon=1024 -m seed=42,101,7` twice: argparse
stops at overrides placed after `-m`, and `horizon=1024` reaches a config-group override as an int.
`normalize_overrides` fixes both before Hydra parses the line: `-m` / `--multirun` may stand anywhere, and a
bare-number choice of a numerically named group is quoted (`horizon=1024` -> `horizon='1024'`,
`horizon=512,1024` -> `horizon='512','1024'`). No Hydra import here: `status` reads a line without one.
"""

from __future__ import annotations

import re
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"  # the config tree ships inside the package
MULTIRUN_FLAGS = ("-m", "--multirun")
NUMERIC_GROUPS = ("horizon",)  # config groups whose options are named by numbers
_NUMERIC_CHOICE = re.compile(r"^(?P<key>[~+]{0,2}(?:%s))=(?P<value>\d+(?:,\d+)*)$" % "|".join(NUMERIC_GROUPS))


def normalize_overrides(overrides: list[str]) -> list[str]:
    """Quote bare-number choices of numerically named groups so Hydra reads them as option names."""
    fixed = []
    for item in overrides:
        match = _NUMERIC_CHOICE.match(item)
        if match:
            quoted = ",".join(f"'{v}'" for v in match["value"].split(","))
            item = f"{match['key']}={quoted}"
        fixed.append(item)
    return fixed


def normalize_argv(argv: list[str]) -> list[str]:
    """Move a multirun flag found anywhere to the front, then normalize the overrides."""
    program, args = argv[0], argv[1:]
    multirun = [a for a in args if a in MULTIRUN_FLAGS]
    rest = [a for a in args if a not in MULTIRUN_FLAGS]
    return [program, *multirun[:1], *normalize_overrides(rest)]

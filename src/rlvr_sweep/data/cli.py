"""`python -m rlvr_sweep.data prepare | check | build-splits`: the data files from their upstream
sources, their comparison with the canonical files, and the paper's splits.

    prepare --raw DIR [--data-root DIR] [--download [--mirror URL]] [--force]   (data.prepare)
    check [--data-root DIR] [--splits-dir DIR]                                  (data.canonical)
    check --task NAME [--data-root DIR]          a task of one's own: its rows' sha256 against its own
    build-splits --out DIR --seed N [--data-root DIR] [--force]                 (data.splits)

`--data-root` defaults to `$RLVR_SWEEP_DATA`, else `data` (the training config's `data.root` default).
The four JSON Lines files already at hand (from a colleague, a shared folder) need no `prepare`: point
`--data-root` and `data.root` at their folder, then `build-splits` and `check` (docs/paper-path.md).
Exit 0 done, 1 refused (a differing file, an existing different output), 2 bad input: a malformed or
unreadable file (one line: file, line, reason), a folder that is a file, or outputs that could not be
written (a full disk: the previous files are left as they were).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rlvr_sweep.data import canonical, prepare, splits


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rlvr_sweep.data", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    root = {"default": os.environ.get("RLVR_SWEEP_DATA", "data"),
            "help": "the data folder (default: $RLVR_SWEEP_DATA or 'data')"}
    pr = sub.add_parser("prepare", help="convert the upstream files into the four JSON Lines data files")
    pr.add_argument("--raw", required=True, help="folder holding (or receiving, with --download) the upstream files, "
                                                 "under their upstream names (not the prepared *.jsonl)")
    pr.add_argument("--data-root", **root)
    pr.add_argument("--download", action="store_true", help="fetch the upstream files the raw folder lacks")
    pr.add_argument("--mirror", default=None, help="fetch the same paths from this host instead (with --download)")
    pr.add_argument("--force", action="store_true", help="overwrite data files that differ")
    c = sub.add_parser("check", help="compare a data root (and its splits) with the canonical files")
    c.add_argument("--data-root", **root)
    c.add_argument("--splits-dir", default=None, help="the splits folder (default: <data-root>/splits)")
    c.add_argument("--task", default=None, help="a task of one's own (its plugin named in RLVR_SWEEP_PLUGINS): its "
                                                "training rows and benchmarks against the sha256 it declares")
    b = sub.add_parser("build-splits", help="write math_val210, math_train_stratified, math_train_zpd")
    b.add_argument("--out", required=True, help="output folder (created if missing)")
    b.add_argument("--seed", required=True, type=int, help="seed of the val210 draw and the zpd shuffle (paper: 0)")
    b.add_argument("--data-root", **{**root, "help": "folder holding math_train.jsonl and math500.jsonl "
                                                      "(default: $RLVR_SWEEP_DATA or 'data')"})
    b.add_argument("--force", action="store_true", help="overwrite existing split files that differ")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "prepare":
        return prepare.main(args)
    if args.command == "check":
        return check_task(args.task, args.data_root) if args.task else canonical.main(args)
    if Path(args.data_root).exists() and not Path(args.data_root).is_dir():
        print(f"build-splits: error: data root {args.data_root} is a file, not a folder (--data-root)", file=sys.stderr)
        return 2
    missing = [n for n in splits.SOURCE_FILES if not (Path(args.data_root) / n).is_file()]
    if missing:
        print(f"build-splits: error: {', '.join(missing)} not found in {args.data_root} (--data-root; "
              "python -m rlvr_sweep.data prepare writes them)", file=sys.stderr)
        return 2
    return splits.build_splits_command(args)


def check_task(name: str, root: str) -> int:
    """`check --task NAME`: each set's row count and sha256, and whether it is the one the task declares.
    Exit 0: all declared ones match; 1: one differs; 2: no such task, or its rows cannot be made."""
    from rlvr_sweep.config import ConfigError
    from rlvr_sweep.plugins import ENV, load_environment_plugins
    from rlvr_sweep.data.jsonl import DataError
    from rlvr_sweep.data.tasks import TASKS, task_checksums

    try:
        load_environment_plugins()
        if name not in TASKS:
            raise ConfigError(f"no task {name!r} (tasks: {TASKS.names() or 'none'}; name its plugin in {ENV})")
        sets = task_checksums(name, root)
    except (ConfigError, DataError) as err:
        print(f"check: error: {err}", file=sys.stderr)
        return 2
    differ = 0
    for what, rows, sha, declared in sets:
        verdict = "no checksum declared" if declared is None else "ok" if declared == sha else "DIFFERS from " + declared
        differ += declared is not None and declared != sha
        print(f"{name} {what}: {rows} rows, sha256 {sha} ({verdict})")
    print(f"task {name}: {len(sets) - differ}/{len(sets)} sets as declared or undeclared"
          + (f"; {differ} differ" if differ else ""))
    return 1 if differ else 0

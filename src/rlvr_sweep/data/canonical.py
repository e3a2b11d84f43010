"""The canonical data files: the sha256 (and row count) of each prepared file and each built split the
study used, shipped with the package, and `check`, which compares a data root with them.

`canonical.json` holds, for `math_train.jsonl`, `math500.jsonl`, `gsm8k_test.jsonl` and `amc23.jsonl`,
the digests published with the study's data, and for the splits `build-splits --seed 0` writes from
them, their digests. `canonical_lines.txt.gz` holds the first 8 hex digits of each line's sha256 for
the four data files, so a file that differs is named with its first differing line; a split that
differs is compared line by line with the split rebuilt in memory from the data root's files.

`python -m rlvr_sweep.data check [--data-root DIR] [--splits-dir DIR]` prints one line per file:
`ok`, `differs` (how: row count, first differing line, or built from other sources), `missing`, or
`malformed` / `unreadable` (a file that differs and that a run could not read as it is: the reader's
one line, file, line and reason, e.g. two rows sharing an id); exit 0 when every file is canonical, 1
when one differs or is missing, 2 when one is malformed or unreadable or the data root is no folder.
A file that differs is read the way a run reads it (`benchmarks.read_data_file`), so `check` refuses
what the run would. A run records in `run.json` (`data_canonical`, and each input's `canonical`)
whether every data file it read was canonical; the analysis header says so.

The shipped digests were written by `write_canonical(data_root)` from the study's files (the digests
published with them agree).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from rlvr_sweep.config import DataConfig
from rlvr_sweep.data.benchmarks import read_data_file
from rlvr_sweep.data.jsonl import DataError, json_problem, need_folder, not_utf8, os_error_line, read_jsonl
from rlvr_sweep.data.splits import SPLIT_NAMES, SOURCE_FILES, _jsonl_bytes, build_splits
from rlvr_sweep.io import file_sha256

DATA_FILES = ("math_train.jsonl", "math500.jsonl", "gsm8k_test.jsonl", "amc23.jsonl")
SPLITS_SEED = 0
LINE_DIGITS = 8


@dataclass
class Finding:
    file: str
    status: str  # ok | differs | missing | malformed | unreadable (the last two: exit 2)
    detail: str = ""

    def line(self) -> str:
        return f"{self.file:<34} {self.status}" + (f": {self.detail}" if self.detail else "")


def _package_file(name: str) -> bytes:
    return resources.files("rlvr_sweep.data").joinpath(name).read_bytes()


@lru_cache(maxsize=1)
def canonical() -> dict:
    return json.loads(_package_file("canonical.json"))


@lru_cache(maxsize=1)
def canonical_lines() -> dict[str, list[str]]:
    out, current = {}, None
    for line in gzip.decompress(_package_file("canonical_lines.txt.gz")).decode().splitlines():
        if line.startswith("# "):
            current = out.setdefault(line[2:], [])
        else:
            current.append(line)
    return out


def line_digest(line: bytes) -> str:
    return hashlib.sha256(line.rstrip(b"\n")).hexdigest()[:LINE_DIGITS]


def is_canonical(path: Path) -> bool | None:
    """True when `path` is one of the canonical files (by name) with its content; None for a file
    that has no canonical version (a data set of one's own)."""
    path = Path(path)
    known = {**canonical()["files"], **canonical()["splits"]["files"]}
    if path.name not in known:
        return None
    return path.is_file() and file_sha256(path) == known[path.name]["sha256"]


def _first_difference(lines: list[bytes], expected: list[str]) -> str:
    for i, (line, want) in enumerate(zip(lines, expected), start=1):
        if line_digest(line) != want:
            return f"first differing line {i}"
    if len(lines) != len(expected):
        return f"the first {min(len(lines), len(expected))} lines agree"
    return "same lines, other bytes (line endings or a final newline)"


def _unusable(name: str, cfg: DataConfig) -> str | None:
    """Why a run could not read the data file `name` as it is (one line), or None."""
    try:
        read_data_file(name, cfg)
    except DataError as err:
        return str(err)
    return None


def check_file(path: Path) -> Finding:
    name = Path(path).name
    want = canonical()["files"][name]
    if not path.is_file():
        return Finding(name, "missing", f"not in {path.parent} (python -m rlvr_sweep.data prepare)")
    try:
        if file_sha256(path) == want["sha256"]:
            return Finding(name, "ok", f"{want['rows']} rows, sha256 {want['sha256'][:12]}")
        problem = _unusable(name, DataConfig(root=str(path.parent)))
        if problem:
            return Finding(name, "malformed", problem)
        lines = path.read_bytes().splitlines(keepends=True)
    except OSError as err:
        return Finding(name, "unreadable", os_error_line(err))
    rows = f"{len(lines)} rows (canonical {want['rows']})" if len(lines) != want["rows"] else f"{len(lines)} rows"
    return Finding(name, "differs", f"{rows}; {_first_difference(lines, canonical_lines()[name])}")


def _meta(path: Path) -> tuple[dict, str | None]:
    """A split's `.meta.json` ({} when absent) and what is wrong with it (one line), if anything."""
    if not path.is_file():
        return {}, None
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        return {}, not_utf8(path)
    except (ValueError, RecursionError) as err:
        return {}, f"{path}: not valid JSON ({json_problem(err)})"
    if not isinstance(info, dict):
        return {}, f"{path}: expected a JSON object, got {type(info).__name__}"
    if not isinstance(info.get("sources", {}), dict):
        return {}, f"{path}: field 'sources' is not an object"
    return info, None


def check_splits(data_root: Path, splits_dir: Path) -> list[Finding]:
    want = canonical()["splits"]
    findings, rebuilt = [], None
    for name in SPLIT_NAMES:
        file = f"{name}.jsonl"
        path = splits_dir / file
        if not path.is_file():
            findings.append(Finding(f"splits/{file}", "missing", f"not in {splits_dir} (python -m rlvr_sweep.data "
                                    f"build-splits --out {splits_dir} --seed {want['seed']})"))
            continue
        try:
            if file_sha256(path) == want["files"][file]["sha256"]:
                rows = want["files"][file]["rows"]
                findings.append(Finding(f"splits/{file}", "ok", f"{rows} rows, seed {want['seed']}"))
                continue
            info, problem = _meta(splits_dir / f"{name}.meta.json")
            problem = _unusable(file, DataConfig(root=str(data_root), splits_dir=str(splits_dir))) or problem
            if problem:
                findings.append(Finding(f"splits/{file}", "malformed", problem))
                continue
            lines = path.read_bytes().splitlines(keepends=True)
        except OSError as err:
            findings.append(Finding(f"splits/{file}", "unreadable", os_error_line(err)))
            continue
        detail = []
        if info and info.get("seed") != want["seed"]:
            detail.append(f"built with seed {info.get('seed')!r} (canonical {want['seed']})")
        other = [s for s, d in (info.get("sources") or {}).items()
                 if d != canonical()["files"].get(s, {}).get("sha256")]
        if other:
            detail.append(f"built from a non-canonical {', '.join(other)}")
        if len(lines) != want["files"][file]["rows"]:
            detail.append(f"{len(lines)} rows (canonical {want['files'][file]['rows']})")
        if not detail and all((data_root / s).is_file() for s in SOURCE_FILES):
            try:
                if rebuilt is None:
                    rebuilt = build_splits(read_jsonl(data_root / "math_train.jsonl"),
                                           read_jsonl(data_root / "math500.jsonl"), want["seed"])
                expected = [line_digest(x) for x in _jsonl_bytes(rebuilt[name]).splitlines(keepends=True)]
                detail.append(_first_difference(lines, expected) + " (against the split rebuilt from the data root)")
            except DataError as err:  # the data root's own file says why (its line above)
                detail.append(f"not compared with a rebuilt split: {err}")
        findings.append(Finding(f"splits/{file}", "differs", "; ".join(detail)))
    return findings


def check(data_root, splits_dir=None) -> list[Finding]:
    data_root = Path(data_root)
    if not data_root.is_dir():
        raise DataError(f"data root {data_root} " + ("is a file, not a folder" if data_root.exists() else
                        "is not a folder: it does not exist") + " (--data-root, or RLVR_SWEEP_DATA)")
    splits_dir = Path(splits_dir) if splits_dir else data_root / "splits"
    need_folder(splits_dir, "splits folder")
    findings = [check_file(data_root / name) for name in DATA_FILES]
    return findings + check_splits(data_root, splits_dir)


def main(args) -> int:
    try:
        findings = check(args.data_root, args.splits_dir)
    except DataError as err:
        print(f"check: error: {err}", file=sys.stderr)
        return 2
    for f in findings:
        print(f.line())
    bad = [f for f in findings if f.status != "ok"]
    unusable = [f for f in bad if f.status in ("malformed", "unreadable")]
    print(f"{len(findings) - len(bad)} of {len(findings)} files canonical"
          + (f"; {len(bad) - len(unusable)} differ or are missing" if len(bad) > len(unusable) else "")
          + (f"; {len(unusable)} malformed or unreadable (a run would refuse them)" if unusable else ""))
    return 2 if unusable else 1 if bad else 0


def write_canonical(data_root, package_dir=None) -> None:
    """Write `canonical.json` and `canonical_lines.txt.gz` from a data root holding the study's files."""
    data_root = Path(data_root)
    package_dir = Path(package_dir or Path(__file__).parent)
    files, lines = {}, []
    for name in DATA_FILES:
        body = (data_root / name).read_bytes()
        rows = body.splitlines(keepends=True)
        files[name] = {"sha256": hashlib.sha256(body).hexdigest(), "rows": len(rows)}
        lines += [f"# {name}", *(line_digest(r) for r in rows)]
    splits = build_splits(read_jsonl(data_root / "math_train.jsonl"), read_jsonl(data_root / "math500.jsonl"),
                          SPLITS_SEED)
    split_files = {}
    for name in SPLIT_NAMES:
        body = _jsonl_bytes(splits[name])
        split_files[f"{name}.jsonl"] = {"sha256": hashlib.sha256(body).hexdigest(), "rows": len(splits[name])}
    (package_dir / "canonical.json").write_text(json.dumps(
        {"files": files, "splits": {"seed": SPLITS_SEED, "files": split_files}}, indent=1, sort_keys=True) + "\n")
    (package_dir / "canonical_lines.txt.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), 9,
                                                                        mtime=0))

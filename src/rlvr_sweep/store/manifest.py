"""A finished run's manifest: the size and sha256 of every file it wrote, checked by collect and verify.

`manifest.json` is written after the run's last table, `run.json` and saved model, and before
`DONE`. It lists every regular file of the folder and its subfolders (the saved `model/` included)
except itself, `DONE`, the resumable checkpoint (removed once the run is done), temporary files and
`logs/` (run.log and the experiment loggers' files: reports, not results, and still written to when
the run finishes). `verify_manifest` reports a missing, resized or altered file, a
file the manifest does not know, and a missing or unreadable manifest.

What is checked on every read: `collect` (and so every analysis) checks every file's digest but the
saved model's, whose presence and size it checks (`hash_model=False`: the weights are most of a run's
bytes and no table is computed from them); `verify all` hashes every file, the weights included.
A flipped byte in a table is caught by both, one in the weights by verify. `collect` remembers the
digests it took between calls (`store.remembered`: keyed by a file's size, mtime, ctime, inode and
device, so any write makes the file read again); `verify` takes every digest afresh.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rlvr_sweep.io import file_sha256

MANIFEST = "manifest.json"
CHECKPOINT = "checkpoint.pt"  # a running run's resumable state (`run.checkpoint`), removed once it is done
NOT_LISTED = {MANIFEST, "DONE", CHECKPOINT}
LOGS = "logs"


MODEL = "model"  # the saved policy's folder


def _listed(run_dir: Path) -> dict[str, Path]:
    """{posix path relative to the run folder: file} of every file the manifest covers, sorted."""
    return {rel: Path(path) for rel, (path, _) in _scan(str(run_dir)).items()}


def _scan(run_dir: str) -> dict[str, tuple[str, int]]:
    """{relative posix path: (path, size)} of every file the manifest covers, sorted (one stat each)."""
    files = {}
    pending = [("", run_dir)]
    while pending:
        rel_top, top = pending.pop()
        with os.scandir(top) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                rel = f"{rel_top}{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    if not (rel_top == "" and entry.name == LOGS):
                        pending.append((rel + "/", entry.path))
                elif rel not in NOT_LISTED and entry.is_file():
                    files[rel] = (entry.path, entry.stat().st_size)
    return dict(sorted(files.items()))


def file_digest(path: Path, memo: bool = False) -> dict:
    return {"size": path.stat().st_size, "sha256": file_sha256(path, memo=memo)}


def manifest_bytes(run_dir: Path) -> bytes:
    """The manifest of a folder being sealed (the saved model's digests, just taken, are reused)."""
    files = {name: file_digest(path, memo=True) for name, path in _listed(Path(run_dir)).items()}
    return json.dumps({"files": files}, indent=2, sort_keys=True).encode()


def verify_manifest(run_dir, hash_model: bool = True, known: dict[str, dict] | None = None) -> list[str]:
    """Problems with a run folder's files against its manifest; empty when everything is intact. With
    `hash_model=False` the saved model's files are checked by size only (see the module docstring);
    `known`: {name: {"size", "sha256"}} of files the caller has just read and hashed itself."""
    known = known or {}
    run_dir = Path(run_dir)
    path = run_dir / MANIFEST
    try:
        listed = json.loads(path.read_text())["files"]
    except FileNotFoundError:
        return [f"{path}: missing (a run finished before manifests, or damaged)"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return [f"{path}: unreadable ({err})"]
    problems = []
    present = _scan(str(run_dir))
    for name, want in sorted(listed.items()):
        if name not in present:
            problems.append(f"{run_dir / name}: listed in the manifest but missing")
            continue
        file, size = present[name]
        if size != want.get("size"):
            problems.append(f"{file}: {size} bytes, the manifest says {want.get('size')}")
            continue
        if name in known:
            have = known[name]
        elif not hash_model and name.startswith(MODEL + "/"):
            continue  # present, of its size: verify hashes it
        else:
            have = file_digest(Path(file))
        if have["size"] != want.get("size"):
            problems.append(f"{file}: {have['size']} bytes, the manifest says {want.get('size')}")
        elif have["sha256"] != want.get("sha256"):
            problems.append(f"{file}: content differs from the manifest (sha256 {have['sha256'][:12]}, "
                            f"expected {str(want.get('sha256'))[:12]})")
    problems += [f"{run_dir / name}: not in the manifest" for name in present if name not in listed]
    return problems

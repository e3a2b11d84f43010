"""A finished run's manifest: the size and sha256 of every file it wrote, checked by collect and verify.

`manifest.json` is written after the run's last table, `run.json` and saved model, and before
`DONE`. It lists every regular file of the folder and its subfolders (the saved `model/` included)
except itself, `DONE`, the resumable checkpoint (removed once the run is done), temporary files and
`logs/` (run.log and the experiment loggers' files: reports, not results, and still written to when
the run finishes). `verify_manifest` reports a missing, resized or altered file, a
file the manifest does not know, and a missing or unreadable manifest.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr_sweep.io import file_sha256

MANIFEST = "manifest.json"
NOT_LISTED = {MANIFEST, "DONE", "checkpoint.pt"}
LOGS = "logs"


def _listed(run_dir: Path) -> dict[str, Path]:
    """{posix path relative to the run folder: file} of every file the manifest covers."""
    files = {}
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir)
        if (path.is_file() and rel.parts[0] != LOGS and not any(part.startswith(".") for part in rel.parts)
                and str(rel) not in NOT_LISTED):
            files[rel.as_posix()] = path
    return files


def file_digest(path: Path, memo: bool = False) -> dict:
    return {"size": path.stat().st_size, "sha256": file_sha256(path, memo=memo)}


def manifest_bytes(run_dir: Path) -> bytes:
    """The manifest of a folder being sealed (the saved model's digests, just taken, are reused)."""
    files = {name: file_digest(path, memo=True) for name, path in _listed(Path(run_dir)).items()}
    return json.dumps({"files": files}, indent=2, sort_keys=True).encode()


def verify_manifest(run_dir) -> list[str]:
    """Problems with a run folder's files against its manifest; empty when everything is intact."""
    run_dir = Path(run_dir)
    path = run_dir / MANIFEST
    try:
        listed = json.loads(path.read_text())["files"]
    except FileNotFoundError:
        return [f"{path}: missing (a run finished before manifests, or damaged)"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return [f"{path}: unreadable ({err})"]
    problems = []
    for name, want in sorted(listed.items()):
        file = run_dir / name
        if not file.is_file():
            problems.append(f"{file}: listed in the manifest but missing")
            continue
        have = file_digest(file)
        if have["size"] != want.get("size"):
            problems.append(f"{file}: {have['size']} bytes, the manifest says {want.get('size')}")
        elif have["sha256"] != want.get("sha256"):
            problems.append(f"{file}: content differs from the manifest (sha256 {have['sha256'][:12]}, "
                            f"expected {str(want.get('sha256'))[:12]})")
    problems += [f"{path}: not in the manifest" for name, path in _listed(run_dir).items() if name not in listed]
    return problems

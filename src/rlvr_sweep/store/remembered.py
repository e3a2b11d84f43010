"""What `collect` learnt of a sweep's files, remembered between calls: digests, schemas, parsed configs.

Every `collect` (and so every analysis) checks each table of each finished run against its manifest.
Hashing and parsing 40,000 small files is most of a 10,000-run collection, and the files of finished
runs do not change, so what a call learnt of a file is kept in `<root>/.rlvr_sweep/` (JSON, never
pickle) for the next one, under the file's **stamp**: its path, size, mtime, ctime, inode and device.
Any write to a file sets its ctime to the time of the write, which no user tool can set back, and a
copy or a restore is a new inode: so a changed file has a new stamp and is read and hashed again. A
file is remembered only when its last change is at least `RACY_S` seconds older than the moment it was
read (a file system with coarse timestamps could give a write just after the read the same stamp: the
"racy" case of git's index).

What is remembered: a table's sha256, the arrow schema of its footer and that it passed the footer
checks (result schema version, its rows carry the run's keys), so `store collect`'s first pass reads
no table; a run's parsed `config.yaml`, so the analysis parses no YAML. A table whose sha256 is
remembered is still decoded from disk; only its hash is not taken again. A remembered digest that the
run's manifest disputes makes `collect` read and hash that run again, so a stale or garbled cache never
refuses a good run (nor passes a damaged one).

What is not trusted to it: `verify all` hashes every file of every run, the saved model included, with
no cache; a flipped byte that a cache could hide (one written with its stamp forged by a root user) is
still caught there. `RLVR_SWEEP_REMEMBER=0` turns the cache off (every call reads every file, as
before); an unreadable or foreign cache file is ignored, and a root that cannot be written keeps none.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
import time
from pathlib import Path

import pyarrow as pa

from rlvr_sweep.io.atomic import atomic_write_bytes
from rlvr_sweep.io.digest import stamp

FOLDER = ".rlvr_sweep"
VERSION = 1
RACY_S = 2.0  # a file changed less than this long before it was read is not remembered
ENV = "RLVR_SWEEP_REMEMBER"


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def settled(st: os.stat_result, read_at: float) -> bool:
    """The file's last change is at least RACY_S older than `read_at` (time.time() before the read)."""
    return read_at - max(st.st_mtime, st.st_ctime) >= RACY_S


class Remembered:
    """One JSON file of {absolute path: [stamp, facts]} under a sweep root (`kind`: "tables", "configs").

    `get(path, st)` gives the facts remembered for the file in the state `st` describes, else None;
    `put(path, st, facts, read_at)` remembers them if the file had settled when it was read; `save()`
    writes the file when something was added (atomically; entries of files that are gone are dropped)."""

    def __init__(self, root, kind: str):
        self.path = Path(root) / FOLDER / f"{kind}.json"
        self.kind = kind
        self._entries: dict[str, list] = {}
        self._schemas: dict[str, str] = {}  # schema id -> base64 of the arrow IPC schema
        self._parsed: dict[str, pa.Schema | None] = {}
        self._seen: set[str] = set()
        self._added = False
        self._lock = threading.Lock()
        self.on = enabled()
        if self.on:
            self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("version") == VERSION and data.get("kind") == self.kind:
            entries, schemas = data.get("entries"), data.get("schemas")
            if isinstance(entries, dict) and isinstance(schemas, dict):
                self._entries, self._schemas = entries, schemas

    def get(self, path, st: os.stat_result):
        if not self.on:
            return None
        key = os.path.abspath(path)
        self._seen.add(key)
        entry = self._entries.get(key)
        if isinstance(entry, list) and len(entry) == 2 and entry[0] == stamp(st):
            return entry[1]
        return None

    def knows(self, path) -> bool:
        """Something is remembered of `path` (in some state: `get` says whether in the present one)."""
        return self.on and os.path.abspath(path) in self._entries

    def put(self, path, st: os.stat_result, facts, read_at: float) -> None:
        """Remember `facts` (JSON that reads back equal: a parsed YAML date or NaN is not remembered)."""
        if not self.on or not settled(st, read_at):
            return
        try:
            if json.loads(json.dumps(facts)) != facts:
                return
        except (TypeError, ValueError):
            return
        key = os.path.abspath(path)
        with self._lock:
            self._seen.add(key)
            self._entries[key] = [stamp(st), facts]
            self._added = True

    def schema_id(self, schema: pa.Schema) -> str:
        """An id for an arrow schema, remembered once however many files share it."""
        blob = schema.serialize().to_pybytes()
        sid = hashlib.sha256(blob).hexdigest()[:16]
        with self._lock:
            self._schemas.setdefault(sid, base64.b64encode(blob).decode())
        return sid

    def schema(self, sid: str) -> pa.Schema | None:
        if not isinstance(sid, str):
            return None
        if sid not in self._parsed:
            blob = self._schemas.get(sid)
            try:
                self._parsed[sid] = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(blob))) if blob else None
            except (TypeError, ValueError, pa.ArrowException):
                self._parsed[sid] = None
        return self._parsed[sid]

    def save(self) -> None:
        if not (self.on and self._added):
            return
        with self._lock:
            entries = {k: v for k, v in self._entries.items() if k in self._seen}
            used = {v[1].get("schema") for v in entries.values() if isinstance(v[1], dict)}
            schemas = {k: v for k, v in self._schemas.items() if k in used}
            self._added = False
        data = {"version": VERSION, "kind": self.kind, "written_at": time.time(), "entries": entries,
                "schemas": schemas}
        try:
            self.path.parent.mkdir(exist_ok=True)
            atomic_write_bytes(self.path, json.dumps(data, separators=(",", ":")).encode())
        except OSError:
            pass  # a read-only sweep keeps no cache: the next call reads every file again

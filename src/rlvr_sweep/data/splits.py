"""Deterministic MATH splits: ``math_val210``, ``math_train_stratified`` and ``math_train_zpd``.

The seed paper names three files it never publishes (``data_splits/math_val210.json``,
``math_train_stratified.json``, ``math_train_zpd.json``) and describes them only as: a 210-item
validation set "stratified 7 subjects x 5 levels x 6 items, disjoint from ``math_train.json[:500]``
and ``math500_test.json``"; a stratified training order whose first 50 / 100 rows are what
Arms 11, 18 and 19 train on; and a "7-subject Level 2-5 pool" for the ``mst_zpd_act35`` ablation.
Everything else below is our own definition, fixed here so the splits can be rebuilt bit for bit.

Command line (``python -m rlvr_sweep.data build-splits``, which runs ``main``)::

    build-splits --out DIR --seed N [--data-root DIR] [--force]

reads ``math_train.jsonl`` (12,000 rows) and ``math500.jsonl`` (500 rows) from the data root
(default: ``$RLVR_SWEEP_DATA``, else ``data``) with ``rlvr_sweep.data.read_jsonl`` and writes, for
each split, ``DIR/<name>.jsonl`` and ``DIR/<name>.meta.json``, plus ``DIR/manifest.json``.

Python API: ``build_splits(math_train_rows, math500_rows, seed)`` (pure, no I/O) returns
``{name: rows}``; ``write_splits(splits, out_dir, seed, source_checksums, force=False)`` writes
them; ``main(argv)`` does both and returns an exit status (0 written, 1 refused to overwrite,
2 bad data).

Choices (the paper is silent on all of them)
--------------------------------------------
Problem identity.  Two rows are "the same problem" when their ``problem.strip()`` strings are
equal; every disjointness rule below is by that text.  ``math_train.jsonl`` already excludes the
MATH-500 texts; the builder re-checks anyway.  One text occurs twice in ``math_train.jsonl``
(rows 2948, Geometry Level 5, and 11693, Precalculus Level 3).

Eligibility (all three splits).  A row is eligible when ``answer.strip()`` is non-empty (drops
the four rows whose solution has no braced ``\\boxed{...}``: unique_id 888, 1011, 5341, 5343),
its ``level`` is exactly ``"Level 1"`` .. ``"Level 5"`` (drops the two Geometry rows labelled
``"Level ?"``, rows 2773 and 2832), and its text is not a MATH-500 text.  ``subject`` must be one
of the seven MATH subjects (anything else is a data error).

``math_val210`` (depends on the seed).  Candidates are eligible rows with source index >= 500
whose text occurs exactly once in ``math_train.jsonl`` (so no candidate's text is among rows
0-499 or shared with any other row).  For each cell (subject in alphabetical order, then level
1..5) the candidates are sorted by source row and ``rng.sample(candidates, 6)`` draws six, with
one ``rng = random.Random(seed)`` used for all 35 cells in that order.  The output is sorted by
(subject, level, source row), not in draw order, so the file reads as a table of cells.  The
smallest cell (Number Theory Level 1) has 72 candidates, so every cell can always be filled.

``math_train_stratified`` (depends on the seed only through the val210 exclusion).  Pool: every
eligible row (rows 0-499 included) whose text is not a val210 text, keeping only the first
(lowest source row) occurrence of a text.  No cap: all pool rows are included.  Within each
(subject, level) queue rows keep source order (no shuffle), so the prefix is the same for every
seed unless a val210 draw removes one of its rows.  Order: round robin over the seven subjects in
alphabetical order (Algebra, Counting & Probability, Geometry, Intermediate Algebra, Number
Theory, Prealgebra, Precalculus); each subject keeps its own level cursor cycling 1, 2, 3, 4, 5,
1, ...  When the cursor's level queue is empty the next non-empty level (cyclically) is used and
the cursor moves past it; a subject whose queues are all empty drops out of the rotation.  So
every block of 7 rows holds one row per subject while all subjects last (the first 49 rows hold
exactly 7 per subject; the first 50 are 8 Algebra + 7 of each other subject; the first 100 are
15 Algebra, 15 Counting & Probability and 14 of each other subject), and each subject's first
five rows are Levels 1-5.  The tail, after the smallest subject (Counting & Probability) runs
out, is no longer balanced.

``math_train_zpd`` (depends on the seed).  Pool: eligible rows of Levels 2-5, in all seven
subjects, whose text is not a val210 text, first occurrence of a text only.  Each subject's rows
(in source order) are shuffled with one ``random.Random("math_train_zpd:<seed>")`` (a string
seed, hashed by ``random`` with SHA-512, so independent of PYTHONHASHSEED and of the val210
stream), subjects taken in alphabetical order; the output is the same subject round robin as
above over those shuffled lists (levels are mixed at random, not cycled).

Rows.  Each output row is a copy of the source row (all fields, unchanged) plus ``source_row``
(0-based index in ``math_train.jsonl``) and ``id`` (``str(unique_id)``, the same id
``rlvr_sweep.data.read_jsonl`` gives math_train rows).

Files.  ``<name>.jsonl`` holds one ``json.dumps(row, ensure_ascii=False, sort_keys=True)`` per
line with ``"\\n"`` endings.  ``<name>.meta.json`` records the name, seed, row count, per-subject
and per-level counts, the sha256 of each source file, the sha256 of the jsonl and the rule text
below; ``manifest.json`` lists the three splits with the checksums of both files.  Neither holds
paths or timestamps, so the same seed and sources give byte-identical files.  The seven files
are written as a set (``data.jsonl.write_files``: all into a temporary folder inside the output
folder, then renamed in), so a failure such as a full disk leaves the previous set or nothing, never
splits beside a manifest of other ones.  If any target file exists with different content, nothing
is written and the command fails naming the file(s), unless ``--force`` is given; files whose
content is already identical are left alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from collections import Counter, deque
from pathlib import Path

from rlvr_sweep.data.jsonl import DataError, need_folder, os_error_line, read_jsonl, write_files

SUBJECTS = (
    "Algebra",
    "Counting & Probability",
    "Geometry",
    "Intermediate Algebra",
    "Number Theory",
    "Prealgebra",
    "Precalculus",
)  # alphabetical: the fixed round-robin and cell order
LEVELS = (1, 2, 3, 4, 5)
ZPD_LEVELS = (2, 3, 4, 5)
VAL_PER_CELL = 6
VAL_MIN_SOURCE_ROW = 500  # val210 is disjoint from math_train[:500] (the book's 50-500-step runs)

VAL210 = "math_val210"
STRATIFIED = "math_train_stratified"
ZPD = "math_train_zpd"
SPLIT_NAMES = (VAL210, STRATIFIED, ZPD)

SOURCE_FILES = ("math_train.jsonl", "math500.jsonl")
# as published in shared/data/README.md; a mismatch only warns (the meta files record the truth)
KNOWN_SOURCE_SHA256 = {
    "math_train.jsonl": "a588ded9933680b7a3006e812049c7c221294c50e3999048138e04b088b7349d",
    "math500.jsonl": "d15f9afed3d17918a534e3b950f6efbf1a5e23421fbacf96774720e0394f538d",
}
FORMAT_VERSION = 1

_ELIGIBLE = (
    "Eligible rows of math_train.jsonl: answer.strip() non-empty; level exactly 'Level 1'..'Level 5'; "
    "problem.strip() not equal to any MATH-500 problem.strip()."
)
RULES = {
    VAL210: (
        f"{_ELIGIBLE} Candidates: eligible rows with source_row >= 500 whose problem.strip() occurs exactly once "
        "in math_train.jsonl (hence not among rows 0-499). One rng = random.Random(seed); for each cell "
        "(subject alphabetical, then level 1..5) rng.sample(candidates sorted by source_row, 6). "
        "Output sorted by (subject, level, source_row). 7 x 5 x 6 = 210 rows."
    ),
    STRATIFIED: (
        f"{_ELIGIBLE} Pool: all eligible rows (including 0-499) whose problem.strip() is not a math_val210 text; "
        "first occurrence (lowest source_row) of each text only; no cap. Order: round robin over the 7 subjects "
        "in alphabetical order; each subject has a level cursor cycling 1..5 over per-(subject, level) queues in "
        "source_row order (an empty level is skipped to the next non-empty one; an exhausted subject leaves the "
        "rotation). No shuffling."
    ),
    ZPD: (
        f"{_ELIGIBLE} Pool: eligible rows of levels 2-5 in all 7 subjects whose problem.strip() is not a "
        "math_val210 text; first occurrence of each text only. Each subject's rows (source_row order, subjects "
        "alphabetical) are shuffled by one random.Random('math_train_zpd:<seed>'); output is a round robin over "
        "the 7 subjects in alphabetical order (an exhausted subject leaves the rotation)."
    ),
}


class SplitsConflictError(FileExistsError):
    """An output file exists with different content and overwriting was not forced."""

    def __init__(self, paths: list[Path]):
        self.paths = paths
        names = ", ".join(str(p) for p in paths)
        super().__init__(
            f"refusing to overwrite {len(paths)} existing split file(s) with different content: {names} "
            "(pass --force to overwrite, or choose another --out)"
        )


# ---------------------------------------------------------------------------------------------
# building (pure)


def _text(row: dict) -> str:
    return row["problem"].strip()


def _level(row: dict) -> int | None:
    """1..5 for 'Level k', None for anything else (e.g. 'Level ?')."""
    lv = row.get("level")
    if isinstance(lv, str) and lv.startswith("Level ") and lv[6:] in {"1", "2", "3", "4", "5"}:
        return int(lv[6:])
    return None


def _out_row(row: dict, index: int) -> dict:
    out = dict(row)
    out["source_row"] = index
    out["id"] = str(row["unique_id"]) if "unique_id" in row else str(row.get("id", f"math_train/{index}"))
    return out


def _round_robin(per_subject: dict[str, deque]) -> list:
    """Take one item per subject in SUBJECTS order until every queue is empty."""
    out = []
    while any(per_subject.values()):
        for s in SUBJECTS:
            if per_subject[s]:
                out.append(per_subject[s].popleft())
    return out


def _stratified_order(queues: dict[str, dict[int, deque]]) -> list:
    """Subject round robin; within a subject, a level cursor cycling 1..5 (empty levels skipped)."""
    cursor = {s: 0 for s in SUBJECTS}
    out = []
    while any(q for s in SUBJECTS for q in queues[s].values()):
        for s in SUBJECTS:
            for k in range(len(LEVELS)):
                i = (cursor[s] + k) % len(LEVELS)
                q = queues[s][LEVELS[i]]
                if q:
                    out.append(q.popleft())
                    cursor[s] = (i + 1) % len(LEVELS)
                    break
    return out


def build_splits(math_train_rows: list[dict], math500_rows: list[dict], seed: int) -> dict[str, list[dict]]:
    """The three splits as ``{name: rows}`` (see the module docstring); inputs are not modified."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {seed!r}")
    for i, row in enumerate(math_train_rows):
        for key in ("problem", "answer", "subject"):
            if not isinstance(row.get(key), str):
                raise DataError(f"math_train row {i}: field {key!r} missing or not a string")
        if row["subject"] not in SUBJECTS:
            raise DataError(f"math_train row {i}: unknown subject {row['subject']!r}; expected one of {list(SUBJECTS)}")
    math500_texts = {_text(r) for r in math500_rows}
    text_count = Counter(_text(r) for r in math_train_rows)

    eligible = [
        i for i, r in enumerate(math_train_rows)
        if r["answer"].strip() and _level(r) is not None and _text(r) not in math500_texts
    ]

    # math_val210
    cells: dict[tuple[str, int], list[int]] = {(s, lv): [] for s in SUBJECTS for lv in LEVELS}
    for i in eligible:
        r = math_train_rows[i]
        if i >= VAL_MIN_SOURCE_ROW and text_count[_text(r)] == 1:
            cells[(r["subject"], _level(r))].append(i)
    rng = random.Random(seed)
    val_idx: list[int] = []
    for s in SUBJECTS:
        for lv in LEVELS:
            cands = sorted(cells[(s, lv)])
            if len(cands) < VAL_PER_CELL:
                raise DataError(f"math_val210: cell ({s}, Level {lv}) has {len(cands)} candidates, need {VAL_PER_CELL}")
            val_idx.extend(rng.sample(cands, VAL_PER_CELL))
    val_idx.sort(key=lambda i: (SUBJECTS.index(math_train_rows[i]["subject"]), _level(math_train_rows[i]), i))
    val_texts = {_text(math_train_rows[i]) for i in val_idx}

    # training pools: not a val210 text, first occurrence of each text
    seen: set[str] = set()
    train_pool: list[int] = []
    for i in eligible:
        t = _text(math_train_rows[i])
        if t in val_texts or t in seen:
            continue
        seen.add(t)
        train_pool.append(i)

    queues = {s: {lv: deque() for lv in LEVELS} for s in SUBJECTS}
    for i in train_pool:
        r = math_train_rows[i]
        queues[r["subject"]][_level(r)].append(i)
    strat_idx = _stratified_order(queues)

    zpd_rng = random.Random(f"{ZPD}:{seed}")
    zpd_lists: dict[str, deque] = {}
    for s in SUBJECTS:
        lst = [i for i in train_pool if math_train_rows[i]["subject"] == s and _level(math_train_rows[i]) in ZPD_LEVELS]
        zpd_rng.shuffle(lst)
        zpd_lists[s] = deque(lst)
    zpd_idx = _round_robin(zpd_lists)

    return {
        name: [_out_row(math_train_rows[i], i) for i in idx]
        for name, idx in ((VAL210, val_idx), (STRATIFIED, strat_idx), (ZPD, zpd_idx))
    }


# ---------------------------------------------------------------------------------------------
# writing


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _jsonl_bytes(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode("utf-8")


def _json_bytes(obj) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, sort_keys=True, indent=2) + "\n").encode("utf-8")


def write_splits(
    splits: dict[str, list[dict]],
    out_dir: str | os.PathLike,
    seed: int,
    source_checksums: dict[str, str],
    force: bool = False,
) -> dict:
    """Write ``<name>.jsonl``, ``<name>.meta.json`` and ``manifest.json`` under out_dir; returns the manifest.

    Raises SplitsConflictError (before writing anything) if a target exists with different
    content and ``force`` is false; the files that change are written as a set (``write_files``).
    """
    out = Path(out_dir)
    need_folder(out, "splits folder")
    sources = {k: source_checksums[k] for k in sorted(source_checksums)}
    files: list[tuple[Path, bytes]] = []
    entries = []
    for name in sorted(splits):
        rows = splits[name]
        body = _jsonl_bytes(rows)
        meta = {
            "name": name,
            "seed": seed,
            "rows": len(rows),
            "file": f"{name}.jsonl",
            "sha256": _sha256(body),
            "sources": sources,
            "rule": RULES.get(name, ""),
            "subjects": dict(sorted(Counter(r.get("subject") for r in rows).items())),
            "levels": dict(sorted(Counter(str(r.get("level")) for r in rows).items())),
            "builder": "rlvr_sweep.data.splits",
            "format_version": FORMAT_VERSION,
        }
        meta_body = _json_bytes(meta)
        files += [(out / f"{name}.jsonl", body), (out / f"{name}.meta.json", meta_body)]
        entries.append({
            "name": name, "rows": len(rows), "file": f"{name}.jsonl", "sha256": meta["sha256"],
            "meta_file": f"{name}.meta.json", "meta_sha256": _sha256(meta_body),
        })
    manifest = {
        "builder": "rlvr_sweep.data.splits", "format_version": FORMAT_VERSION, "seed": seed,
        "sources": sources, "splits": entries,
    }
    files.append((out / "manifest.json", _json_bytes(manifest)))

    conflicts = [p for p, data in files if p.exists() and (not p.is_file() or p.read_bytes() != data)]
    if conflicts and not force:
        raise SplitsConflictError(conflicts)
    write_files(out, {p.name: data for p, data in files if not (p.is_file() and p.read_bytes() == data)})
    return manifest


# ---------------------------------------------------------------------------------------------
# command line (`python -m rlvr_sweep.data build-splits`, see `data.cli`)


def build_splits_command(args) -> int:
    root = Path(args.data_root)
    try:
        train = read_jsonl(root / "math_train.jsonl")
        m500 = read_jsonl(root / "math500.jsonl")
        checksums = {name: file_sha256(root / name) for name in SOURCE_FILES}
        splits = build_splits(train, m500, args.seed)
    except DataError as err:
        print(f"build-splits: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"build-splits: error: {os_error_line(err)}", file=sys.stderr)
        return 2
    for name, digest in checksums.items():
        if digest != KNOWN_SOURCE_SHA256[name]:
            print(f"build-splits: warning: {root / name} sha256 {digest[:12]} differs from the canonical "
                  f"{KNOWN_SOURCE_SHA256[name][:12]} (python -m rlvr_sweep.data check --data-root {root})", file=sys.stderr)
    try:
        manifest = write_splits(splits, args.out, args.seed, checksums, force=args.force)
    except SplitsConflictError as err:
        print(f"build-splits: error: {err}", file=sys.stderr)
        return 1
    except DataError as err:
        print(f"build-splits: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a full disk, a folder it may not write: one line, the previous set left whole
        print(f"build-splits: error: {os_error_line(err)}", file=sys.stderr)
        return 2
    print(f"wrote splits (seed {args.seed}) to {args.out}")
    for e in manifest["splits"]:
        print(f"  {e['name']:<24} {e['rows']:>6} rows  sha256 {e['sha256'][:12]}")
    return 0

"""The four data files the study reads, made from their public upstream files by rules written once here.

`python -m rlvr_sweep.data prepare --raw DIR [--data-root DIR] [--download [--mirror URL]] [--force]`
reads the upstream files from DIR (as downloaded, under the names below) and writes the JSON Lines
files into the data root (default `$RLVR_SWEEP_DATA`, else `data`). With `--download` it first fetches
every upstream file that DIR lacks from its public location (printing each address; `--mirror URL`
fetches the same paths from another host, e.g. an institution's copy) into DIR.

| file written | upstream file in DIR | public location |
| --- | --- | --- |
| `math_train.jsonl` | `math_full_minus_math500.json` | GitHub `rasbt/math_full_minus_math500` (the book's training file; fallback: its Backblaze copy) |
| `math500.jsonl` | `math500_test.json` | GitHub `rasbt/reasoning-from-scratch`, `ch03/01_main-chapter-code/` |
| `gsm8k_test.jsonl` | `gsm8k/test.jsonl` | GitHub `openai/grade-school-math`, `grade_school_math/data/` |
| `amc23.jsonl` | `amc23/test.jsonl` | GitHub `QwenLM/Qwen2.5-Math`, `evaluation/data/amc23/` |

The rules (each output line is `json.dumps(row, ensure_ascii=False)` with the keys in the order
given, UTF-8, `\\n` endings; rows in upstream order):

- `math_train.jsonl`: the JSON array's rows as `problem, answer, solution, subject, level, unique_id,
  math_path`: `subject` is upstream's `type`, `answer` upstream's (the last `\\boxed{}` of the
  solution; `""` for the four rows without one, null read as `""`), `level` the string `Level k`,
  `unique_id` the row's integer index in the 12,500-problem MATH list, and `math_path` the MATH file it
  came from (`train/algebra/0.json`), looked up by `unique_id` in the shipped index `math_paths.txt.gz`
  (MATH's per-problem folders in the dataset's order: split, subject folder, file name as a string);
  a row whose id is not in the index, or whose subject is not the index's folder, is refused.
- `math500.jsonl`: the JSON array's rows as `problem, answer, solution, subject, level, unique_id`
  (`level` an integer 1-5, `unique_id` the MATH file, `test/precalculus/807.json`).
- `gsm8k_test.jsonl`: each line `{question, answer}` as `problem` (the question), `answer` (the number
  after the last `####`, thousands commas removed: `2,125` -> `2125`), `answer_raw` (that string as
  written), `solution` (upstream's whole answer text), `unique_id` (`gsm8k/test/<0-based line>`). A
  final answer that is not a number is refused.
- `amc23.jsonl`: each line `{id, problem, answer, url, question}` as `problem`, `answer` (the whole
  number as an integer string: `27.0` -> `"27"`), `unique_id` (`amc23/<id>`), `url`; the duplicate
  `question` must equal `problem` and is dropped. An answer that is not a whole number is refused.

Every row is converted before anything is written. A row that cannot be converted (a line that is not
UTF-8 or not JSON, a field missing, an answer that breaks its rule, two rows with one id) fails in one
line with the file, its line (JSON Lines; both lines for a shared id) or row (JSON arrays, 0-based) and
the reason, exit 2. The files that change are written as a set (`jsonl.write_files`: all into a
temporary folder inside the data root, then renamed in), so a failure, a full disk included, leaves the
previous files or none, never a mix; that too is one line, exit 2, as is a data root that is a file. An
existing output that differs is not overwritten unless `--force` is given (exit 1; identical files are
left alone). `python -m rlvr_sweep.data check` then compares the data root with the canonical files
(`data.canonical`).
"""

from __future__ import annotations

import gzip
import json
import re
import shlex
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rlvr_sweep.data.jsonl import DataError, json_problem, need_folder, not_utf8, os_error_line, write_files
from rlvr_sweep.io import atomic_write_bytes

GITHUB = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class Source:
    output: str  # the file written into the data root
    raw: str  # its upstream file, relative to the raw folder
    urls: tuple[str, ...]  # public locations, tried in order

    def mirrored(self, mirror: str | None) -> tuple[str, ...]:
        """The same paths on `mirror` (its host and path prefix replace each address's host)."""
        if not mirror:
            return self.urls
        return tuple(mirror.rstrip("/") + "/" + re.sub(r"^https?://[^/]+/", "", u) for u in self.urls)


SOURCES = (
    Source("math_train.jsonl", "math_full_minus_math500.json", (
        f"{GITHUB}/rasbt/math_full_minus_math500/refs/heads/main/math_full_minus_math500.json",
        "https://f001.backblazeb2.com/file/reasoning-from-scratch/MATH/math_full_minus_math500.json")),
    Source("math500.jsonl", "math500_test.json", (
        f"{GITHUB}/rasbt/reasoning-from-scratch/main/ch03/01_main-chapter-code/math500_test.json",)),
    Source("gsm8k_test.jsonl", "gsm8k/test.jsonl", (
        f"{GITHUB}/openai/grade-school-math/master/grade_school_math/data/test.jsonl",)),
    Source("amc23.jsonl", "amc23/test.jsonl", (
        f"{GITHUB}/QwenLM/Qwen2.5-Math/main/evaluation/data/amc23/test.jsonl",)),
)
NUMBER = re.compile(r"-?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?")  # a GSM8K final answer, thousands commas allowed
MAX_DIGITS = 15  # an AMC answer's (see whole_number)


# -- reading upstream files ------------------------------------------------------------------------

def _read_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise DataError(not_utf8(path, data)) from None


def _json_array(path: Path) -> list[tuple[str, dict]]:
    """(where, row) of a JSON array file: where = "file: row N"."""
    text = _read_text(path)
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    except (ValueError, RecursionError) as err:  # a number of over 4300 digits, nesting too deep
        raise DataError(f"{path}: not valid JSON ({json_problem(err)})") from None
    if not isinstance(rows, list):
        raise DataError(f"{path}: expected a JSON array of rows, got {type(rows).__name__}")
    return [(f"{path}: row {i}", row) for i, row in enumerate(rows)]


def _json_lines(path: Path) -> list[tuple[str, dict]]:
    out = []
    # split at "\n" only: str.splitlines also splits inside a JSON string holding U+2028 or U+0085
    for lineno, line in enumerate(_read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            out.append((f"{path}:{lineno}", json.loads(line)))
        except (ValueError, RecursionError) as err:
            raise DataError(f"{path}:{lineno}: not valid JSON ({json_problem(err)})") from None
    return out


def _distinct(seen: dict, uid, where: str, path: Path) -> None:
    """Refuse a second row with the id `uid`, naming both: two problems under one id would be graded and
    counted as one item (`seen`: id -> where, filled here)."""
    if uid in seen:
        again = where.removeprefix(f"{path}: ").removeprefix(str(path))  # ":17" (JSON Lines), "row 16" (arrays)
        raise DataError(f"{seen[uid]} and {again} share the id {_short(uid)}")
    seen[uid] = where


def _short(value) -> str:
    """`repr(value)`, cut to fit a one-line error (a 401-digit answer is named, not printed)."""
    text = repr(value)
    unit = "digits" if isinstance(value, int) else "characters"
    return text if len(text) <= 40 else f"{text[:24]}... ({len(text)} {unit})"


def _text(where: str, row, key: str, empty_ok: bool = False) -> str:
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    value = row.get(key)
    if not isinstance(value, str) or (not empty_ok and not value.strip()):
        raise DataError(f"{where}: field {key!r} missing, empty or not a string")
    return value


# -- the rules ------------------------------------------------------------------------------------

def math_paths() -> dict[int, str]:
    """unique_id -> MATH file of the 12,000 training rows (the shipped index)."""
    text = gzip.decompress(resources.files("rlvr_sweep.data").joinpath("math_paths.txt.gz").read_bytes()).decode()
    return {int(uid): path for uid, path in (line.split(" ", 1) for line in text.splitlines())}


def _folder(subject: str) -> str:
    return subject.lower().replace(" & ", "_and_").replace(" ", "_")


def math_train_rows(path: Path) -> list[dict]:
    paths, out, seen = math_paths(), [], {}
    for where, row in _json_array(path):
        problem, solution, subject = (_text(where, row, k) for k in ("problem", "solution", "type"))
        answer = row.get("answer")
        answer = "" if answer is None else answer
        uid, level = row.get("unique_id"), row.get("level")
        if not isinstance(answer, str):
            raise DataError(f"{where}: field 'answer' is not a string")
        if not isinstance(uid, int) or uid not in paths:
            raise DataError(f"{where}: unique_id {_short(uid)} is not one of the 12,000 MATH-minus-MATH-500 rows")
        _distinct(seen, uid, where, path)
        if not isinstance(level, str) or not level.startswith("Level "):
            raise DataError(f"{where}: level {_short(level)} is not 'Level k'")
        if paths[uid].split("/")[1] != _folder(subject):
            raise DataError(f"{where}: subject {subject!r} but unique_id {uid} is {paths[uid]}")
        out.append({"problem": problem, "answer": answer, "solution": solution, "subject": subject,
                    "level": level, "unique_id": uid, "math_path": paths[uid]})
    return out


def math500_rows(path: Path) -> list[dict]:
    out, seen = [], {}
    for where, row in _json_array(path):
        fields = {k: _text(where, row, k) for k in ("problem", "answer", "solution", "subject", "unique_id")}
        level = row.get("level")
        if not isinstance(level, int) or isinstance(level, bool) or not 1 <= level <= 5:
            raise DataError(f"{where}: level {_short(level)} is not an integer 1-5")
        _distinct(seen, fields["unique_id"], where, path)
        out.append({"problem": fields["problem"], "answer": fields["answer"], "solution": fields["solution"],
                    "subject": fields["subject"], "level": level, "unique_id": fields["unique_id"]})
    return out


def gsm8k_answer(where: str, solution: str) -> tuple[str, str]:
    """(answer, answer_raw) from a GSM8K solution's `#### N` line; a DataError when N is not a number."""
    if "####" not in solution:
        raise DataError(f"{where}: the answer has no '#### N' final line")
    raw = solution.rsplit("####", 1)[1].strip()
    if not NUMBER.fullmatch(raw):
        raise DataError(f"{where}: the final answer {raw[:40]!r} after '####' is not a number")
    return raw.replace(",", ""), raw


def gsm8k_rows(path: Path) -> list[dict]:
    out = []
    for i, (where, row) in enumerate(_json_lines(path)):
        question, solution = _text(where, row, "question"), _text(where, row, "answer")
        answer, raw = gsm8k_answer(where, solution)
        out.append({"problem": question, "answer": answer, "answer_raw": raw, "solution": solution,
                    "unique_id": f"gsm8k/test/{i}"})
    return out


def whole_number(where: str, value) -> str:
    """An AMC answer as an integer string (27.0 -> "27"); a DataError when it is not a whole number of at
    most 15 digits. Upstream stores answers as floats, which hold whole numbers exactly only that far (the
    set's largest answer is 3159), and a 401-digit one would not fit a float at all."""
    try:
        number = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else None
    except (ValueError, OverflowError):
        number = None
    if number is None or not number.is_integer() or abs(number) >= 10 ** MAX_DIGITS:
        raise DataError(f"{where}: answer {_short(value)} is not a whole number of at most {MAX_DIGITS} digits")
    return str(int(number))


def amc23_rows(path: Path) -> list[dict]:
    out, seen = [], {}
    for where, row in _json_lines(path):
        problem = _text(where, row, "problem")
        if "question" in row and row["question"] != problem:
            raise DataError(f"{where}: 'question' differs from 'problem'")
        if not isinstance(row.get("id"), int):
            raise DataError(f"{where}: field 'id' missing or not an integer")
        _distinct(seen, f"amc23/{row['id']}", where, path)
        out.append({"problem": problem, "answer": whole_number(where, row.get("answer")),
                    "unique_id": f"amc23/{row['id']}", "url": _text(where, row, "url")})
    return out


RULES = {"math_train.jsonl": math_train_rows, "math500.jsonl": math500_rows, "gsm8k_test.jsonl": gsm8k_rows,
         "amc23.jsonl": amc23_rows}


def jsonl_bytes(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")


# -- fetching and writing -------------------------------------------------------------------------

def download(source: Source, raw_dir: Path, mirror: str | None = None, timeout: float = 120) -> str:
    """Fetch `source`'s upstream file into `raw_dir` (the first address that answers); its address."""
    target = Path(raw_dir) / source.raw
    errors = []
    for url in source.mirrored(mirror):
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                body = response.read()
        except (urllib.error.URLError, OSError) as err:
            errors.append(f"{url}: {getattr(err, 'reason', err)}")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, body)
        return url
    raise DataError(f"could not fetch {source.raw}: " + "; ".join(errors))


class OutputsDiffer(FileExistsError):
    """A data file exists with other content and `--force` was not given."""


def prepare(raw_dir, data_root, download_missing: bool = False, mirror: str | None = None, force: bool = False,
            say=print) -> dict[str, str]:
    """Convert every upstream file in `raw_dir` (fetching missing ones first when asked) into `data_root`.
    Returns {file: "written" | "unchanged"}. Every row is converted before any file is written, and the
    files that change are written as a set (`jsonl.write_files`): a failure, a full disk included, leaves
    the previous files, never some new ones beside old ones."""
    raw_dir, data_root = Path(raw_dir), Path(data_root)
    need_folder(data_root, "data root")
    need_folder(raw_dir, "raw folder")
    for source in SOURCES:
        if not (raw_dir / source.raw).is_file():
            if not download_missing:
                raise DataError(_already_prepared(raw_dir, source.raw) or f"{raw_dir / source.raw} not found: "
                                f"download it from {source.urls[0]} or run with --download")
            say(f"fetched {download(source, raw_dir, mirror)} -> {raw_dir / source.raw}")
    bodies = {s.output: jsonl_bytes(RULES[s.output](raw_dir / s.raw)) for s in SOURCES}
    done = {n: "unchanged" if (data_root / n).is_file() and (data_root / n).read_bytes() == body else "written"
            for n, body in bodies.items()}
    conflicts = [n for n in bodies if done[n] == "written" and (data_root / n).exists()]
    if conflicts and not force:
        raise OutputsDiffer(f"{', '.join(str(data_root / n) for n in conflicts)} exist(s) with other content; "
                            "--force overwrites")
    write_files(data_root, {n: body for n, body in bodies.items() if done[n] == "written"})
    for name, body in bodies.items():
        rows = body.count(b"\n")
        say(f"  {name:<18} {rows:>6} rows  {done[name]}")
    return done


def _already_prepared(raw_dir: Path, missing: str) -> str | None:
    """The way on when `raw_dir` holds this module's outputs (from a colleague, a shared folder) rather
    than the upstream files it converts: they need no prepare, only the splits and the check."""
    held = [s.output for s in SOURCES if (raw_dir / s.output).is_file()]
    if not held:
        return None
    folder, splits = shlex.quote(str(raw_dir)), shlex.quote(str(raw_dir / "splits"))
    return (f"{raw_dir} holds prepared data files ({', '.join(held)}), not the upstream files prepare converts "
            f"({missing} is one): use that folder as the data root instead: `python -m rlvr_sweep.data "
            f"build-splits --out {splits} --seed 0 --data-root {folder}`, then `python -m rlvr_sweep.data check "
            f"--data-root {folder}`, and run with data.root={folder}")


def main(args) -> int:
    try:
        prepare(args.raw, args.data_root, args.download, args.mirror, args.force)
    except DataError as err:
        print(f"prepare: error: {err}", file=sys.stderr)
        return 2
    except OutputsDiffer as err:
        print(f"prepare: error: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # a full disk, a file it may not read or write: one line, nothing half-written
        print(f"prepare: error: {os_error_line(err)}", file=sys.stderr)
        return 2
    print(f"wrote the data files to {args.data_root}; check them with "
          f"`python -m rlvr_sweep.data check --data-root {args.data_root}`")
    return 0

"""The four upstream data files in their published formats, made from the canonical outputs in
../shared/data (the tests of `data prepare` and of the paper path read them)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tests.conftest import need_data

FILES = ("math_train.jsonl", "math500.jsonl", "gsm8k_test.jsonl", "amc23.jsonl")


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_upstream(raw: Path) -> Path:
    """rasbt's JSON arrays (pandas `to_json(orient="records", indent=2)` for the training file, as its
    preparation notebook writes it), GSM8K's {question, answer} lines with the solution as the answer,
    and Qwen2.5-Math's AMC lines with float answers and the duplicate `question`."""
    shared = need_data(*FILES)
    raw.mkdir(parents=True, exist_ok=True)
    train = [{"problem": r["problem"], "level": r["level"], "type": r["subject"], "solution": r["solution"],
              "answer": r["answer"], "unique_id": r["unique_id"]} for r in rows(shared / "math_train.jsonl")]
    pd.DataFrame(train).to_json(raw / "math_full_minus_math500.json", orient="records", indent=2)
    m500 = [{k: r[k] for k in ("problem", "solution", "answer", "subject", "level", "unique_id")}
            for r in rows(shared / "math500.jsonl")]
    (raw / "math500_test.json").write_text(json.dumps(m500, indent=2))
    (raw / "gsm8k").mkdir(exist_ok=True)
    (raw / "gsm8k/test.jsonl").write_text("".join(json.dumps({"question": r["problem"], "answer": r["solution"]}) + "\n"
                                                  for r in rows(shared / "gsm8k_test.jsonl")))
    (raw / "amc23").mkdir(exist_ok=True)
    (raw / "amc23/test.jsonl").write_text("".join(json.dumps(
        {"id": int(r["unique_id"].split("/")[1]), "problem": r["problem"], "answer": float(r["answer"]),
         "url": r["url"], "question": r["problem"]}) + "\n" for r in rows(shared / "amc23.jsonl")))
    return raw


def edit_line(path: Path, index: int, **fields) -> None:
    """Set `fields` in the `index`-th line of a JSON Lines upstream file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[index])
    row.update(fields)
    lines[index] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def edit_array(path: Path, index: int, **fields) -> None:
    """Set `fields` in row `index` of a JSON array upstream file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data[index].update(fields)
    path.write_text(json.dumps(data), encoding="utf-8")


def spoil_line(path: Path, lineno: int, column: int = 10) -> None:
    """Put two bytes that are not UTF-8 into line `lineno` (1-based) of `path`, at `column`."""
    lines = path.read_bytes().split(b"\n")
    lines[lineno - 1] = lines[lineno - 1][:column] + b"\xff\xfe" + lines[lineno - 1][column:]
    path.write_bytes(b"\n".join(lines))

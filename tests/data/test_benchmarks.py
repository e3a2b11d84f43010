"""Loaders for the paper's training rows and benchmarks, and their error messages."""

import json

import pytest

from rlvr_sweep import data
from rlvr_sweep.config import DataConfig
from rlvr_sweep.data.cli import main as build_splits


def cfg_for(root, **kw) -> DataConfig:
    return DataConfig(root=str(root), **kw)


def test_math_train_rows_keep_the_book_order(shared_data):
    rows = data.training_rows(cfg_for(shared_data, limit=50))
    assert len(rows) == 50
    assert [r["answer"] for r in rows[:5]] == ["0", "98", "4", "17", "6"]  # baseline spec §2
    assert rows[5]["answer"] == "(3, -1)" and rows[49]["answer"] == "-29x^5(7x^6-2)"


def test_benchmarks_have_the_paper_sizes_and_sources(shared_data):
    cfg = cfg_for(shared_data)
    assert len(data.benchmark_rows("math500", cfg)) == 500
    ext = data.benchmark_rows("ext240", cfg)
    assert len(ext) == 240
    assert [r["source"] for r in ext] == ["gsm8k200"] * 200 + ["amc23"] * 40
    assert ext[0]["id"] == "gsm8k/test/0" and ext[199]["id"] == "gsm8k/test/199"
    assert len(data.benchmark_rows("ext240", cfg, limit=10)) == 10


def test_val210_and_stratified_training_rows_come_from_the_built_splits(shared_data, tmp_path):
    assert build_splits(["build-splits", "--out", str(tmp_path / "splits"), "--seed", "0", "--data-root", str(shared_data)]) == 0
    cfg = cfg_for(shared_data, splits_dir=str(tmp_path / "splits"), train_file="math_train_stratified.jsonl", limit=49)
    val = data.benchmark_rows("math_val210", cfg)
    assert len(val) == 210
    train = data.training_rows(cfg)
    assert len(train) == 49 and len({r["subject"] for r in train}) == 7


def test_missing_split_says_how_to_build_it(shared_data, tmp_path):
    with pytest.raises(data.DataError, match="math_val210.jsonl; build the splits with"):
        data.benchmark_rows("math_val210", cfg_for(shared_data, splits_dir=str(tmp_path)))


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", r"bad\.jsonl:2: not valid JSON"),
        ('["a list"]', r"bad\.jsonl:2: expected a JSON object"),
        ('{"problem": "1+1"}', r"bad\.jsonl:2: field 'answer' missing or not a string"),
        ('{"problem": "1+1", "answer": 2}', r"bad\.jsonl:2: field 'answer' missing or not a string"),
    ],
)
def test_malformed_rows_name_file_line_and_problem(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"problem": "ok", "answer": "1"}) + "\n" + line + "\n")
    with pytest.raises(data.DataError, match=message):
        data.read_jsonl(path)


def test_a_line_that_is_not_utf8_or_too_deep_is_named(tmp_path):
    """Seen (#33): a UnicodeDecodeError traceback. Want: the file, the line and the byte."""
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"problem": "ok", "answer": "1"}\n{"problem": "caf\xe9", "answer": "2"}\n')
    with pytest.raises(data.DataError, match=r"bad\.jsonl:2: not UTF-8 text \(byte 0xe9 at column 17\)"):
        data.read_jsonl(path)
    path.write_text('{"problem": "ok", "answer": "1"}\n' + "[" * 100_000 + "\n")
    with pytest.raises(data.DataError, match=r"bad\.jsonl:2: not valid JSON \(nested too deeply\)"):
        data.read_jsonl(path)


def test_missing_file_and_unknown_benchmark(tmp_path):
    with pytest.raises(data.DataError, match=r"math_train\.jsonl.*data\.root"):
        data.training_rows(cfg_for(tmp_path))
    with pytest.raises(data.DataError, match="ext240"):
        data.benchmark_rows("gsm9k", cfg_for(tmp_path))

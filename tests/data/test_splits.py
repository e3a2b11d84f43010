"""The MATH split builder (`rlvr_sweep.splits`): sizes, strata, disjointness, determinism, overwrite guard."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from rlvr_sweep.data import cli as data_cli
from rlvr_sweep.data import splits as S
from rlvr_sweep.data import read_jsonl

from tests.conftest import need_data

NAMES = ("math_val210", "math_train_stratified", "math_train_zpd")


def _need_data() -> Path:
    return need_data("math_train.jsonl", "math500.jsonl")


def _build_cli(out: Path, seed: int, *extra: str) -> int:
    return data_cli.main(["build-splits", "--out", str(out), "--seed", str(seed), "--data-root", str(_need_data()), *extra])


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def sources():
    root = _need_data()
    return read_jsonl(root / "math_train.jsonl"), read_jsonl(root / "math500.jsonl")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("splits_seed0_a")
    assert _build_cli(out, 0) == 0
    return out


@pytest.fixture(scope="module")
def rows(built) -> dict[str, list[dict]]:
    return {n: _read(built / f"{n}.jsonl") for n in NAMES}


def _texts(rows: list[dict]) -> set[str]:
    return {r["problem"].strip() for r in rows}


def test_val210_is_stratified_and_held_out(rows, sources):
    train, m500 = sources
    val = rows["math_val210"]
    assert len(val) == 210
    cells = Counter((r["subject"], r["level"]) for r in val)
    assert set(cells) == {(s, f"Level {lv}") for s in S.SUBJECTS for lv in range(1, 6)}
    assert set(cells.values()) == {6}
    assert all(r["source_row"] >= 500 for r in val)
    assert len(_texts(val)) == 210
    assert not _texts(val) & _texts(m500)
    assert not _texts(val) & _texts(train[:500])
    assert all(r["answer"].strip() for r in val)
    # rows are the source rows plus source_row and id, sorted by (subject, level, source_row)
    for r in val:
        src = train[r["source_row"]]
        assert {k: v for k, v in r.items() if k != "source_row"} == src
        assert r["id"] == str(src["unique_id"])
    key = [(S.SUBJECTS.index(r["subject"]), r["level"], r["source_row"]) for r in val]
    assert key == sorted(key)


def test_training_splits_are_disjoint_from_eval(rows, sources):
    _, m500 = sources
    held_out = _texts(rows["math_val210"]) | _texts(m500)
    for name in ("math_train_stratified", "math_train_zpd"):
        r = rows[name]
        assert not _texts(r) & held_out, name
        assert len(_texts(r)) == len(r), f"{name} repeats a problem text"
        assert all(x["answer"].strip() for x in r), name
        assert set(x["subject"] for x in r) == set(S.SUBJECTS), name


def test_stratified_covers_pool_and_cycles_subjects(rows):
    strat = rows["math_train_stratified"]
    # 12,000 - 4 empty answers - 2 'Level ?' - 210 val - 1 duplicate text
    assert len(strat) == 11783
    assert Counter(r["subject"] for r in strat[:49]) == {s: 7 for s in S.SUBJECTS}
    assert [r["subject"] for r in strat[:7]] == list(S.SUBJECTS)
    assert [r["level"] for r in strat[:35:7]] == [f"Level {lv}" for lv in range(1, 6)]  # Algebra cycles levels
    c100 = Counter(r["subject"] for r in strat[:100])
    assert max(c100.values()) - min(c100.values()) <= 1


def test_zpd_levels_and_subjects(rows):
    zpd = rows["math_train_zpd"]
    assert {r["level"] for r in zpd} == {"Level 2", "Level 3", "Level 4", "Level 5"}
    assert set(r["subject"] for r in zpd) == set(S.SUBJECTS)
    assert Counter(r["subject"] for r in zpd[:49]) == {s: 7 for s in S.SUBJECTS}
    strat_l25 = {r["source_row"] for r in rows["math_train_stratified"] if r["level"] != "Level 1"}
    assert {r["source_row"] for r in zpd} == strat_l25  # same pool, Level 1 removed
    assert [r["source_row"] for r in zpd] != sorted(r["source_row"] for r in zpd)  # shuffled


def test_rebuild_is_byte_identical_and_meta_matches(built, tmp_path):
    assert _build_cli(tmp_path, 0) == 0
    files = sorted(p.name for p in built.iterdir())
    assert files == sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 7
    for name in files:
        assert (built / name).read_bytes() == (tmp_path / name).read_bytes(), name
    manifest = json.loads((built / "manifest.json").read_text())
    assert {e["name"] for e in manifest["splits"]} == set(NAMES)
    for e in manifest["splits"]:
        body = (built / e["file"]).read_bytes()
        meta_bytes = (built / e["meta_file"]).read_bytes()
        meta = json.loads(meta_bytes)
        assert hashlib.sha256(body).hexdigest() == meta["sha256"] == e["sha256"]
        assert hashlib.sha256(meta_bytes).hexdigest() == e["meta_sha256"]
        assert meta["rows"] == e["rows"] == body.count(b"\n")
        assert meta["name"] == e["name"] and meta["seed"] == 0 and meta["rule"]
        for src in ("math_train.jsonl", "math500.jsonl"):
            assert meta["sources"][src] == hashlib.sha256((_need_data() / src).read_bytes()).hexdigest()


def test_other_seed_changes_val210(sources, rows):
    train, m500 = sources
    other = S.build_splits(train, m500, 1)
    assert [r["source_row"] for r in other["math_val210"]] != [r["source_row"] for r in rows["math_val210"]]
    assert other["math_val210"][0] is not train[other["math_val210"][0]["source_row"]]  # copies, inputs untouched
    assert "source_row" not in train[0]


@pytest.mark.slow
def test_refuses_to_overwrite_different_files(built, tmp_path, capsys):
    assert _build_cli(tmp_path, 0) == 0
    assert _build_cli(tmp_path, 0) == 0  # identical content: fine
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    capsys.readouterr()
    assert _build_cli(tmp_path, 1) == 1
    err = capsys.readouterr().err
    assert "refusing to overwrite" in err and "math_val210.jsonl" in err and "--force" in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing written
    assert _build_cli(tmp_path, 1, "--force") == 0
    assert (tmp_path / "math_val210.jsonl").read_bytes() != before["math_val210.jsonl"]
    assert json.loads((tmp_path / "manifest.json").read_text())["seed"] == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_missing_data_root_is_a_clear_error(tmp_path, capsys):
    assert data_cli.main(["build-splits", "--out", str(tmp_path / "o"), "--seed", "0", "--data-root", str(tmp_path)]) == 2
    assert "math_train.jsonl" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()

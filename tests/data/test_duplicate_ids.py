"""Two problems under one id are refused wherever a data file is read, naming both lines (#33). Seen: two
MATH-500 problems sharing a `unique_id` passed `prepare`, the run and `verify all`, and Table 4 reported
`MATH-500 (2)` for 3 items. `prepare` is tested with the other conversions (test_prepare.py); here the
run's loading (`read_jsonl`, `read_data_file`, `run.plan`) and `data check`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from rlvr_sweep import data
from rlvr_sweep.config import DataConfig
from rlvr_sweep.data.cli import main
from rlvr_sweep.run import plan
from tests.conftest import need_data
from tests.data.upstream import FILES
from tests.helpers import compose_cfg

SHARED_ID = "test/intermediate_algebra/134.json"  # math500.jsonl line 17's


def _share_an_id(path: Path, first: int, second: int) -> None:
    """Give line `second` (1-based) of a data file line `first`'s `unique_id`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[second - 1])
    row["unique_id"] = json.loads(lines[first - 1])["unique_id"]
    lines[second - 1] = json.dumps(row, ensure_ascii=False)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def root(tmp_path) -> Path:
    """A copy of the four data files whose math500.jsonl lines 17 and 230 share an id."""
    shared = need_data(*FILES)
    root = tmp_path / "data"
    root.mkdir()
    for name in FILES:
        shutil.copy(shared / name, root / name)
    _share_an_id(root / "math500.jsonl", 17, 230)
    return root


def test_the_shipped_files_and_their_splits_have_distinct_ids(shared_data):
    """Checked before refusing: no real file breaks the rule (`id`, else `unique_id`, else `<stem>/<index>`;
    GSM8K and AMC rows carry their `unique_id`)."""
    cfg = DataConfig(root=str(shared_data))
    for name in FILES:
        rows = data.read_jsonl(shared_data / name)
        assert len({r["id"] for r in rows}) == len(rows), name
    splits = data.build_splits(data.read_jsonl(shared_data / "math_train.jsonl"),
                               data.read_jsonl(shared_data / "math500.jsonl"), 0)
    assert all(len({r["id"] for r in rows}) == len(rows) for rows in splits.values())
    assert len(data.benchmark_rows("ext240", cfg)) == 240


def test_read_jsonl_names_both_lines(tmp_path):
    path = tmp_path / "mine.jsonl"
    rows = [{"problem": "a", "answer": "1", "unique_id": "x"}, {"problem": "b", "answer": "2"}, None,
            {"problem": "c", "answer": "3", "unique_id": "x"}]
    path.write_text("".join(("" if r is None else json.dumps(r)) + "\n" for r in rows))
    with pytest.raises(data.DataError, match=rf"^{re.escape(str(path))}:1 and :4 share the id 'x' "):
        data.read_jsonl(path)
    # an own id that is another row's fallback `<stem>/<line - 1>` is the same id
    rows = [{"problem": "a", "answer": "1", "id": "mine/2"}, {"problem": "b", "answer": "2"},
            {"problem": "c", "answer": "3"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(data.DataError, match=r"mine\.jsonl:1 and :3 share the id 'mine/2'"):
        data.read_jsonl(path)
    # an integer unique_id and a string id of the same digits too (ids are strings)
    rows = [{"problem": "a", "answer": "1", "unique_id": 5}, {"problem": "b", "answer": "2", "id": "5"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(data.DataError, match=r"mine\.jsonl:1 and :2 share the id '5'"):
        data.read_jsonl(path)


def test_the_run_refuses_a_benchmark_or_training_file_with_a_shared_id(root, tmp_path):
    where = rf"{re.escape(str(root / 'math500.jsonl'))}:17 and :230 share the id '{re.escape(SHARED_ID)}'"
    with pytest.raises(data.DataError, match=where):
        data.benchmark_rows("math500", DataConfig(root=str(root)))
    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "eval.benchmarks=[math500]", f"data.root={root}",
                       f"run.out_root={tmp_path}/runs"])
    with pytest.raises(data.DataError, match=where):
        plan(cfg)
    assert not (tmp_path / "runs").exists()
    _share_an_id(root / "math_train.jsonl", 4, 8)  # unique_id 3 (an integer) twice
    with pytest.raises(data.DataError, match=r"math_train\.jsonl:4 and :8 share the id '3'"):
        data.training_rows(DataConfig(root=str(root), limit=50))
    _share_an_id(root / "gsm8k_test.jsonl", 1, 1000)  # past GSM8K-200's rows: the file is refused whole
    with pytest.raises(data.DataError, match=r"gsm8k_test\.jsonl:1 and :1000 share the id 'gsm8k/test/0'"):
        data.benchmark_rows("ext240", DataConfig(root=str(root)))


def test_check_names_both_lines_and_exits_2(root, capsys):
    assert main(["check", "--data-root", str(root)]) == 2
    out = capsys.readouterr().out.splitlines()
    assert f"math500.jsonl                      malformed: {root / 'math500.jsonl'}:17 and :230 share the id " \
           f"'{SHARED_ID}'" in out[1]
    assert [line.split()[1] for line in out[:4]] == ["ok:", "malformed:", "ok:", "ok:"]  # the others still shown
    assert out[-1] == "3 of 7 files canonical; 3 differ or are missing; 1 malformed or unreadable (a run would " \
                      "refuse them)"

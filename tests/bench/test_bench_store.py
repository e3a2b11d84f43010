"""`bench/bench_store.py`'s own arithmetic, without making runs: `verify` put beside `import torch`, the
medians of `--repeats` (the real stores and commands run in `test_bench_scripts.py`, slow tier)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import REPO


@pytest.fixture()
def bench_store():
    spec = importlib.util.spec_from_file_location("bench_store", REPO / "bench" / "bench_store.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_median(bench_store):
    assert bench_store.median([3.0]) == 3.0
    assert bench_store.median([5.0, 1.0, 4.0]) == 4.0
    assert bench_store.median([4.0, 1.0, 2.0, 3.0]) == 2.5


def test_verify_is_printed_beside_import_torch(bench_store, monkeypatch, tmp_path, capsys):
    """Each verify run is followed by a bare `import torch`; the ratio is the median of the pairs' ratios,
    and every other command is timed `--repeats` times with its median printed."""
    verify = iter([9.0, 12.0, 10.0])
    torch = iter([3.0, 3.0, 2.0])  # pairs 3.0, 4.0, 5.0: median 4.0; torch's median 3.0
    calls = []

    def timed(name, store, out):
        calls.append(name)
        return (next(verify) if name == "verify" else 1.5), 100.0

    monkeypatch.setattr(bench_store, "make_templates", lambda *a: [])
    monkeypatch.setattr(bench_store, "make_store", lambda templates, store, n: store)
    monkeypatch.setattr(bench_store, "timed", timed)
    monkeypatch.setattr(bench_store, "import_torch_seconds", lambda: next(torch))
    bench_store.main(["--sizes", "4", "--collect-sizes", "", "--commands", "tables,verify", "--repeats", "3",
                      "--root", str(tmp_path)])
    lines = {line.split(":")[0]: line for line in capsys.readouterr().out.splitlines() if "runs=4" in line}
    assert calls == ["tables"] * 3 + ["verify"] * 3
    assert "seconds=1.50" in lines["tables"] and "import_torch" not in lines["tables"]
    assert "seconds=10.00" in lines["verify"]
    assert lines["verify"].endswith("import_torch_seconds=3.00 vs_import_torch=4.00")

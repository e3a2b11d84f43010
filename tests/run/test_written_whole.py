"""Every file a run puts in its folder is put in place whole (CONVENTIONS #18): written under its temporary name
beside it (`io.atomic`), then renamed, so a reader (collect, status, a relaunch) never sees half of a run.json,
manifest, DONE marker, table, config or checkpoint. The logs under `logs/` are appended to as the run goes."""

from __future__ import annotations

import builtins
import io
import os
from pathlib import Path

from rlvr_sweep.run import run
from tests.helpers import compose_cfg, run_dir_of


def test_no_file_of_a_run_folder_is_opened_for_writing_under_its_own_name(tmp_path, monkeypatch):
    real_open = builtins.open
    written: list[Path] = []

    def spy(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and any(m in mode for m in "wax+"):
            written.append(Path(os.fspath(file)).resolve())
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy)
    monkeypatch.setattr(io, "open", spy)  # pathlib's write_text / write_bytes
    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "train.steps=2", "eval.limit=4", f"run.out_root={tmp_path}"])
    run(cfg)
    run_dir = run_dir_of(cfg).resolve()
    top = [p.name for p in written if p.parent == run_dir]
    assert [name for name in top if not name.startswith(".")] == []  # nothing opened for writing in place
    files = sorted(p.name for p in run_dir.iterdir() if p.is_file())
    assert {"run.json", "manifest.json", "DONE", "config.yaml", "steps.parquet", "grades.parquet"} <= set(files)
    temp = f".tmp-{os.getpid()}"
    assert [name for name in files if f".{name}{temp}" not in top] == []  # each one written beside, then renamed
    assert (run_dir / "model").is_dir() and any(p.parent.name == f".model{temp}" for p in written)

"""The paper path with the four data files already at hand (from a colleague, a shared folder): no
`prepare`, only `data.root` pointed at them, `build-splits` and `check` (docs/paper-path.md, "Files
already at hand"); and `prepare --raw` on such a folder naming those steps in its one line."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr_sweep.data.cli import main
from tests.conftest import REPO, need_data
from tests.data.upstream import FILES

PAPER_PATH = REPO / "docs" / "paper-path.md"


def files_at_hand(folder: Path) -> Path:
    """A copy of the study's four data files, as a colleague would hand them over."""
    shared = need_data(*FILES)
    folder.mkdir(parents=True)
    for name in FILES:
        shutil.copy(shared / name, folder / name)
    return folder


def documented_block() -> list[str]:
    """The lines of the bash block under docs/paper-path.md's "### Files already at hand"."""
    section = PAPER_PATH.read_text().split("### Files already at hand", 1)[1]
    block = re.search(r"^```bash\n(.*?)^```", section, re.S | re.M)
    assert block, "docs/paper-path.md: no bash block under 'Files already at hand'"
    return block[1].splitlines()


@pytest.mark.slow  # the commands in subprocesses, and a short smoke run
def test_the_documented_commands_make_a_canonical_data_root(tmp_path):
    data = files_at_hand(tmp_path / "shared" / "rlvr-data")
    before = {name: (data / name).read_bytes() for name in FILES}
    lines = documented_block()
    assert lines[0].startswith("DATA=") and len(lines) == 4, lines
    script = "\n".join([f"DATA={shlex.quote(str(data))}", *lines[1:]])  # the lines after it as written
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
           "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("RLVR_SWEEP_DATA", None)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "7 of 7 files canonical" in proc.stdout
    assert {name: (data / name).read_bytes() for name in FILES} == before  # the files are read, never rewritten
    (run_json,) = (tmp_path / "outputs" / "data_check").glob("smoke/baseline/*/run.json")
    record = json.loads(run_json.read_text())
    assert record["data_canonical"] is True  # the run read the files and the split through data.root


def test_prepare_on_a_folder_of_prepared_files_says_what_to_do_instead(tmp_path, capsys):
    data = files_at_hand(tmp_path / "data")
    assert main(["prepare", "--raw", str(data), "--data-root", str(tmp_path / "elsewhere")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"prepare: error: {data} holds prepared data files (math_train.jsonl, math500.jsonl, "
                           "gsm8k_test.jsonl, amc23.jsonl), not the upstream files prepare converts")
    assert line.endswith(f"and run with data.root={data}")
    assert not (tmp_path / "elsewhere").exists()
    # the commands it names, run as named: the folder becomes a canonical data root
    named = re.findall(r"`(python -m rlvr_sweep\.data [^`]*)`", line)
    assert [shlex.split(c)[3] for c in named] == ["build-splits", "check"]
    for command in named:
        assert main(shlex.split(command)[3:]) == 0, command
    assert "7 of 7 files canonical" in capsys.readouterr().out


def test_a_raw_folder_without_either_kind_of_file_still_names_the_upstream_file(tmp_path, capsys):
    (tmp_path / "raw").mkdir()
    assert main(["prepare", "--raw", str(tmp_path / "raw"), "--data-root", str(tmp_path / "data")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "math_full_minus_math500.json not found: download it from https://" in line and "--download" in line

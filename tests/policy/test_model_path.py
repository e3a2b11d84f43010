"""A `model.path` that does not exist names the command that puts the model there
(`python -m rlvr_sweep.policy fetch-model --out PATH`), as one line, before anything is written."""

from __future__ import annotations

import re
import shlex
import shutil

import pytest

from rlvr_sweep.config import ModelConfig
from rlvr_sweep.policy import ModelLoadError, resolve_model_folder, resolve_model_source
from rlvr_sweep.policy.architecture import EXPECTED
from rlvr_sweep.policy.cli import _parser
from tests.conftest import need_data
from tests.helpers import run_cli

PAPER = ModelConfig()  # qwen3_0_6b_base, Qwen/Qwen3-0.6B-Base


def named_command(message: str) -> list[str]:
    (command,) = re.findall(r"`(python -m rlvr_sweep\.policy [^`]*)`", message)
    return shlex.split(command)


@pytest.mark.parametrize("resolve", [resolve_model_source, resolve_model_folder])
def test_a_missing_folder_names_fetch_model_for_that_path(tmp_path, resolve):
    folder = tmp_path / "models" / "Qwen3-0.6B-Base"
    with pytest.raises(ModelLoadError) as caught:
        resolve(ModelConfig(path=str(folder)))
    message = str(caught.value)
    assert message.startswith(f"model.path='{folder}': {folder} does not exist. Download Qwen/Qwen3-0.6B-Base into "
                              f"it with `python -m rlvr_sweep.policy fetch-model --out {folder}` (where there is "
                              "network; then copy the folder here), or point model.path at a folder saved with "
                              "save_pretrained")
    args = _parser().parse_args(named_command(message)[3:])  # the command as named parses, and fetches there
    assert (args.command, args.out, args.hub_id, args.model) == ("fetch-model", str(folder), None, "qwen3_0_6b_base")
    assert EXPECTED[args.model].hub_id == PAPER.hub_id  # the model it downloads by default
    assert not folder.parent.exists()


def test_another_hub_model_is_named_with_its_id_and_a_path_with_a_space_is_quoted(tmp_path):
    folder = tmp_path / "my models" / "bigger"
    with pytest.raises(ModelLoadError) as caught:
        resolve_model_source(ModelConfig(name="other", hub_id="Qwen/Qwen3-1.7B-Base", path=str(folder)))
    args = _parser().parse_args(named_command(str(caught.value))[3:])
    assert (args.out, args.hub_id) == (str(folder), "Qwen/Qwen3-1.7B-Base")


def test_without_a_hub_id_it_offers_the_papers_model(tmp_path):
    with pytest.raises(ModelLoadError, match=r"does not exist\. For the paper's model, download it there with "
                                             r"`python -m rlvr_sweep\.policy fetch-model --out "):
        resolve_model_source(ModelConfig(name="mine", hub_id=None, path=str(tmp_path / "nowhere")))


def test_a_file_or_a_missing_package_folder_is_not_offered_a_download(tmp_path):
    (tmp_path / "weights.safetensors").write_bytes(b"x")
    for path in (str(tmp_path / "weights.safetensors"), "pkg:rlvr_sweep.policy/assets/no_such_model"):
        with pytest.raises(ModelLoadError) as caught:
            resolve_model_source(ModelConfig(path=path))
        assert "fetch-model" not in str(caught.value) and "Point model.path at a folder saved" in str(caught.value)


@pytest.mark.slow  # the entrypoint in a subprocess
def test_a_paper_run_with_a_missing_model_path_is_one_line_naming_fetch_model(tmp_path):
    from rlvr_sweep.data.cli import main as data_main
    from tests.data.upstream import FILES

    shared, data = need_data(*FILES), tmp_path / "data"
    data.mkdir()
    for name in FILES:
        shutil.copy(shared / name, data / name)
    assert data_main(["build-splits", "--out", str(data / "splits"), "--seed", "0", "--data-root", str(data)]) == 0
    proc = run_cli(["+arm=baseline", "model.path=models/Qwen3-0.6B-Base", f"data.root={data}",
                    f"run.out_root={tmp_path}/runs"], cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("rlvr_sweep: ModelLoadError: model.path='models/Qwen3-0.6B-Base': ")
    assert "`python -m rlvr_sweep.policy fetch-model --out models/Qwen3-0.6B-Base`" in line
    assert not (tmp_path / "runs").exists()

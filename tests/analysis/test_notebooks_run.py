"""The notebooks as committed (nbformat 4.5, every cell with an id, no outputs) and as docs/analysis.md runs
them: `python -m rlvr_sweep.analysis.notebooks` executes each on a real smoke sweep and writes a viewable
HTML page holding its results, with no warning on the way."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import nbformat
import pandas as pd
import pytest
from bs4 import BeautifulSoup

from rlvr_sweep.analysis.notebooks import main
from tests.conftest import REPO
from tests.sweeps import TREE, run_of

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
STDERR_OUTPUT = {"data-mime-type": "application/vnd.jupyter.stderr"}  # a cell's stderr (a warning) in the page


def test_the_notebooks_are_committed_clean():
    assert {p.name for p in NOTEBOOKS} == {"analysis.ipynb", "paper_reproduction.ipynb", "smoke_sweep.ipynb"}
    for path in NOTEBOOKS:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # MissingIDFieldWarning, a validation warning: a failure here
            book = nbformat.read(path, as_version=nbformat.NO_CONVERT)
            nbformat.validate(book)
        assert (book.nbformat, book.nbformat_minor) == (4, 5), path.name
        ids = [cell.get("id") for cell in book.cells]
        assert all(ids) and len(set(ids)) == len(ids), f"{path.name}: every cell needs its own id"
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in book.cells
                   if c.cell_type == "code"), f"{path.name}: commit notebooks without outputs"
        assert any("parameters" in c.metadata.get("tags", []) for c in book.cells), path.name


def test_a_missing_notebook_is_bad_input(tmp_path, capsys):
    assert main([str(tmp_path / "absent.ipynb"), "--out", str(tmp_path)]) == 2
    assert main(["notebooks/analysis.ipynb", "--root", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "absent.ipynb: cannot read it as a notebook" in err[0] and "is not a folder" in err[1]
    assert not list(tmp_path.iterdir())


def notebooks_command(*args: str, cwd, env_extra: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, **env_extra, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "rlvr_sweep.analysis.notebooks", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=900)


def page(path) -> BeautifulSoup:
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    assert not soup.find_all(attrs=STDERR_OUTPUT), f"{path.name}: a cell wrote to stderr (a warning?)"
    assert not soup.find_all(attrs={"data-mime-type": "application/vnd.jupyter.error"})
    return soup


@pytest.mark.slow
def test_a_failing_cell_is_named_and_its_page_still_written(tmp_path):
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('before')"),
                                           nbformat.v4.new_code_cell("1 / 0"), nbformat.v4.new_code_cell("print(2)")])
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(book, tmp_path / "broken.ipynb")
    proc = notebooks_command("broken.ipynb", cwd=tmp_path, env_extra={})
    assert proc.returncode == 1, proc.stderr[-3000:]
    size = (tmp_path / "outputs" / "notebooks" / "broken.html").stat().st_size
    assert proc.stderr.strip().splitlines() == [
        ("notebooks: error: broken.ipynb: cell 2 raised ZeroDivisionError: division by zero; the page shows it: "
         f"outputs/notebooks/broken.html ({size / 1024:.0f} kB)")]
    text = (tmp_path / "outputs" / "notebooks" / "broken.html").read_text()
    assert "before" in text and "ZeroDivisionError" in text


def test_the_documented_command_writes_each_notebook_as_a_page(smoke_sweep, tmp_path):
    """docs/analysis.md's command, run from a folder of its own: one HTML page per notebook under its
    outputs/notebooks, holding the sweep's numbers, the tables and the figures; no warning anywhere."""
    before = {p: p.read_bytes() for p in NOTEBOOKS}
    tables = tmp_path / "tables"
    proc = notebooks_command(*map(str, NOTEBOOKS), "--root", str(smoke_sweep), cwd=tmp_path,
                             env_extra={"RLVR_ANALYSIS_OUT": str(tables)})
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "warning" not in proc.stderr.lower() and not proc.stderr.strip(), proc.stderr[-3000:]
    pages = tmp_path / "outputs" / "notebooks"
    assert proc.stdout.splitlines() == [f"{p}: wrote outputs/notebooks/{p.stem}.html "
                                        f"({(pages / f'{p.stem}.html').stat().st_size / 1024:.0f} kB)" for p in NOTEBOOKS]
    assert {p: p.read_bytes() for p in NOTEBOOKS} == before  # the committed notebooks are left as they were

    # smoke_sweep: each run's trained accuracy, as its grades.parquet holds it, in the first table
    soup = page(pages / "smoke_sweep.html")
    rows = [[td.get_text(strip=True) for td in tr.find_all(["th", "td"])] for tr in soup.find("table").find_all("tr")]
    header, body = rows[0], rows[1:]
    shown = {(r[header.index("arm")], int(r[header.index("seed")])): float(r[header.index("trained")]) for r in body}
    assert set(shown) == {(arm, seed) for arm in ("baseline", "stopped_tree") for seed in (42, 101)}
    for (arm, seed), value in shown.items():
        grades = pd.read_parquet(run_of(smoke_sweep, arm, seed) / "grades.parquet")
        assert value == pytest.approx(grades.loc[grades["phase"] == "trained", "correct"].mean(), abs=1e-6)

    soup = page(pages / "analysis.html")
    text = soup.get_text(" ")
    assert "Table 1" in text and f"baseline h1024 vs {TREE}" in text  # the notebook's own contrast
    assert TREE in [td.get_text(strip=True) for td in soup.find_all("td")]
    figures = [img for img in soup.find_all("img") if img["src"].startswith("data:image/png;base64,")]
    assert len(figures) == 3 and all(len(img["src"]) > 10_000 for img in figures)  # embedded: the page stands alone

    text = page(pages / "paper_reproduction.html").get_text(" ")
    assert "Table 1" in text and "PASS 3 ok" in text
    assert (tables / "table1.parquet").is_file() and (tables / "figure1.png").is_file()

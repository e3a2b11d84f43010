"""The HTML report shows every string it prints as text: markup in a name, a path, an error or a note
never becomes an element of the page (issue #36).

Seen: with one table cell inserted unescaped, every test of the report passed (the only check was
`"<script" not in html`, and no value of the smoke sweep carries markup). Want: a sweep whose printed
strings carry markup (an arm row's label, a run folder's name and path, a failed run's error, a `verify
all` problem, a `--where` note, the root) gives a page whose parsed elements are only the report's own,
each such string the exact text of the element that shows it (`&amp;` stays those five characters).

Two tiers: the sections built in-process from the hand-made sweep, each compared with the same sections
built from plain strings (fast); and the whole page written by `analysis report --where ...` on real run
folders, one failed, one damaged, one renamed, with `verify all` run (slow).
"""

from __future__ import annotations

import html
import json
import re
import shutil
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

import rlvr_sweep.policy
from rlvr_sweep.analysis import html_report
from rlvr_sweep.analysis.render import Table
from rlvr_sweep.analysis.report import build_tables
from rlvr_sweep.analysis.source import Sweep, load_sweep
from tests.analysis import handmade
from tests.sweeps import cli

# every element the report makes; markup below uses none of these
REPORT_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "code", "nav", "a", "ul", "li",
               "table", "tr", "th", "td", "details", "summary", "span", "b", "img"}
VOID = {"meta", "img"}


class Page(HTMLParser):
    """A page's elements in document order, each {tag, attrs, text: all the text inside it}; `unbalanced`: end
    tags that close no element open at that point and elements never closed (the report closes all it opens)."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.elements, self.open, self.unbalanced = [], [], []
        self.feed(html)
        self.close()
        self.unbalanced += [f"<{e['tag']}> never closed" for e in self.open]

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, "attrs": dict(attrs), "text": ""}
        self.elements.append(element)
        if tag not in VOID:
            self.open.append(element)

    def handle_startendtag(self, tag, attrs):
        self.elements.append({"tag": tag, "attrs": dict(attrs), "text": ""})
        if tag not in VOID:
            self.unbalanced.append(f"<{tag}/>")

    def handle_endtag(self, tag):
        if self.open and self.open[-1]["tag"] == tag:
            self.open.pop()
        else:
            self.unbalanced.append(f"</{tag}> inside <{self.open[-1]['tag'] if self.open else ''}>")

    def handle_data(self, data):
        for element in self.open:
            element["text"] += data

    def tags(self) -> Counter:
        return Counter(e["tag"] for e in self.elements)

    def texts(self, tag: str, cls: str | None = None) -> list[str]:
        return [e["text"] for e in self.elements if e["tag"] == tag and (cls is None or e["attrs"].get("class") == cls)]


def only_the_reports_elements(html: str, marks) -> Page:
    """The parsed page, after checking it holds no element the report does not make, every element closed
    where it was opened, and none of `marks` as raw markup."""
    page = Page(html)
    assert page.unbalanced == []
    assert set(page.tags()) <= REPORT_TAGS, set(page.tags()) - REPORT_TAGS
    assert [m for m in marks if m in html] == []  # each shown escaped, nowhere as markup
    return page


# ---------------------------------------------------------------------------------------------------
# fast: the sections, from the hand-made sweep

# markup in each string the sections print; those that go into a folder name have no "/"
MARKS = {"arm": "<i>arm&amp;a</i>", "folder": "<s>dir&amp;d", "where": "<em>where&amp;w</em>", "root": "<kbd>root&amp;k",
         "error": "<script>alert('err')</script> & <u>boom</u>", "problem": "<var>bad&amp;b</var>",
         "unchecked": "<q>plugin&amp;p</q>", "cell": "<i>x&amp;y</i>", "long_cell": "<i>a_long_word&amp;more</i> z",
         "note": "<sub>note&amp;n</sub>", "summary": "<sup>fold&amp;f</sup>", "item": "<ins>item&amp;i</ins>",
         "why": "<del>why&amp;w</del>"}
PLAIN = {k: re.sub(r"[<>&;/'()]", "x", v) for k, v in MARKS.items()}  # the same lengths, no markup


def sections(base: Path, marks: dict) -> tuple[str, dict]:
    """The provenance, verify, tables (runs, Table 1 and a hand-made table's cells, notes and folded
    notes, an unbuilt table's reason) of the hand-made sweep with `marks` in its strings: (page, what
    each place must show)."""
    root = base / marks["root"]
    tables = handmade.tables()
    for frame in tables.values():  # the baseline arm renamed: its label "1. <arm>"
        if "arm" in frame.columns:
            frame["arm"] = frame["arm"].replace("baseline", marks["arm"])
    folders = [root / marks["folder"] / f"run_{n}" for n in range(len(tables["runs"]))]
    for folder in folders:  # what --where reads: a string setting carrying markup
        folder.mkdir(parents=True)
        (folder / "config.yaml").write_text(json.dumps({"run": {"out_root": marks["where"]}}))
    tables["runs"]["run_dir"] = [str(f) for f in folders]
    failed = root / marks["folder"] / "failed"
    left_out = f"left out {failed}: unfinished (run.json status: failed: {marks['error']})"
    sweep = Sweep.from_tables(tables, notes=[left_out], where=[("run.out_root", marks["where"])])
    sweep.root = root
    built = build_tables(sweep, None, 50, 0, only=["runs", "table1"])
    note, folded = f"a note: {marks['note']}", "a folded note"
    mine = Table("mine", "Mine", pd.DataFrame(), pd.DataFrame({"short": [marks["cell"]], "long": [marks["long_cell"]]}),
                 notes=[note, folded], folded={folded: (marks["summary"], [marks["item"]])})
    unbuilt = Table.unbuilt("unbuilt", "Unbuilt", marks["why"])
    verdict = {"advice": None, "passes": [
        {"name": "PASS 1", "ok": False, "summary": "checked", "problems": [f"{folders[0]}: {marks['problem']}"],
         "seconds": 0.1},
        {"name": "PASS 4", "ok": True, "summary": "checked", "problems": [], "unchecked": [marks["unchecked"]],
         "seconds": 0.1}]}
    html = "".join([html_report._provenance(sweep, root), html_report._verify_section(verdict),
                    *(html_report._table(t) for t in (*built.values(), mine, unbuilt))])
    label = f"1. {marks['arm']}"
    shows = {"li": [(f"sweep {root}: 7 of 7 run folders used (7 training runs in 3 arm rows, 0 read-outs of "
                     "checkpoints); benchmarks ['toy_heldout']; every folder and its row: the runs table"),
                    f"selected 7 of 7 runs with --where run.out_root={marks['where']}", note, marks["item"],
                    f"{folders[0]}: {marks['problem']}", f"not re-derived: {marks['unchecked']}"],
             ("li", "note"): [left_out],
             "td": [label, f"{marks['folder']}/run_0", marks["cell"], marks["long_cell"]],
             "summary": [marks["summary"]], "p": [f"Not built: {marks['why']}"]}
    return html, shows


def test_each_section_shows_markup_as_text_and_makes_the_elements_plain_strings_make(tmp_path):
    html, shows = sections(tmp_path / "marked", MARKS)
    plain, _ = sections(tmp_path / "plain", PLAIN)
    page = only_the_reports_elements(html, MARKS.values())
    assert page.tags() == Page(plain).tags()  # element for element, what plain strings make
    for where, texts in shows.items():
        tag, cls = where if isinstance(where, tuple) else (where, None)
        found = page.texts(tag, cls)
        assert [t for t in texts if t not in found] == [], (where, found)
    assert page.texts("td").count(f"1. {MARKS['arm']}") == 4  # its Table 1 row, its 3 runs' in the runs table


def test_the_verdict_s_advice_heads_the_section_as_text():
    advice = "the plugin code changed since 2 run(s) ran: --plugins-kept-in <kbd>root&amp;k re-derives them"
    verdict = {"advice": advice, "passes": [{"name": "PASS 1", "ok": True, "summary": "s", "problems": [],
                                             "unchecked": ["u"], "seconds": 0.1}]}
    section = html_report._verify_section(verdict)
    assert f"<b>no problem, but incomplete: {html.escape(advice)} (report --plugins, verify all)</b>" in section


# ---------------------------------------------------------------------------------------------------
# slow: the whole page, from real run folders

SMOKE = ["+arm=ra_flat", "profile=smoke", "train.steps=1", "eval.limit=2"]
# words of at most html_report.LONG_WORD characters: the runs table's cell of the failed run is a plain <td>
ERROR = " <script> alert('err') </script> & <em>boom</em> "


@pytest.fixture(scope="module")
def marked(tmp_path_factory):
    """A sweep root named with markup holding real run folders under `<i>out&amp;o/` (their `run.out_root`,
    what `--where` selects on): ra_flat seeds 42 and 101, the seed-42 folder renamed `h512_s42_<i>run&amp;r`;
    seed 42 again on a copy of the tiny model at `<u>model&amp;m` (an arm row labelled by that path); seed 7,
    failed with ERROR; and a damaged copy of seed 42 at `<s>damaged&amp;d`. The report written with
    `--where run.out_root=...` and its `verify all` verdict: {name: path or text}."""
    from rlvr_sweep.run import run, train
    from tests.helpers import compose_cfg, run_dir_of

    root = tmp_path_factory.mktemp("escaping") / "<kbd>root&amp;k"
    out, model = root / "<i>out&amp;o", root / "<u>model&amp;m"
    shutil.copytree(Path(rlvr_sweep.policy.__file__).parent / "assets" / "tiny_qwen3", model)
    base = [*SMOKE, f"run.out_root='{out}'"]  # quoted: Hydra's grammar takes no < & ; unquoted
    seed42 = run(compose_cfg([*base, "seed=42"]))["run_dir"]
    run(compose_cfg([*base, "seed=101"]))
    run(compose_cfg([*base, "seed=42", f"model.path='{model}'"]))

    def fails(*args):
        raise RuntimeError(ERROR)

    cfg = compose_cfg([*base, "seed=7"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(train, "step_row", fails)
        with pytest.raises(RuntimeError):
            run(cfg)
    renamed = Path(seed42).with_name("h512_s42_<i>run&amp;r")
    Path(seed42).rename(renamed)
    damaged = renamed.with_name("<s>damaged&amp;d")
    shutil.copytree(renamed, damaged)
    steps = bytearray((damaged / "steps.parquet").read_bytes())
    steps[len(steps) // 2] ^= 0xFF
    (damaged / "steps.parquet").write_bytes(bytes(steps))

    report = root.parent / "report.html"
    proc = cli("rlvr_sweep.analysis", "report", str(root), "--out", str(report), "--where", f"run.out_root={out}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    labels = set(load_sweep(root).runs["label"])
    return {"root": root, "out": out, "model": model, "renamed": renamed, "damaged": damaged,
            "failed": run_dir_of(cfg), "html": report.read_text(), "labels": labels}


@pytest.mark.slow
def test_the_report_of_a_sweep_whose_strings_carry_markup_shows_them_as_text(marked):
    root, out, model, renamed, damaged, failed = (marked[k] for k in ("root", "out", "model", "renamed", "damaged",
                                                                      "failed"))
    marks = ["<kbd>root", "<i>out", "<u>model", "<i>run", "<s>damaged", "<script>", "<em>boom"]
    page = only_the_reports_elements(marked["html"], marks)
    assert page.tags()["script"] == 0 and page.tags()["h1"] == 1

    assert page.texts("title") == page.texts("h1") == [f"Sweep report: {root}"]
    [label] = [lab for lab in marked["labels"] if model.name in lab]  # the row told apart by the model's folder
    assert label == f"4. ra_flat [model.path=…/{model.name}]"  # a folder of this machine: by its name
    lines = page.texts("li")
    assert any(line.startswith(f"sweep {root}: 3 of 5 run folders used") for line in lines)
    assert f"selected 3 of 3 runs with --where run.out_root={out}" in lines
    assert any(line.startswith("arm '4. ra_flat' is 2 rows") and line.endswith(f"; {label} (1 run)") for line in lines)

    error = json.loads((failed / "run.json").read_text())["error"]
    assert ERROR in error  # as the run recorded it: RuntimeError("...")
    unfinished = f"unfinished (run.json status: failed: {error})"
    notes = page.texts("li", "note")
    assert f"left out {failed}: {unfinished}" in notes
    assert any(n.startswith(f"left out {damaged}: damaged: {damaged}/steps.parquet: content differs") for n in notes)

    verify = marked["html"][marked["html"].index("<h2 id='verify'>"):marked["html"].index("<h2 id='tables'>")]
    problems = Page(verify).texts("li")
    assert any(p.startswith(f"{damaged}/steps.parquet: content differs from the manifest") for p in problems), problems
    assert any(p.startswith(f"{damaged}: a finished run that cannot enter the tables (damaged: {damaged}/steps.parquet")
               for p in problems), problems

    cells = page.texts("td")
    for cell in (renamed.relative_to(root).as_posix(), damaged.relative_to(root).as_posix(), unfinished, label,
                 str(model)):  # the runs table's folders and reasons, Table 1's row, the configs' model.path row
        assert cell in cells, cell
    assert cells.count(label) >= 3  # Table 1, the runs table, ...
    # both kinds of cell hold markup: one that may break inside its words (a path) and a plain one
    assert [e["attrs"] for e in page.elements if e["tag"] == "td" and e["text"] == unfinished] == [{}]
    assert next(e["attrs"] for e in page.elements if e["tag"] == "td" and e["text"] == label) == {"class": "brk"}
    assert label in page.texts("h3")  # the configs section's heading of that row

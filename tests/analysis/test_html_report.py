"""`analysis report`: one self-contained HTML page, rendered by a real browser (headless Chromium) with
its network log watched, its text checked for the tables' numbers, every table measured against the page's
width on a 1,280-pixel screen and printed on A4."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import escape, unescape
from html.parser import HTMLParser

import pytest

from rlvr_sweep.analysis.report import build_tables
from rlvr_sweep.analysis.source import load_sweep
from tests.conftest import unavailable
from tests.sweeps import TREE, cli

pytestmark = pytest.mark.slow  # the shared smoke sweep

BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-default-apps",
                 "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    unavailable("CHROMIUM", "no headless Chromium here (Debian: apt-get install chromium)")


def render(page, tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Chromium run on `page` with `args` (`--screenshot=...`, `--dump-dom`); the page's own network
    requests from its net log (the browser's own update and account calls are not the page's)."""
    netlog = tmp_path / f"{page.stem}.netlog.json"
    proc = subprocess.run([chromium(), *BROWSER_FLAGS, f"--log-net-log={netlog}", *args, page.as_uri()],
                          capture_output=True, text=True, timeout=180)
    events = json.loads(netlog.read_text())["events"] if netlog.is_file() else []
    requests = sorted({p["url"] for e in events for p in [e.get("params") or {}]
                       if "url" in p and "file://" in str(p.get("network_isolation_key", ""))
                       and not p["url"].startswith(("file:", "data:"))})
    return proc, requests


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts = []

    def handle_data(self, data):
        self.parts.append(data)


def visible_text(dom: str) -> str:
    parser = _Text()
    parser.feed(dom)
    return " ".join(" ".join(parser.parts).split())


@pytest.fixture(scope="module")
def report(smoke_sweep, tmp_path_factory):
    """The smoke sweep's report, with its `verify all` verdict, written once: (page, the command's result)."""
    page = tmp_path_factory.mktemp("report") / "report.html"
    return page, cli("rlvr_sweep.analysis", "report", str(smoke_sweep), "--out", str(page))


def test_the_report_is_one_page_a_browser_renders_offline(report, smoke_sweep, tmp_path):
    page, proc = report
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"wrote {page}" in proc.stdout
    html = page.read_text()
    assert "<script" not in html.lower()
    outside = [ref for ref in re.findall(r"""(?:src|href)\s*=\s*['"]([^'"]*)""", html) if not ref.startswith(("data:", "#"))]
    assert outside == []  # every figure inlined, every link inside the page
    assert len(re.findall(r"<img [^>]*src='data:image/png;base64,", html)) >= 4  # Figures 1, 2, two arms' curves

    # the detector itself: a page that does fetch is caught
    control = tmp_path / "control.html"
    control.write_text("<html><body><img src='http://example.com/x.png'><link rel='stylesheet' "
                       "href='https://cdn.example.org/a.css'></body></html>")
    _, fetched = render(control, tmp_path, "--dump-dom")
    assert fetched == ["http://example.com/x.png", "https://cdn.example.org/a.css"]

    shot = tmp_path / "report.png"
    proc, fetched = render(page, tmp_path, f"--screenshot={shot}", "--window-size=1300,4000")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert fetched == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000  # a page, not a blank
    proc, _ = render(page, tmp_path, "--dump-dom")
    text = visible_text(proc.stdout)

    sweep = load_sweep(smoke_sweep)
    table1 = build_tables(sweep, only=["table1"])["table1"].display
    for row in table1.itertuples(index=False):  # each arm's accuracy cell, as the tables print it
        assert str(row[0]) in text and str(row[1]) in text, (row[0], row[1])
    assert "verify all: every pass ok" in text
    for name in ("PASS 1", "PASS 2", "PASS 3", "PASS 4"):
        assert name in text
    assert f"code: commit {sweep.runs['code.commit'].iloc[0][:12]}" in text
    assert "sampler.name" in text  # stopped_tree's difference from the baseline arm's settings


def test_report_without_verify_says_so(smoke_sweep, tmp_path):
    page = tmp_path / "r.html"
    proc = cli("rlvr_sweep.analysis", "report", str(smoke_sweep), "--out", str(page), "--no-verify")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Not run (<code>--no-verify</code>)" in page.read_text()
    bad = cli("rlvr_sweep.analysis", "report", str(tmp_path / "nothing"), "--out", str(tmp_path / "x.html"))
    assert bad.returncode == 2 and not (tmp_path / "x.html").exists()


def test_table2b_contrasts_the_arms_run_and_folds_what_it_cannot_build(report, smoke_sweep):
    """The smoke sweep (flat baseline and Arm 12, both at h1024) builds none of the smoke list's 15 rows: its
    Table 2B is the sweep's own row, Arm 12 against the baseline arm, and one folded line for the 15."""
    page, proc = report
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = page.read_text()
    section = html[html.index("<h3 id='table2b'>"):html.index("<h3", html.index("<h3 id='table2b'>") + 4)]
    t2b = build_tables(load_sweep(smoke_sweep), only=["table2b"])["table2b"]
    row = t2b.display.set_index("Row").loc[101]
    assert row["Contrast"] == "vs baseline: 12 - baseline (acc)" and list(t2b.frame["row"]) == [101]
    assert f"<td>{row['Mean diff (pp)']}</td><td>{escape(row['Two-level 95% CI'])}</td>" in section
    assert section.count("<details>") == 1
    folded = section[section.index("<details>"):section.index("</details>")]
    summary = escape("15 of the paper's contrasts cannot be built on this sweep")
    assert folded.startswith(f"<details><summary>{summary}</summary><ul><li>row 1 (6 - 5, toy_heldout): arm 6, 5 not "
                             "in the sweep</li>")
    assert folded.count("<li>") == 15
    assert escape(TREE) in html[html.index("<h2 id='configs'>"):] and \
        "differ from the baseline arm's, <b>baseline h1024</b>" in html


def test_report_takes_contrasts_and_baseline_and_refuses_an_unknown_arm(smoke_sweep, tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text('- {row: 1, title: "cap hits", a: "12", b: "baseline@h1024", benchmark: toy_heldout, metric: capped}\n'
                    '- {row: 2, title: "absent", a: "13", b: "12", benchmark: toy_heldout}\n')
    page = tmp_path / "r.html"
    proc = cli("rlvr_sweep.analysis", "report", str(smoke_sweep), "--out", str(page), "--no-verify",
               "--contrasts", str(mine), "--baseline", "12")
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = page.read_text()
    assert "<td>1</td><td>cap hits: 12 - baseline@h1024 (AllCap)</td>" in html
    assert "<td>101</td><td>vs baseline: baseline - 12 (acc)</td>" in html
    assert f"<details><summary>{escape('1 of the listed contrasts cannot be built on this sweep')}</summary>" in html
    assert f"differ from the baseline arm's, <b>{escape(TREE)}</b>" in html
    bad = cli("rlvr_sweep.analysis", "report", str(smoke_sweep), "--out", str(tmp_path / "x.html"), "--no-verify",
              "--baseline", "stoped_tree")
    assert bad.returncode == 2 and not (tmp_path / "x.html").exists()
    assert bad.stderr.strip().splitlines() == [
        "analysis: error: --baseline 'stoped_tree': no arm row of the sweep is named so; did you mean stopped_tree?"]


# Run in a copy of the page once it has loaded: every folded part opened, then each table's right edge, its
# cells' rightmost edge and the page's width and scroll width, written into the DOM that --dump-dom prints.
MEASURE = """<script>
window.addEventListener('load', () => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const tables = [...document.querySelectorAll('table')].map(t => {
    let h = t.previousElementSibling;
    while (h && !/^H[1-3]$/.test(h.tagName)) h = h.previousElementSibling;
    const cells = [...t.querySelectorAll('th, td')].map(c => c.getBoundingClientRect().right);
    return {title: h ? h.textContent : '', right: t.getBoundingClientRect().right, cells: Math.max(...cells)};
  });
  const out = document.createElement('pre');
  out.id = 'measured';
  out.hidden = true;
  out.textContent = JSON.stringify({width: document.documentElement.clientWidth,
                                    scroll: document.documentElement.scrollWidth, tables});
  document.body.appendChild(out);
});
</script>"""
A4_PX = 703  # A4's 210 mm less the print stylesheet's 12 mm page margins, at 96 CSS pixels an inch


def measured(page, tmp_path, width: int, printed: bool = False, extra: str = "") -> dict:
    """What MEASURE finds in `page` at `width` CSS pixels; `printed`: with the print stylesheet applied (its
    `@media print` rules made the screen's), as a printer would lay the page out."""
    html = page.read_text()
    if printed:
        assert html.count("@media print {") == 1
        html = html.replace("@media print {", "@media all {")
    copy = tmp_path / f"measure_{width}_{int(printed)}_{len(extra)}.html"
    copy.write_text(html.replace("</body>", extra + MEASURE + "</body>"))
    proc, fetched = render(copy, tmp_path, f"--window-size={width},2000", "--virtual-time-budget=5000", "--dump-dom")
    assert proc.returncode == 0 and fetched == [], proc.stderr[-2000:]
    found = re.search(r'<pre id="measured" hidden="">(.*?)</pre>', proc.stdout, re.DOTALL)
    assert found, proc.stdout[-2000:]
    return json.loads(unescape(found.group(1)))


def hidden_columns(m: dict) -> list[str]:
    """Tables whose right edge, or any cell's, lies past the page's or the table's own (a column scrolled away)."""
    return [f"{t['title'][:60]}: table {t['right']:.0f}, cells {t['cells']:.0f}, page {m['width']}" for t in m["tables"]
            if t["right"] > m["width"] + 0.5 or t["cells"] > min(t["right"], m["width"]) + 0.5]


def test_no_table_hides_a_column_on_a_1280_px_screen_or_printed_on_a4(report, tmp_path):
    """Seen: Table 4's `Oracle Pass@k` column sat behind a horizontal scroll. Want: every table (the folded
    ones opened) inside the page, at 1,280 pixels and with the print stylesheet on A4."""
    page, proc = report
    assert proc.returncode == 0, proc.stderr[-3000:]
    for width, printed in ((1280, False), (A4_PX, True)):
        m = measured(page, tmp_path, width, printed)
        titles = [t["title"] for t in m["tables"]]
        assert any(t.startswith("Table 4") for t in titles) and any(t.startswith("Runs") for t in titles), titles
        assert hidden_columns(m) == [], (width, printed)
        assert m["scroll"] <= m["width"], (width, printed, m["scroll"])  # nothing else widens the page
    # the measure itself: a wide table of unbreakable cells in a scrolling box (the old style) is caught
    control = ("<style>table.control { display: block; overflow-x: auto; } table.control td { white-space: nowrap; }"
               "</style><h3>control</h3><table class='control'><tr>"
               + "".join(f"<td>column {i} of a table too wide for any page</td>" for i in range(40)) + "</tr></table>")
    m = measured(page, tmp_path, 1280, extra=control)
    assert [line.split(":")[0] for line in hidden_columns(m)] == ["control"]

"""`analysis report`: one self-contained HTML page, rendered by a real browser (headless Chromium) with
its network log watched, its text checked for the tables' numbers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from rlvr_sweep.analysis.report import build_tables
from rlvr_sweep.analysis.source import load_sweep
from tests.conftest import unavailable
from tests.sweeps import cli

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


def test_the_report_is_one_page_a_browser_renders_offline(smoke_sweep, tmp_path):
    page = tmp_path / "report.html"
    proc = cli("rlvr_sweep.analysis", "report", str(smoke_sweep), "--out", str(page))
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

"""`python -m rlvr_sweep.analysis report ROOT --out outputs/report.html`: a sweep handed over as one page.

One self-contained HTML file: styles inline, figures inlined as PNG data, no script and no address
outside the file, so it opens the same from a mail attachment, a cluster's scratch disk or a browser
with no network. In order:

1. provenance: the root, when and by which code version the runs were made (every distinct commit),
   the data check (canonical files or not), how many run folders stand behind the tables and the
   notes on those left out (the runs table, at the end, names every folder and why);
2. the `verify all` verdict, one line per pass with its problems (`--no-verify` leaves it out, saying so);
3. the tables as `analysis tables` builds them (Tables 1-5, the audits and diagnostics the sweep has);
   Table 2B's contrasts that cannot be built on the sweep are one folded line;
4. Figures 1 and 2, and each arm's training curves (`analysis.figures`);
5. each arm row's settings as its difference from the baseline arm's (`contrasts.baseline_units`: the
   paper's Arm 1, else an arm named `baseline`, else the lowest paper arm number; or `--baseline`), from
   the runs' own `config.yaml` (`analysis.diff`);
6. the runs table (every folder found, the row it stands behind or why it was left out), folded.

No table is wider than the page, on a 1,280-pixel screen or printed on A4: cells wrap between words (and
inside a word longer than LONG_WORD characters, such as a path), tables of many columns are set smaller, and the print stylesheet
drops the page margins and sets every table smaller still (tests/analysis/test_html_report.py measures
every table's right edge in headless Chromium).
"""

from __future__ import annotations

import base64
import html
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlvr_sweep.analysis.contrasts import baseline_units
from rlvr_sweep.analysis.report import OPTIONAL_TABLES, build_tables, header_lines
from rlvr_sweep.analysis.source import Sweep
from rlvr_sweep.analysis.verdicts import VerdictSettings

STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1200px;
       color: #1d1d1f; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
h3 { font-size: 1.05em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; max-width: 100%; }
table.wide { font-size: 0.74em; }
th, td { border: 1px solid #d0d0d0; padding: 3px 6px; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
.brk { overflow-wrap: anywhere; }
th { background: #f3f3f5; } tr:nth-child(even) td { background: #fafafa; }
details > summary { cursor: pointer; }
.ok { color: #137333; font-weight: 600; } .failed { color: #b3261e; font-weight: 600; }
.note { color: #555; font-size: 0.9em; } .why { color: #8a6d00; }
img { max-width: 100%; box-sizing: border-box; border: 1px solid #eee; margin: 0.4em 0; }
nav a { margin-right: 1em; } code { background: #f3f3f5; padding: 0 3px; }
@media print {
  @page { size: A4; margin: 12mm; }
  body { max-width: none; margin: 0; padding: 0; font-size: 10pt; }
  nav { display: none; }
  table, table.wide { font-size: 7pt; } th, td { padding: 1px 3px; }
  tr, img { break-inside: avoid; } h2, h3 { break-after: avoid; }
  details::details-content { content-visibility: visible; display: block; }
}
"""
WIDE = 8  # columns from which a table is set smaller
LONG_WORD = 16  # characters of a word from which a cell may break inside its words


def write_report(sweep: Sweep, root, out, *, verify: bool = True, n_resamples: int = 4000, seed: int = 0,
                 progress=print, plugins=None, kept_in=None, contrasts=None, baseline: str | None = None,
                 verdicts: VerdictSettings = VerdictSettings()) -> Path:
    """Build every section (module docstring) and write the page to `out`; returns its path. `plugins`: the
    verdict re-derives what the runs' plugins decided (`verify all --plugins`), `kept_in` with the code the runs
    under those folders kept (`verify all --plugins-kept-in`); `contrasts`, `baseline`: Table
    2B's declared rows, baseline arm and verdict settings (`build_tables`), the baseline also the configs section's."""
    started = time.perf_counter()
    progress("tables ...")
    tables = build_tables(sweep, contrasts, n_resamples, seed, baseline=baseline, verdicts=verdicts)
    tables = {n: t for n, t in tables.items() if not (n in OPTIONAL_TABLES and t.why)}
    progress("figures ...")
    figures = _figures(sweep)
    verdict = _verify(root, progress, plugins, kept_in) if verify else None
    progress("configs ...")
    parts = [
        f"<h1>Sweep report: {_e(root)}</h1>",
        f"<p class='note'>Written {time.strftime('%Y-%m-%d %H:%M')} by <code>python -m rlvr_sweep.analysis report</code>"
        f" in {time.perf_counter() - started:.0f}s.</p>",
        "<nav>" + "".join(f"<a href='#{a}'>{t}</a>" for a, t in (("provenance", "Provenance"), ("verify", "Verify"),
                                                                   ("tables", "Tables"), ("figures", "Figures"),
                                                                   ("configs", "Configs"), ("run-folders", "Runs"))) + "</nav>",
        _provenance(sweep, root),
        _verify_section(verdict),
        "<h2 id='tables'>Tables</h2>", *(_table(t) for n, t in tables.items() if n != "runs"),
        "<h2 id='figures'>Figures</h2>", *(_figure(name, png) for name, png in figures.items()),
        _configs(sweep, baseline),
        "<h2 id='run-folders'>Runs</h2><details><summary>Every run folder and the row it stands behind "
        f"({len(sweep.provenance)} folders)</summary>{_table(tables['runs'])}</details>" if "runs" in tables else "",
    ]
    page = ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>Sweep report: {_e(root)}</title><style>{STYLE}</style></head><body>"
            + "\n".join(parts) + "</body></html>")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    from rlvr_sweep.io import atomic_write_bytes

    atomic_write_bytes(out, page.encode())
    return out


# ---------------------------------------------------------------------------------------------


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def _provenance(sweep: Sweep, root) -> str:
    lines = [*header_lines(sweep, root), _code_line(sweep), *_plugin_lines(sweep)]
    notes = [n for n in sweep.notes if n not in lines]
    return ("<h2 id='provenance'>Provenance</h2><ul>" + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul>"
            + ("<h3>Notes</h3><ul>" + "".join(f"<li class='note'>{_e(n)}</li>" for n in notes) + "</ul>" if notes else ""))


def _plugin_lines(sweep: Sweep) -> list[str]:
    """The plugins' code the runs loaded (run.json `inputs.plugins`, part of their identity): each digest, and
    how many runs; nothing for a sweep without plugins."""
    if "inputs.plugins" not in sweep.runs.columns:
        return []
    digests = [d for d in sweep.runs["inputs.plugins"] if isinstance(d, str)]
    counts = {d: digests.count(d) for d in sorted(set(digests))}
    return [f"plugin code {d[:12]} (part of the identity of {n} run{'s' if n != 1 else ''})" for d, n in counts.items()]


def _code_line(sweep: Sweep) -> str:
    """The code versions the runs were made with (run.json `code`): each commit, and how many runs."""
    runs = sweep.runs
    if "code.commit" not in runs.columns:
        return "code: not recorded by these runs"
    dirty = runs["code.dirty"] if "code.dirty" in runs.columns else [False] * len(runs)
    counts: dict[str, int] = {}
    for commit, changed in zip(runs["code.commit"], dirty):
        label = f"commit {str(commit)[:12]}" + (" with uncommitted changes" if changed is True else "")
        counts[label] = counts.get(label, 0) + 1
    return "code: " + "; ".join(f"{label} ({n} runs)" for label, n in sorted(counts.items()))


def _places(plugins) -> list[str]:
    """The folders named after `report --plugins` (True: none named)."""
    return [str(p) for p in plugins] if isinstance(plugins, (list, tuple)) else []


def _verify(root, progress, plugins=None, kept_in=None) -> dict:
    """`verify all ROOT` run as its own command (the verifier rebuilds what analysis builds, so it stands
    above this stage), its verdict read back from its `--json` file."""
    progress("verify all ...")
    with tempfile.TemporaryDirectory(prefix="rlvr_report_") as scratch:
        verdict = Path(scratch) / "verify.json"
        proc = subprocess.run([sys.executable, "-m", "rlvr_sweep.verify", "all", str(root), "--json", str(verdict),
                               *(["--plugins", *_places(plugins)] if plugins is not None and plugins is not False else []),
                               *(["--plugins-kept-in", *map(str, kept_in)] if kept_in else [])],
                              capture_output=True, text=True)
        for line in proc.stdout.splitlines():
            if line.startswith(("PASS", "==")):
                progress(line)
        if not verdict.is_file():
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return {"passes": [{"name": "verify all", "ok": False, "problems": [tail], "seconds": 0.0,
                                "summary": f"did not run to the end (exit {proc.returncode})"}]}
        return json.loads(verdict.read_text())


def _verify_section(verdict: dict | None) -> str:
    head = "<h2 id='verify'>Verify</h2>"
    if verdict is None:
        return head + "<p class='why'>Not run (<code>--no-verify</code>): run <code>python -m rlvr_sweep.verify all ROOT</code>.</p>"
    results, advice, rows = verdict["passes"], verdict.get("advice"), []
    for r in results:
        unchecked = r.get("unchecked") or []
        verdict = "<span class='ok'>ok</span>" if r["ok"] and not unchecked else \
            f"<span class='failed'>INCOMPLETE ({len(unchecked)} not re-derived)</span>" if r["ok"] else \
            f"<span class='failed'>FAILED ({len(r['problems'])})</span>"
        problems = "".join(f"<li>{_e(p)}</li>" for p in r["problems"][:20])
        problems += "".join(f"<li>not re-derived: {_e(u)}</li>" for u in unchecked[:20])
        rows.append(f"<tr><td>{_e(r['name'])}</td><td>{verdict}</td><td style='white-space:normal'>{_e(r['summary'])}"
                    + (f"<ul>{problems}</ul>" if problems else "") + f"</td><td>{r['seconds']:.1f}s</td></tr>")
    overall = "some passes FAILED" if not all(r["ok"] for r in results) else \
        "every pass ok" if not any(r.get("unchecked") for r in results) else \
        f"no problem, but incomplete: {advice or 'plugin code not imported'} (report --plugins, verify all)"
    return head + f"<p>verify all: <b>{_e(overall)}</b></p><table><tr><th>pass</th><th>verdict</th><th>what it checked</th>" \
                  f"<th>time</th></tr>{''.join(rows)}</table>"


def _table(t) -> str:
    head = f"<h3 id='{_e(t.name)}'>{_e(t.title)}</h3>"
    if t.why:
        return head + f"<p class='why'>Not built: {_e(t.why)}</p>" + _notes(t)
    frame = t.display
    cells = "".join("<tr>" + "".join(_td(_cell(v)) for v in row) + "</tr>" for row in frame.itertuples(index=False))
    wide = " class='wide'" if len(frame.columns) >= WIDE else ""
    body = f"<table{wide}><tr>{''.join(f'<th>{_e(c)}</th>' for c in frame.columns)}</tr>{cells}</table>"
    return head + body + _notes(t)


def _td(text: str) -> str:
    """A cell; one holding a word longer than LONG_WORD characters (a path, a list joined by '/') may
    break inside its words, the others only between them (a column is never narrower than its words)."""
    long = any(len(word) > LONG_WORD for word in text.split())
    return f"<td class='brk'>{_e(text)}</td>" if long else f"<td>{_e(text)}</td>"


def _notes(t) -> str:
    """A table's notes; a note that lists many things (`Table.folded`) as one line that unfolds."""
    items = []
    for n in t.notes:
        if n in t.folded:
            summary, listed = t.folded[n]
            inner = "".join(f"<li>{_e(x)}</li>" for x in listed)
            items.append(f"<li><details><summary>{_e(summary)}</summary><ul>{inner}</ul></details></li>")
        else:
            items.append(f"<li>{_e(n)}</li>")
    return f"<ul class='note'>{''.join(items)}</ul>" if items else ""


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value)


def _figures(sweep: Sweep) -> dict[str, bytes | str]:
    """{name: PNG bytes, or the reason it was not drawn}, each figure drawn once into a scratch folder."""
    from rlvr_sweep.analysis.figures import FIGURES

    drawn: dict[str, bytes | str] = {}
    with tempfile.TemporaryDirectory(prefix="rlvr_report_") as scratch:
        for name, draw in FIGURES.items():
            paths, why = draw(sweep, scratch, formats=("png",))
            if why:
                drawn[name] = why
            for path in paths:
                drawn[Path(path).stem] = Path(path).read_bytes()
    return drawn


def _figure(name: str, png) -> str:
    from rlvr_sweep.analysis.curves import TITLES

    if name.startswith("curves_overlay_"):
        title = f"Training curves, every arm: {TITLES[name.removeprefix('curves_overlay_')]}"
    elif name.startswith("curves_health_"):
        title = f"Health, every arm that records it: {TITLES[name.removeprefix('curves_health_')]}"
    else:
        title = {"figure1": "Figure 1", "figure2": "Figure 2"}.get(name, name.replace("curves_", "Training curves: "))
    if isinstance(png, str):
        return f"<h3>{_e(title)}</h3><p class='why'>Not drawn: {_e(png)}</p>"
    data = base64.b64encode(png).decode()
    return f"<h3>{_e(title)}</h3><img alt='{_e(title)}' src='data:image/png;base64,{data}'>"


def _configs(sweep: Sweep, baseline: str | None = None) -> str:
    from rlvr_sweep.analysis.diff import config_difference, is_bookkeeping, resolve_side

    head = "<h2 id='configs'>Configs</h2>"
    units = sweep.units()
    if not units:
        return head + "<p class='why'>No arm row.</p>"
    configs = {u: resolve_side(str(sweep.runs_of(u).iloc[0]["run_dir"])).config for u in units}
    bases = baseline_units(sweep, baseline)  # {profile: its baseline arm row}, as Table 2B's "vs baseline" rows
    base_of = {u: bases.get(str(sweep.runs_of(u).iloc[0]["profile"]), units[0]) for u in units}
    names = " / ".join(f"<b>{_e(sweep.label(b))}</b>" for b in dict.fromkeys(base_of.values()))
    out = [head, f"<p>Each arm row's settings that differ from the baseline arm's, {names} "
                 "(the first run of each row; the runs of one row differ only in their seed).</p>"]
    for u in units:
        base = base_of[u]
        if u == base:
            continue
        differ = [(k, a, b) for k, a, b in config_difference(configs[base], configs[u]) if k != "seed"]
        rows = [r for r in differ if not is_bookkeeping(r[0])]
        rows += _input_differences(sweep.runs_of(base).iloc[0], sweep.runs_of(u).iloc[0])
        kept = [r for r in differ if is_bookkeeping(r[0])]  # labels and where results go, as `analysis diff` says
        header = f"<tr><th>setting</th><th>{_e(sweep.label(base))}</th><th>{_e(sweep.label(u))}</th></tr>"
        out.append(f"<h3>{_e(sweep.label(u))}</h3>" + (
            f"<table>{header}{_cells(rows)}</table>" if rows else "<p>No setting differs (the seed only).</p>")
            + (f"<details><summary>labels and bookkeeping that differ (not what a run computes): "
               f"{_e(', '.join(k for k, _, _ in kept))}</summary><table>{header}{_cells(kept)}</table></details>"
               if kept else ""))
    return "\n".join(out)


def _cells(rows) -> str:
    return "".join(f"<tr><td><code>{_e(k)}</code></td><td>{_e(a)}</td><td>{_e(b)}</td></tr>" for k, a, b in rows)


def _input_differences(a, b) -> list[tuple[str, str, str]]:
    """(identity input, its digest in a, in b) for the inputs both runs read whose content differs (the
    plugins' code, a data set, the model), shown beside the settings: they tell rows apart as much."""
    keys = [k for k in a.index if k.startswith("inputs.") and k in b.index]
    return [(k, str(a[k])[:12], str(b[k])[:12]) for k in keys
            if isinstance(a[k], str) and isinstance(b[k], str) and a[k] != b[k]]

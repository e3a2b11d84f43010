"""Every command the README and docs/ show parses as written.

The commands are the lines of their ```bash blocks (a trailing backslash joins lines; `VAR=value`
prefixes and comments are dropped). What is checked, by kind:
- `python -m rlvr_sweep <overrides>` (a run or a sweep): the line composes with Hydra as the command
  line would compose it (normalised as `python -m rlvr_sweep` does; a sweep's first and last job, a
  search's first and last corner);
- `python -m rlvr_sweep status ...` and `python -m rlvr_sweep.<stage> ...`: the stage's own argument
  parser accepts it (a misspelt option or subcommand fails here);
- `python bench/<file>.py`, `bash <file>`, `jupyter execute <notebook>`: the file exists.
Placeholders (`<run>`, `<hash>`, `$S42`) stand for paths and hashes and are replaced by a plain word; in
a run's line a variable standing alone (`$COMMON`) stands for settings set elsewhere and is left out.
Other programs (pip, pytest, git, squeue) are the user's, and not checked. Running the README's
quick start for real is the slow tier's job (tests/sweep/test_cli.py and the shared smoke sweep).

The README's shown outputs (its ```text blocks) are what the commands print today: `diff baseline
ra_flat` (which reads only the arm files) is run and compared whole; the sweep summary and the `status`
table are read back into the rows they show and printed again by the code that prints them, so their
layout, columns and totals are today's, and the summary's row agrees with a real smoke run of its arm
in everything but the numbers a run measures.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
from pathlib import Path

import pytest
from hydra import initialize_config_dir

from tests.conftest import CONF_DIR, REPO
from tests.helpers import shared_compositions

DOCS = [REPO / "README.md", REPO / "launchers" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PARSERS = {"analysis": "rlvr_sweep.analysis.cli", "data": "rlvr_sweep.data.cli", "evaluation": "rlvr_sweep.evaluation.cli",
           "policy": "rlvr_sweep.policy.cli", "store": "rlvr_sweep.store.collect_files", "verify": "rlvr_sweep.verify.cli"}
_BLOCK = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.S | re.M)
WHOLE = "__variable__"  # a variable standing alone: a path for a stage's command, settings for a run's
_WHOLE_VARIABLE = re.compile(r"(?<=\s)\$\{?[A-Za-z_][A-Za-z_0-9]*\}?(?=\s|$)")
_PLACEHOLDER = re.compile(r"<[A-Za-z_][^<>\s]*>|\$\{?[A-Za-z_][A-Za-z_0-9]*\}?|\$\(.*?\)")


def commands(path: Path) -> list[str]:
    """The block's command lines; a variable a block exports (`export RLVR_SWEEP_PLUGINS=...`) prefixes the
    lines after it, as the shell would pass it on."""
    out = []
    for block in _BLOCK.findall(path.read_text()):
        exported = ""
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("export ") and "=" in line:
                exported += line[len("export "):].strip() + " "
            elif line and not line.startswith("#"):
                out.append(exported + line)
    return out


def plugins_of(line: str) -> str | None:
    """The RLVR_SWEEP_PLUGINS a line sets before its program (a repository path), or None."""
    match = re.match(r"^(?:[A-Za-z_][A-Za-z_0-9]*=\S*\s+)*?RLVR_SWEEP_PLUGINS=(\S+)", line)
    return match[1] if match else None


def words(line: str) -> list[str]:
    line = _WHOLE_VARIABLE.sub(" " + WHOLE + " ", line)  # `$COMMON`, `$S42`: see check_run_line
    argv = shlex.split(_PLACEHOLDER.sub("X", line), comments=True)
    while argv and re.match(r"^[A-Za-z_][A-Za-z_0-9]*=", argv[0]):  # VAR=value before the program
        argv.pop(0)
    for stop in ("|", "&&", ";", ">", "2>&1", "&"):  # the first command of a pipeline or a list
        if stop in argv:
            argv = argv[:argv.index(stop)]
    return argv


def every_command():
    return [(path, line) for path in DOCS for line in commands(path)]


def test_the_docs_show_commands():
    found = every_command()
    ours = [line for _, line in found if "python -m rlvr_sweep" in line]
    assert len(ours) >= 40, ours  # a check that checked nothing fails
    assert {p.name for p, line in found if "python -m rlvr_sweep" in line} >= {"README.md"}


PASSED: set = set()  # (arguments, plugins) of the `python -m rlvr_sweep` lines already checked, in any doc


@pytest.mark.parametrize("path,line", every_command(), ids=lambda v: v.name if isinstance(v, Path) else v[:80])
def test_every_command_parses(path, line, monkeypatch):
    plugins = plugins_of(line)
    if plugins:  # the plugin the line names: its options and arms, as the command finds them
        from rlvr_sweep.plugins import ENV, load_environment_plugins

        monkeypatch.setenv(ENV, str(REPO / plugins))
        load_environment_plugins()
    argv = words(line)
    if argv[:1] == ["python"] and argv[1:2] == ["-m"] and len(argv) > 2:
        module, args = argv[2], argv[3:]
        if module == "rlvr_sweep" and (tuple(args), plugins) not in PASSED:  # a repeat: the same check
            check_run_line(args)
            PASSED.add((tuple(args), plugins))
        elif module.startswith("rlvr_sweep."):
            check_stage_line(module.split(".", 1)[1], ["X" if a == WHOLE else a for a in args])
    elif argv[:1] == ["python"] and len(argv) > 1 and argv[1].endswith(".py"):
        assert (REPO / argv[1]).is_file(), f"{path.name}: {argv[1]} does not exist"
    elif argv[:1] == ["bash"] and len(argv) > 1:
        assert (REPO / argv[1]).is_file(), f"{path.name}: {argv[1]} does not exist"
    elif argv[:2] == ["jupyter", "execute"]:
        assert (REPO / argv[2]).is_file(), f"{path.name}: {argv[2]} does not exist"


def check_stage_line(stage: str, args: list[str]) -> None:
    if stage == "analysis" and args[:1] == ["diff"]:
        parser = importlib.import_module("rlvr_sweep.analysis.diff")._parser()
        args = args[1:]
    elif "." in stage:  # a module run as a script (`python -m rlvr_sweep.policy.build_tiny`): it exists
        assert importlib.util.find_spec(f"rlvr_sweep.{stage}") is not None, f"no module rlvr_sweep.{stage}"
        return
    else:
        assert stage in PARSERS, f"no command python -m rlvr_sweep.{stage}"
        parser = importlib.import_module(PARSERS[stage])._parser()
    _parses(parser, args)


def check_run_line(args: list[str]) -> None:
    from rlvr_sweep.sweep.cli import MULTIRUN_FLAGS, normalize_argv
    from rlvr_sweep.sweep.preflight import (
        job_configs, job_part, one_composition_per_line, search_jobs, search_sweeper, sweep_jobs,
    )

    if args[:1] == ["status"]:
        from rlvr_sweep.sweep.status_cli import _parser

        rest = args[1:]
        if "--" in rest:  # the sweep-command form: its overrides compose too
            at = rest.index("--")
            rest, sweep = rest[:at], rest[at + 1:]
            check_run_line(sweep)
        if rest or "--" not in args:
            _parses(_parser(), rest)
        return
    args = [a for a in args if a != WHOLE]  # `$COMMON`: settings set elsewhere in the block
    line = [a for a in normalize_argv(["rlvr_sweep", *args])[1:] if a not in MULTIRUN_FLAGS and not a.startswith("--")]
    with one_composition_per_line():  # as the command's preflight composes it
        expand = search_jobs if search_sweeper(str(CONF_DIR), line) else sweep_jobs  # a search: its corners
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            jobs = expand(str(CONF_DIR), job_part(line))
            if len(jobs) > 1:  # one job is the line itself, which sweep_jobs has composed
                list(job_configs([jobs[0], jobs[-1]], shared_compositions()))  # as the preflight composes them


def _parses(parser, args: list[str]) -> None:
    try:
        parser.parse_args(args)
    except SystemExit as stop:
        assert stop.code == 0, f"{parser.prog} {' '.join(args)}: refused by its argument parser"


def test_the_checks_refuse_a_wrong_command():
    with pytest.raises(Exception, match="arm/ra_flta"):
        check_run_line(["+arm=ra_flta", "-m", "seed=1,2"])
    with pytest.raises(AssertionError, match="refused by its argument parser"):
        check_stage_line("analysis", ["tables", "outputs/runs", "--outt", "x"])
    with pytest.raises(AssertionError, match="refused by its argument parser"):
        check_run_line(["status", "outputs/runs", "--jsn"])
    assert words("RLVR_SWEEP_ROOT=$PWD/x python -m rlvr_sweep $COMMON seed=1 | tail -3") == [
        "python", "-m", "rlvr_sweep", WHOLE, "seed=1"]


# --- the outputs the README shows ------------------------------------------------------------------

def shown_output(first_line: str, path: Path = REPO / "README.md") -> list[str]:
    """The lines of the ```text block that starts with `first_line`."""
    blocks = [b.splitlines() for b in re.findall(r"^```text\n(.*?)^```", path.read_text(), re.S | re.M)]
    found = [b for b in blocks if b and b[0].startswith(first_line)]
    assert len(found) == 1, f"{path.name}: {len(found)} text blocks start with {first_line!r}"
    return found[0]


def test_the_diff_shown_is_what_diff_prints(capsys):
    from rlvr_sweep.analysis import diff

    assert "python -m rlvr_sweep.analysis diff baseline ra_flat" in [line for _, line in every_command()]
    assert diff.main(["baseline", "ra_flat"]) == 0
    printed = capsys.readouterr().out.rstrip("\n").splitlines()
    assert shown_output("A: arm baseline") == printed


SUMMARY_TITLE = "Sweep summary (greedy accuracy, %):"


def summary_infos(rows: list[str]) -> list[dict]:
    """The run.json fields a summary row shows, read back from it (one benchmark per run)."""
    infos = []
    for row in rows:
        arm, paper, run_hash, seed, horizon, caps, status, bench, base, trained, _delta, wall = row.split()
        rollout, readout = caps.split("/")
        infos.append({"arm": arm, "paper_arm": paper, "run_hash": run_hash, "seed": int(seed), "horizon": int(horizon),
                      "rollout_cap": int(rollout), "readout_cap": int(readout), "status": status,
                      "accuracy": {"base": {bench: float(base) / 100}, "trained": {bench: float(trained) / 100}},
                      "wall_seconds": float(wall)})
    return infos


def test_the_sweep_summary_shown_is_laid_out_as_the_sweep_prints_it():
    from rlvr_sweep.sweep.summary import format_summary

    title, *table, total = shown_output(SUMMARY_TITLE)
    infos = summary_infos(table[1:])
    assert [title, *format_summary(infos).splitlines()] == [SUMMARY_TITLE, *table]
    assert total == f"runs: {len(infos)} finished"  # as the sweep's closing line counts them


def test_the_sweep_summary_shown_is_what_a_smoke_run_of_its_arm_reports(finished_run):
    """The quick start's arm in the smoke profile (`finished_run`: ra_flat, 2 steps): the same arm, paper
    arm, horizon, caps, status and benchmark as the README's rows."""
    from rlvr_sweep import store
    from rlvr_sweep.sweep.summary import format_summary

    _, header, *rows, _ = shown_output(SUMMARY_TITLE)
    real = format_summary([store.read_run_json(finished_run)]).splitlines()
    # the fixture's short run is named by what it changes from the preset (`ra_flat [eval.limit=8, ...]`): the
    # README's run is the preset's, named `ra_flat` alone, in a column 24 wide
    assert re.match(r"ra_flat \[.*train\.steps=2", real[1]) and real[0].split() == header.split()
    real = [re.sub(r" \[[^\]]*\]", "", line) for line in real]

    def labels(row: str) -> tuple:  # arm, paper, horizon, caps, status, benchmark: not hash, seed or numbers
        return tuple(row.split()[i] for i in (0, 1, 4, 5, 6, 7))

    assert {labels(row) for row in rows} == {labels(real[1])}


def test_the_status_table_shown_is_laid_out_as_status_prints_it():
    from rlvr_sweep.sweep.status_cli import COLUMNS, render

    shown = shown_output("arm ")
    header, table = shown[0], shown[1:shown.index("")]
    assert header.split() == [title for _, title in COLUMNS]
    starts = [header.index(title) for _, title in COLUMNS]
    rows = [{key: line[start:end].strip() for (key, _), start, end in zip(COLUMNS, starts, [*starts[1:], None])}
            for line in table]
    assert render(rows) == shown  # the table, its totals per state and per arm
    assert {r["state"] for r in rows} == {"queued", "running"}  # what `status` shows while a sweep runs


def test_the_table2b_shown_is_laid_out_as_tables_prints_it():
    """The README's Table 2B of a baseline + ra_flat smoke sweep: the columns Table 2B prints (on the
    hand-made sweep, seeds 42/101/7 as the README's), a declared row, then a row against the baseline arm
    (row 101 on) titled as the tables title it."""
    from rlvr_sweep.analysis import Sweep, build_tables
    from rlvr_sweep.analysis.contrasts import BASELINE_TITLE
    from tests.analysis import handmade

    header, rule, *rows = shown_output("| Row | Contrast |")
    two_arms = {name: t[t["arm"] != "ablate_skip"] for name, t in handmade.tables().items()}  # seeds 42/101/7
    table = build_tables(Sweep.from_tables(two_arms), None, n_resamples=50, seed=0, only=["table2b"])["table2b"]
    printed = table.markdown().splitlines()
    assert header in printed and rule in printed
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert [c[0] for c in cells] == ["13", "101"]
    assert cells[1][1] == f"{BASELINE_TITLE}: 4 - 1 (acc)"
    assert all(len(c) == len(header.strip("|").split("|")) for c in cells)

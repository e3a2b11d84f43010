"""Every command the README and docs/ show parses as written.

The commands are the lines of their ```bash blocks (a trailing backslash joins lines; `VAR=value`
prefixes and comments are dropped). What is checked, by kind:
- `python -m rlvr_sweep <overrides>` (a run or a sweep): the line composes with Hydra as the command
  line would compose it (normalised as `python -m rlvr_sweep` does; a sweep's first and last job);
- `python -m rlvr_sweep status ...` and `python -m rlvr_sweep.<stage> ...`: the stage's own argument
  parser accepts it (a misspelt option or subcommand fails here);
- `python bench/<file>.py`, `bash <file>`, `jupyter execute <notebook>`: the file exists.
Placeholders (`<run>`, `<hash>`, `$S42`) stand for paths and hashes and are replaced by a plain word; in
a run's line a variable standing alone (`$COMMON`) stands for settings set elsewhere and is left out.
Other programs (pip, pytest, git, squeue) are the user's, and not checked. Running the README's
quick start for real is the slow tier's job (tests/sweep/test_cli.py and the shared smoke sweep).
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


@pytest.mark.parametrize("path,line", every_command(), ids=lambda v: v.name if isinstance(v, Path) else v[:80])
def test_every_command_parses(path, line, monkeypatch):
    plugins = plugins_of(line)
    if plugins:  # the plugin the line names: its options and arms, as the command finds them
        from rlvr_sweep.config.plugins import ENV, load_environment_plugins

        monkeypatch.setenv(ENV, str(REPO / plugins))
        load_environment_plugins()
    argv = words(line)
    if argv[:1] == ["python"] and argv[1:2] == ["-m"] and len(argv) > 2:
        module, args = argv[2], argv[3:]
        if module == "rlvr_sweep":
            check_run_line(args)
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
    from rlvr_sweep.sweep.preflight import job_configs, job_part, sweep_jobs

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
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        jobs = sweep_jobs(str(CONF_DIR), job_part(line))
        if len(jobs) > 1:  # one job is the line itself, which sweep_jobs has composed
            list(job_configs([jobs[0], jobs[-1]]))  # composed as the preflight composes them


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

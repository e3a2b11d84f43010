"""`python -m rlvr_sweep.analysis.notebooks NOTEBOOK... [--root DIR] [--out DIR]`: run each notebook in a
fresh kernel and write it, results included, as one self-contained HTML page, `<out>/<name>.html`
(default `outputs/notebooks`): printed lines, tables and figures, viewable in any browser, with no
Jupyter server. nbclient executes it and nbconvert's HTML exporter writes the page; the notebook file is
left as it was (notebooks are committed without outputs).

The kernel starts in the notebook's own folder, so a notebook's default `../outputs/runs` is the
repository's `outputs/runs`. `--root DIR` is passed to it as `RLVR_SWEEP_ROOT`; `RLVR_ANALYSIS_OUT` and
`RLVR_CONTRASTS` pass through from the environment (a relative path in any of the three is taken from
the folder the command runs in, not the notebook's). The kernel's channels are encrypted where the
installed Jupyter can do so (CurveZMQ), which is what keeps a clean run free of the kernel's
"running over TCP without encryption" warning.

Exit 0: every notebook ran and its page was written; 1: a cell raised or timed out (its page is still
written, ending at that cell's error, and one line names the cell); 2: bad input (a notebook that is
missing or unreadable, a kernel that is not installed, nbconvert not installed).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rlvr_sweep.io import atomic_write_bytes

PROG = "python -m rlvr_sweep.analysis.notebooks"
DEFAULT_OUT = "outputs/notebooks"
PATH_VARIABLES = ("RLVR_SWEEP_ROOT", "RLVR_ANALYSIS_OUT", "RLVR_CONTRASTS")  # what the notebooks read


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("notebooks", nargs="+", metavar="NOTEBOOK", help="a .ipynb file, e.g. notebooks/analysis.ipynb")
    p.add_argument("--root", default=None,
                   help="the sweep root the notebooks read (RLVR_SWEEP_ROOT; default: the notebook's own, "
                        "../outputs/runs from its folder)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"folder for the HTML pages (default {DEFAULT_OUT})")
    p.add_argument("--timeout", type=int, default=None, help="seconds one cell may run (default: no limit)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import nbformat
        from jupyter_client.kernelspec import NoSuchKernel
        from nbconvert import HTMLExporter
    except ImportError as err:
        print(f"notebooks: error: {err.name} is not installed: pip install -e '.[test]' (or pip install nbconvert)",
              file=sys.stderr)
        return 2
    if args.root is not None and not Path(args.root).is_dir():
        print(f"notebooks: error: --root {args.root} is not a folder", file=sys.stderr)
        return 2
    books = []
    for name in args.notebooks:
        try:
            books.append((Path(name), nbformat.read(name, as_version=4)))
        except (OSError, ValueError, nbformat.ValidationError) as err:  # missing, a folder, not JSON or a notebook
            print(f"notebooks: error: {name}: cannot read it as a notebook ({type(err).__name__}: "
                  f"{str(err).splitlines()[0][:200] if str(err) else 'no detail'})", file=sys.stderr)
            return 2
    out, failed = Path(args.out), 0
    exporter = HTMLExporter()
    for path, book in books:
        try:
            why = _execute(book, path.resolve().parent, args.timeout, _kernel_env(args.root))
        except NoSuchKernel as err:
            print(f"notebooks: error: {path}: its kernel {err.name!r} is not installed in this environment "
                  "(pip install ipykernel)", file=sys.stderr)
            return 2
        body, _ = exporter.from_notebook_node(book)
        page = out / f"{path.stem}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(page, body.encode("utf-8"))
        size = page.stat().st_size
        if why is None:
            print(f"{path}: wrote {page} ({size / 1024:.0f} kB)")
        else:
            failed += 1
            print(f"notebooks: error: {path}: {why}; the page shows it: {page} ({size / 1024:.0f} kB)",
                  file=sys.stderr)
    return 1 if failed else 0


def _kernel_env(root: str | None) -> dict[str, str]:
    """This environment, with `--root` as RLVR_SWEEP_ROOT and the notebooks' paths made absolute: the kernel
    runs in the notebook's folder, and a path typed here means one from here."""
    env = {**os.environ, **({"RLVR_SWEEP_ROOT": root} if root is not None else {})}
    for name in PATH_VARIABLES:
        value = env.get(name)
        if value and (name != "RLVR_CONTRASTS" or Path(value).is_file()):  # else a shipped list's name
            env[name] = str(Path(value).expanduser().resolve())
    # ipykernel 6 on Python >= 3.11 warns that frozen modules may hide breakpoints: no debugger is used here
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return env


def _execute(book, folder: Path, timeout: int | None, env: dict[str, str]) -> str | None:
    """Run `book` in place (outputs filled in, as far as it got); None when every cell ran, else why not."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    running = [0]  # the cell being run, counting the notebook's cells from 1 as a viewer shows them

    def started(cell, cell_index):
        running[0] = cell_index + 1

    client = NotebookClient(book, timeout=timeout, kernel_name=book.metadata.get("kernelspec", {}).get("name", ""),
                            resources={"metadata": {"path": str(folder)}}, config=_kernel_config(),
                            on_cell_start=started)
    try:
        client.execute(env=env)
    except CellExecutionError as err:
        return f"cell {running[0]} raised {err.ename}: {_first_line(err.evalue)}"
    except (CellTimeoutError, DeadKernelError) as err:
        return f"cell {running[0]} did not finish ({type(err).__name__}: {_first_line(str(err))})"
    return None


def _kernel_config():
    """Encrypt the kernel's channels where this jupyter_client can provision keys and pyzmq has CurveZMQ."""
    import zmq
    from jupyter_client import KernelManager
    from traitlets.config import Config

    if "transport_encryption" in KernelManager.class_trait_names() and zmq.has("curve"):
        return Config({"KernelManager": {"transport_encryption": "auto"}})
    return Config()


def _first_line(text: str) -> str:
    lines = [line for line in str(text).splitlines() if line.strip()]
    return lines[0][:200] if lines else "no detail"


if __name__ == "__main__":
    from rlvr_sweep.io.entry import run_command

    run_command(PROG, main)

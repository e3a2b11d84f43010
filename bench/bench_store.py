"""How `store collect`, `analysis tables` and `verify all` grow with the number of finished runs.

Makes real smoke runs once (the templates: Arms 1, 4, 5 at 512 tokens and Arm 12 at 1,024, seeds 42,
101, 7, through the real training code), then stores of N runs made of copies of them under new
identities: copy k of a template is the same arm with `train.lr` changed in its config (so a new
arm row, as a researcher's variants are), a new run and group hash, its tables' key columns rewritten,
its manifest resealed and its saved model hard-linked. Every store passes `verify all`. Each command runs
in a fresh process (imports included), as a user runs it; the figures printed are seconds, seconds
per run, and the growth exponent b of t ~ N^b between successive sizes (1 = linear). `collect` also
reports its peak memory (ru_maxrss of its process). `collect` runs twice: `collect_first` with nothing
remembered under the store (`store.remembered`: it hashes and parses every table; files younger than
2 s are not remembered, so a store made just before is remembered by the second call), then `collect`
as every later call finds it; `tables` and `verify` run after them. `verify` is also put beside a bare
`python -c 'import torch'` timed right after each of its runs (`import_torch_seconds`; `vs_import_torch`:
how many of those the command takes, pair by pair; its goal at 64 runs is 2.5), since torch's imports
are a floor of `verify all` and machines differ in them. `--repeats N` runs each command N times (each
`verify` followed by its `import torch`) and prints the medians.

    python bench/bench_store.py                                   # 64, 256, 1024 runs; collect also at 10,000
    python bench/bench_store.py --sizes 64,1024 --collect-sizes "" --commands tables,verify --repeats 3
    python bench/bench_store.py --sizes 6 --collect-sizes "" --template-arms ra_flat --template-steps 2 \
        --template-limit 4 --root /tmp/small                      # the tests' size
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
TEMPLATE_ARMS = {"baseline": ["+arm=baseline"], "ra_flat": ["+arm=ra_flat"], "stopped_tree": ["+arm=stopped_tree"],
                 "stopped_tree_h1024": ["+arm=stopped_tree", "horizon=1024"]}
SEEDS = (42, 101, 7)
TABLES = ("steps", "rollouts", "pairs", "grades")


def env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


def make_templates(root: Path, steps: int | None, limit: int | None, arms=tuple(TEMPLATE_ARMS)) -> list[Path]:
    """The real smoke runs every store is copied from (made once; reused when present)."""
    done = sorted(root.glob("smoke/*/h*_s*_*/DONE"))
    if len(done) == len(arms) * len(SEEDS):
        return [d.parent for d in done]
    shutil.rmtree(root, ignore_errors=True)
    extra = ([f"train.steps={steps}"] if steps else []) + ([f"eval.limit={limit}"] if limit else [])
    for arm in (TEMPLATE_ARMS[a] for a in arms):
        subprocess.run([sys.executable, "-m", "rlvr_sweep", *arm, "profile=smoke", *extra, f"run.out_root={root}",
                        "-m", "seed=" + ",".join(map(str, SEEDS))], check=True, env=env(), cwd=root.parent,
                       capture_output=True)
    return [d.parent for d in sorted(root.glob("smoke/*/h*_s*_*/DONE"))]


def _hash(*parts) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()


def clone(template: Path, store: Path, variant: int) -> Path:
    """Copy `variant` of a template run under a new identity (variant 0: the template's own identity)."""
    from rlvr_sweep import store as results
    from rlvr_sweep.store.manifest import manifest_bytes

    info = json.loads((template / "run.json").read_text())
    run_hash = info["run_hash"] if variant == 0 else _hash(info["run_hash"], variant)[:8]
    group = info["group_hash"] if variant == 0 else _hash(info["group_hash"], variant)[:12]
    target = store / template.relative_to(template.parents[2]).parent / f"h{info['horizon']}_s{info['seed']}_{run_hash}"
    target.mkdir(parents=True)
    for item in template.iterdir():
        if item.name == "model":
            (target / "model").mkdir()
            for f in item.iterdir():
                os.link(f, target / "model" / f.name)
        elif item.is_dir():
            shutil.copytree(item, target / item.name)
        elif item.suffix == ".parquet" and item.stem in TABLES:
            table = pq.read_table(item)
            i = table.schema.get_field_index("run_hash")
            table = table.set_column(i, "run_hash", pa.array([run_hash] * table.num_rows, table.schema.field(i).type))
            pq.write_table(table, target / item.name)
        elif item.name not in (results.MANIFEST, results.DONE_MARKER, "run.json", "config.yaml"):
            shutil.copy2(item, target / item.name)
    config = (template / "config.yaml").read_text()
    if variant:
        config = re.sub(r"(\n  lr: )([0-9.e+-]+)", lambda m: f"{m.group(1)}{float(m.group(2)) * (1 + variant * 1e-3):.6e}",
                        config, count=1)
    (target / "config.yaml").write_text(config)
    info.update(run_hash=run_hash, group_hash=group, settings_hash=_hash(info["settings_hash"], variant)[:12],
                run_dir=str(target.resolve()))
    (target / "run.json").write_text(json.dumps(info, indent=2, sort_keys=True, default=str))
    (target / results.MANIFEST).write_bytes(manifest_bytes(target))
    (target / results.DONE_MARKER).write_bytes(b"")
    return target


def make_store(templates: list[Path], store: Path, n: int) -> Path:
    if len(list(store.glob("smoke/*/h*_s*_*/DONE"))) == n:
        return store
    shutil.rmtree(store, ignore_errors=True)
    for i in range(n):
        clone(templates[i % len(templates)], store, i // len(templates))
    return store


COMMANDS = {
    "collect_first": lambda store, out: ["rlvr_sweep.store", "collect", str(store), "--out", str(out / "collected")],
    "collect": lambda store, out: ["rlvr_sweep.store", "collect", str(store), "--out", str(out / "collected")],
    "tables": lambda store, out: ["rlvr_sweep.analysis", "tables", str(store), "--out", str(out / "tables")],
    "verify": lambda store, out: ["rlvr_sweep.verify", "all", str(store), "--tables", str(out / "tables")],
}


def timed(name: str, store: Path, out: Path) -> tuple[float, float]:
    """(seconds, peak MiB) of one command in a fresh process."""
    code = ("import resource, runpy, sys, time; sys.argv = sys.argv[1:]; t = time.perf_counter(); "
            "rc = 0\ntry: runpy.run_module(sys.argv[0], run_name='__main__')\n"
            "except SystemExit as e: rc = e.code or 0\n"
            "print('BENCH', time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, rc, "
            "file=sys.stderr)")
    started = time.perf_counter()
    argv = COMMANDS[name](store, out)
    proc = subprocess.run([sys.executable, "-c", code, *argv], env=env(), capture_output=True, text=True)
    wall = time.perf_counter() - started
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("BENCH ")]
    if not line or line[-1].split()[3] != "0":
        raise SystemExit(f"{name} on {store} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return wall, float(line[-1].split()[2])


def import_torch_seconds() -> float:
    """Wall seconds of a bare `python -c 'import torch'` (the yardstick `verify` is put beside)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], env=env(), check=True, capture_output=True)
    return time.perf_counter() - started


def median(values: list[float]) -> float:
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="64,256,1024", help="store sizes for collect, tables and verify")
    p.add_argument("--collect-sizes", default="10000", help="further sizes for collect alone")
    p.add_argument("--root", default="/tmp/rlvr_bench_store")
    p.add_argument("--template-steps", type=int, default=None, help="train.steps of the templates (default: smoke's)")
    p.add_argument("--template-limit", type=int, default=None, help="eval.limit of the templates")
    p.add_argument("--template-arms", default=",".join(TEMPLATE_ARMS), help=f"of {', '.join(TEMPLATE_ARMS)}")
    p.add_argument("--commands", default="collect,tables,verify")
    p.add_argument("--repeats", type=int, default=1, help="times each command runs (in turn); the medians are printed")
    args = p.parse_args(argv)
    root = Path(args.root)
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    templates = make_templates(root / "templates", args.template_steps, args.template_limit,
                               [a for a in args.template_arms.split(",") if a])
    print(f"templates: {len(templates)} real smoke runs ({time.perf_counter() - started:.1f}s)", flush=True)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    extra = [int(s) for s in args.collect_sizes.split(",") if s]
    commands = [c for c in args.commands.split(",") if c]
    previous: dict[str, tuple[int, float]] = {}
    for n in sorted(set(sizes + extra)):
        t0 = time.perf_counter()
        store = make_store(templates, root / f"store_{n}", n)
        print(f"store of {n} runs ready ({time.perf_counter() - t0:.1f}s)", flush=True)
        out = root / f"out_{n}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        if "collect" in commands:  # first with nothing remembered (`store.remembered`), then again
            shutil.rmtree(store / ".rlvr_sweep", ignore_errors=True)
            commands_here = ["collect_first", *commands]
        else:
            commands_here = commands
        for name in commands_here:
            if n not in sizes and not name.startswith("collect"):
                continue
            if name == "verify" and "tables" not in commands:
                timed("tables", store, out)
            times, torch_times, mibs = [], [], []
            for _ in range(max(1, args.repeats)):  # collect_first again finds nothing remembered
                if name == "collect_first":
                    shutil.rmtree(store / ".rlvr_sweep", ignore_errors=True)
                seconds, mib = timed(name, store, out)
                times.append(seconds)
                mibs.append(mib)
                if name == "verify":  # the yardstick, timed beside it (the machine's speed drifts)
                    torch_times.append(import_torch_seconds())
            seconds, mib = median(times), max(mibs)
            growth = ""
            if name in previous:
                m, t = previous[name]
                growth = f" growth_exponent={math.log(seconds / t) / math.log(n / m):.2f}"
            previous[name] = (n, seconds)
            beside = ""
            if torch_times:  # the ratio of each pair, then their median
                ratio = median([a / b for a, b in zip(times, torch_times)])
                beside = f" import_torch_seconds={median(torch_times):.2f} vs_import_torch={ratio:.2f}"
            print(f"{name}: runs={n} seconds={seconds:.2f} per_run_ms={1000 * seconds / n:.1f} peak_mib={mib:.0f}"
                  f"{growth}{beside}", flush=True)


if __name__ == "__main__":
    main()

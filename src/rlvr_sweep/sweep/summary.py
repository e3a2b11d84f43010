"""The printed summary of a run or sweep: base vs trained accuracy per run.

Each Hydra job leaves a `run_dir.txt` pointer in its Hydra output folder; at the end of a
multirun the callback reads the pointed-to `run.json` files (so it works for any launcher whose
jobs share the file system) and prints one line per run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hydra.experimental.callback import Callback

if TYPE_CHECKING:  # pandas and the store's readers are imported where used: Hydra imports this module
    import pandas as pd  # (through the launchers' plugin) when every command starts

POINTER = "run_dir.txt"
JOB_ERROR = "job_error.txt"  # a job that failed, written next to the pointer
SKIPPED = "skipped"  # marker: the job found its run already finished
BUSY = "busy.txt"  # the job found its run being run by another process (who, in the file)


def accuracy_frame(infos: list[dict]) -> pd.DataFrame:
    """One row per run and benchmark: base and trained greedy accuracy and their difference."""
    import pandas as pd

    rows = []
    for info in infos:
        acc = info.get("accuracy", {})
        for name in sorted({n for by_name in acc.values() for n in by_name}):
            base, trained = acc.get("base", {}).get(name), acc.get("trained", {}).get(name)
            rows.append({
                "arm": info.get("arm"), "paper_arm": info.get("paper_arm"), "seed": info.get("seed"),
                "horizon": info.get("horizon"), "benchmark": name,
                "base": base, "trained": trained,
                "delta": trained - base if base is not None and trained is not None else None,
                "wall_seconds": info.get("wall_seconds"),
            })
    return pd.DataFrame(rows, columns=["arm", "paper_arm", "seed", "horizon", "benchmark", "base", "trained", "delta", "wall_seconds"])


def format_summary(infos: list[dict]) -> str:
    """One line per run and benchmark: base and trained (or, for task=evaluate, the checkpoint's) greedy
    accuracy. `horizon` is in paper tokens, as in the run folder's name; `caps` are the rollout and
    read-out caps the run actually used, in its profile's tokens (64/256 in the smoke profile). A read-out
    of a run's checkpoint shows that run's arm (with the read-out's name: `ra_flat:sampled_k3`), paper arm
    and horizon."""
    from rlvr_sweep.analysis.row_names import name_folders

    folders = [str(i["run_dir"]) for i in infos if i.get("task", "train") == "train" and i.get("run_dir")
               and (Path(str(i["run_dir"])) / "run.json").is_file()]
    rows, notes, _ = name_folders(folders)  # each run's row: its arm and what it changes from the arm's preset
    width = max([24, *(len(n) for n, _ in rows.values())])
    header = (f"{'arm':<{width}} {'paper':<6} {'hash':<8} {'seed':>5} {'horizon':>7} {'caps':>9} {'status':<9} "
              f"{'benchmark':<12} {'base':>6} {'trained':>7} {'delta':>7} {'wall_s':>7}")
    lines = [header]
    for info in infos:
        acc = info.get("accuracy", {})
        after = acc.get("trained", acc.get("eval", {}))
        names = sorted({n for by_name in acc.values() for n in by_name}) or ["-"]
        caps = f"{info.get('rollout_cap', '?')}/{info.get('readout_cap', '?')}"
        status = "skipped" if info.get("skipped") else info.get("status", "?")
        of = info.get("readout_of") or {}  # a read-out of a run's checkpoint: that run's arm and horizon
        arm = f"{of['arm']}:{info.get('eval_name', 'eval')}" if of.get("arm") else info.get("arm", "?")
        paper, horizon = (of.get("paper_arm"), of.get("horizon")) if of else (info.get("paper_arm"), info.get("horizon", "?"))
        if not of and str(info.get("run_dir")) in rows:
            arm, paper = rows[str(info["run_dir"])]
        for name in names:
            base, trained = acc.get("base", {}).get(name), after.get(name)
            delta = trained - base if base is not None and trained is not None else None
            lines.append(
                f"{arm:<{width}} {paper or '-':<6} {info.get('run_hash', '-'):<8} "
                f"{info.get('seed', '?'):>5} {horizon:>7} {caps:>9} {status:<9} {name:<12} "
                f"{_pct(base):>6} {_pct(trained):>7} {_pct(delta, signed=True):>7} "
                f"{info.get('wall_seconds', float('nan')):>7.1f}")
    return "\n".join([*lines, *(f"({note})" for note in notes)])


def _pct(value, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"


def sweep_infos(sweep_dir: Path, jobs: set[int] | None = None) -> list[dict]:
    """run.json of every job of a sweep (or of the job numbers `jobs` only), in job order; a job that failed
    before it wrote one, or found its run held by another process, is reported as such."""
    from rlvr_sweep import store

    infos = []
    found = [d for d in Path(sweep_dir).iterdir() if d.is_dir() and d.name.isdigit()] if Path(sweep_dir).is_dir() else []
    for job in sorted(found, key=lambda d: int(d.name)):
        if jobs is not None and int(job.name) not in jobs:
            continue
        pointer, error, busy = job / POINTER, job / JOB_ERROR, job / BUSY
        if not (pointer.is_file() or error.is_file() or busy.is_file()):
            continue  # not a job folder of ours
        # one run folder a line: a search's trial averaged over seeds has one per seed
        run_dirs = [Path(line) for line in pointer.read_text().splitlines() if line.strip()] if pointer.is_file() else []
        for at, run_dir in enumerate(run_dirs or [None]):
            if at and error.is_file() and not run_dir.is_dir():
                continue  # a trial's later seed, never started: its first failing run says why
            try:
                info = store.read_run_json(run_dir) if run_dir else {}
            except (OSError, ValueError):
                info = {"run_dir": str(run_dir), "status": "no run.json"}
            if (job / SKIPPED).is_file():
                info["skipped"] = True
            if busy.is_file():
                info.update(status="busy", error=busy.read_text().strip(), run_dir=str(run_dir))
            if error.is_file() and info.get("status") != "finished":
                info.update(status="failed", error=error.read_text().splitlines()[0])
                info.setdefault("run_dir", f"(job {job.name})")
            infos.append(info)
    return infos


def _job_number(name: str) -> int:
    return int(name) if name.isdigit() else 1 << 30


class SweepSummaryCallback(Callback):
    def __init__(self) -> None:
        self._search = None  # a search launch's record and locks (`sweep.search_record.StartedSearch`)

    def on_multirun_start(self, config, **kwargs) -> None:
        if _searching(config):
            import sys

            from rlvr_sweep.sweep.search_record import SearchBusyError, start_search

            start = {"line": list(config.hydra.overrides.task), "objective": _objective(config),
                     "direction": config.sweep.direction, "sweeper": config.hydra.sweeper._target_,
                     "swept": _swept(config), "asked": _asked(config)}
            try:
                self._search = start_search(config.run.out_root, config.hydra.sweep.dir, start)
            except SearchBusyError as err:
                print(f"Search not launched: {err}", file=sys.stderr, flush=True)
                raise SystemExit(3) from None

    def on_multirun_end(self, config, **kwargs) -> None:
        if _searching(config) and self._search is not None:
            try:
                return _end_search(self._search.folder, Path(config.hydra.sweep.dir))
            finally:
                self._search.close()
        infos = sweep_infos(Path(config.hydra.sweep.dir))
        if not infos:
            return
        print("\nSweep summary (greedy accuracy, %):\n" + format_summary(infos), flush=True)
        status = [("skipped" if i.get("skipped") else i.get("status", "?")) for i in infos]
        counts = {s: status.count(s) for s in sorted(set(status))}
        print("runs: " + ", ".join(f"{n} {s}" for s, n in counts.items()), flush=True)
        for info in infos:
            if info.get("status") in ("failed", "busy"):
                print(f"  {info['status']}: {info.get('run_dir')}: {info.get('error', '?')}", flush=True)
        if counts.get("failed"):
            raise SystemExit(1)  # a sweep with failed runs exits non-zero
        if counts.get("busy"):
            raise SystemExit(3)  # runs held by another process: not done here, not failed either


def _asked(config) -> int | None:
    """How many trials the search's sweeper is asked for (Optuna's `n_trials`, Nevergrad's `optim.budget`)."""
    sweeper = config.hydra.sweeper
    for asked in (sweeper.get("n_trials"), (sweeper.get("optim") or {}).get("budget")):
        if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
            return asked
    return None


def _swept(config) -> list[str]:
    """The keys the search varies: the line's sweeps (`train.lr=interval(...)`) and its sweeper's `params`."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    line = [o.get_key_element() for o in parser.parse_overrides(list(config.hydra.overrides.task))
            if o.is_sweep_override()]
    return sorted({*line, *(config.hydra.sweeper.get("params") or {})})


def _searching(config) -> bool:
    from rlvr_sweep.sweep.search import is_search

    return is_search(config.hydra.sweeper.get("_target_"))


def _objective(config) -> str:
    """The search's objective as its trials resolve it (the line was checked by the preflight)."""
    import copy

    from omegaconf import open_dict

    from rlvr_sweep.config import build_config
    from rlvr_sweep.sweep.search import objective_of

    try:
        raw = copy.deepcopy(config)
        with open_dict(raw):
            del raw["hydra"]  # Hydra's own node: its sweep folder's job number is not set in the launcher
        return objective_of(build_config(raw))
    except Exception:  # noqa: BLE001  (a swept key the fixed part cannot build: each trial resolves its own)
        return str(config.sweep.objective or "the validation split")


def _end_search(folder: Path, sweep_dir: Path) -> None:
    """The runs' summary of this search's own trials (a used sweep folder may hold another search's job
    folders), then the search's: each trial's value or why it failed, and the best; written to
    `summary.json` beside the trials. Exit 1 when no trial completed."""
    from rlvr_sweep.io import atomic_write_json
    from rlvr_sweep.sweep.search_record import asked_of, best_trial, read_search, summary_lines

    meta, trials, problems = read_search(folder)
    infos = sweep_infos(sweep_dir, jobs={t["number"] for t in trials})
    if infos:
        print("\nSweep summary (greedy accuracy, %):\n" + format_summary(infos), flush=True)
    for line in [*summary_lines(meta, trials, folder.parent.parent), *problems.lines]:
        print(line, flush=True)
    best = best_trial(trials, meta.get("direction", "maximize"))
    atomic_write_json(folder / "summary.json", {
        "objective": meta.get("objective"), "direction": meta.get("direction"), "trials": len(trials),
        "asked": asked_of(meta), "failed": sum(t["status"] == "failed" for t in trials), "best": best})
    print(f"search record: {folder}", flush=True)
    if best is None:
        raise SystemExit(1)

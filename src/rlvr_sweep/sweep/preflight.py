"""Check a sweep before any job is launched (or submitted to SLURM).

Every job of a multirun is composed from the command line's overrides and built into a checked
config (`config.build_config`: unknown keys, ranges, combinations) and planned as its run would be
(`run.plan`: the data files read, the model folder found, every prompt within the model's context,
the identity worked out); the line's settings of Hydra itself (its launcher and their keys) are
composed once. A problem stops the whole sweep at once, in one line naming the job (`mistakes`), instead
of failing job by job on the cluster. Data files and model files read once are not read again (`data.jsonl`,
`store.identity` memoise them by file), so a grid of many jobs on the same files plans quickly.
Jobs that differ only in plain values (`-m seed=42,101,7 train.lr=1e-6,2e-6`) are composed once and
the values set on a copy (`job_configs`), which gives what Hydra composes for each (tested); a job
that changes a config group, adds or deletes a key is composed by Hydra itself.
"""

from __future__ import annotations

import copy
import warnings
from contextlib import contextmanager
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf
from rlvr_sweep.config import build_config, check_keys
from rlvr_sweep.sweep.mistakes import one_line
from rlvr_sweep.sweep.records import Launch


CHECKED_JOBS: set[tuple[str, ...]] = set()  # every job `check_sweep` passed, as `job_part` gives it


def job_part(overrides) -> list[str]:
    """A job's overrides that reach its config: all but Hydra's own settings, except where Hydra finds
    config files (a researcher's own config folder, `hydra.searchpath=[file://...]`)."""
    return [o for o in overrides if not o.startswith("hydra") or o.startswith("hydra.searchpath=")]


def hydra_part(overrides) -> list[str]:
    """A job's overrides of Hydra's own settings (its launcher, folders, ...)."""
    return [o for o in overrides if o.startswith("hydra") and not o.startswith("hydra.searchpath=")]


class PreflightError(RuntimeError):
    """A job of the sweep would fail; the message names the job and the problem."""


def sweep_jobs(conf_dir: str, overrides: list[str]) -> list[list[str]]:
    """The override list of every job Hydra's basic sweeper expands a launch to: a preset's
    `hydra.sweeper.params` (e.g. `+sweep=paper_grid`) first, then the command line's overrides, which
    win on a shared key, as in `BasicSweeper.sweep`."""
    loader = GlobalHydra.instance().config_loader()
    parser = OverridesParser.create(config_loader=loader)
    master = line_config(parser, overrides)
    params = [f"{key}={value}" for key, value in (master.hydra.sweeper.get("params") or {}).items()]
    combined = parser.parse_overrides([*params, *overrides])
    return [job for batch in BasicSweeper.split_arguments(combined, None) for job in batch]


def job_configs(jobs: list[list[str]], composed: dict | None = None):
    """Each job's composed config (`hydra.compose`, without Hydra's own settings), in order.

    Hydra composes a config from the defaults list its group overrides choose, then sets the plain
    `key=value` overrides on it in order (`ConfigLoaderImpl._apply_overrides_to_config`). Jobs with the
    same group overrides share that composition here, and each job's values are set on a copy the
    same way; a job with a value on a key the config lacks or holds a mapping at (which Hydra may refuse
    or merge) is composed by Hydra itself. `composed` ({group overrides: composition}, never changed in
    place) keeps the compositions for a later call that finds the same config folders and options."""
    loader = GlobalHydra.instance().config_loader()
    parser = OverridesParser.create(config_loader=loader)
    composed = {} if composed is None else composed
    for job in jobs:
        overrides = parser.parse_overrides(job)
        values = [o for o in overrides if _plain_value(o, loader)]
        structure = tuple(o.input_line for o in overrides if o not in values)
        if structure not in composed:
            composed[structure] = compose("config", overrides=list(structure))
        base = composed[structure]
        if not all(_settable(base, o.key_or_group) for o in values):
            yield compose("config", overrides=job)
            continue
        cfg = copy.deepcopy(base)
        for o in values:
            OmegaConf.update(cfg, o.key_or_group, o.value(), merge=True)  # as Hydra sets a plain override
        yield cfg


def _plain_value(o: Override, loader) -> bool:
    """A plain `key=value` override (not `+`, `++` or `~`, not a config group, no package, not one of
    Hydra's own settings such as `hydra.searchpath`, which changes where configs are found)."""
    key = o.key_or_group
    return (o.type == OverrideType.CHANGE and o.package is None and not o.is_sweep_override() and "[" not in key
            and not key.startswith("hydra") and not loader.repository.group_exists(key.replace(".", "/")))


def _settable(cfg: DictConfig, key: str) -> bool:
    """Whether the config holds a plain value (or null) at `key`."""
    found = OmegaConf.select(cfg, key, default=_ABSENT, throw_on_missing=False)
    return found is not _ABSENT and not isinstance(found, DictConfig)


_ABSENT = object()


def check_sweep(conf_dir: str, overrides: list[str], record: bool = True, notes: list[str] | None = None) -> int:
    """Compose and plan every job (`run.plan`: settings, data rows, model folder, prompt lengths; a job
    whose run is finished only as far as `run.plan.locate` finds it); returns the number of jobs checked.
    With `record`, the jobs are written down for `status` (`sweep.records`) from the first one located,
    marked `checking` until every job passed, so a sweep is visible during a long preflight; a sweep the
    preflight refuses (or that is interrupted in it) leaves no record. `notes`: a list the memory a job keeps
    beyond the paper's recipe is named in (`run.memory`), one line per kind."""
    from rlvr_sweep.run import plan
    from rlvr_sweep.run.loggers import check_loggers
    from rlvr_sweep.run.memory import needs_reference, reference_note
    from rlvr_sweep.store import is_finished

    references: dict[str, int] = {}
    shards = ranks_per_run(overrides)

    def check(cfg, run_dir) -> None:
        check_loggers(cfg.logger)
        if not is_finished(run_dir):  # a finished run was checked when it ran
            planned = plan(cfg, shards)
            if needs_reference(cfg.objective):
                note = reference_note(cfg.model.dtype, planned.model_folder)
                references[note] = references.get(note, 0) + 1

    launch = Launch(overrides) if record else None
    try:
        jobs = located_jobs(conf_dir, overrides, check, located=launch.add if launch else None)
    except BaseException:
        if launch:
            launch.forget()
        raise
    CHECKED_JOBS.update(tuple(job["overrides"]) for job in jobs)
    if launch:
        launch.finish()
    if notes is not None:
        notes += [f"{n} job(s) keep {note}" for note, n in references.items()]
    return len(jobs)


def ranks_per_run(overrides: list[str]) -> int:
    """The ranks each run of a SLURM sweep will have (`hydra.launcher.tasks_per_node` x `nodes` on the line;
    `run.ranks`), which its memory plan divides the sharded terms among."""
    given = {o.split("=", 1)[0].lstrip("+"): o.split("=", 1)[1] for o in overrides if "=" in o}
    try:
        return max(1, int(given.get("hydra.launcher.tasks_per_node", 1)) * int(given.get("hydra.launcher.nodes", 1)))
    except ValueError:  # a swept value: Hydra refuses sweeping its own settings
        return 1


def search_jobs(conf_dir: str, overrides: list[str]) -> list[list[str]]:
    """The jobs that stand for a search's trials before any trial runs: a search space of any kind
    (`interval`, `range`, `choice`, tagged or not; from the line or a preset's `hydra.sweeper.params`) has its
    corners composed, built and planned: every key at its first value, then each key alone at each of its
    other values (an interval's two ends, a range's first and last, every choice). A trial in between is
    checked again as it starts (`sweep.trial`)."""
    loader = GlobalHydra.instance().config_loader()
    parser = OverridesParser.create(config_loader=loader)
    master = line_config(parser, overrides)
    params = [f"{key}={value}" for key, value in (master.hydra.sweeper.get("params") or {}).items()]
    last = {o.get_key_element(): o for o in parser.parse_overrides([*params, *overrides])}  # the line wins
    kept = [o.input_line for o in last.values() if not o.is_sweep_override()]
    swept = [(key, _corners(o)) for key, o in last.items() if o.is_sweep_override()]
    first = {key: values[0] for key, values in swept}
    jobs = [[*kept, *(f"{key}={value}" for key, value in first.items())]]
    for key, values in swept:
        jobs += [[*kept, *(f"{k}={value if k == key else v}" for k, v in first.items())] for value in values[1:]]
    return jobs


def _corners(o: Override) -> list[str]:
    if o.is_interval_sweep():
        return [str(o.value().start), str(o.value().end)]
    values = list(o.sweep_string_iterator())
    return [values[0], values[-1]] if o.is_range_sweep() and len(values) > 1 else values


def search_sweeper(conf_dir: str, overrides: list[str]) -> str | None:
    """The `_target_` of the line's sweeper when it searches (`sweep.search.is_search`), else None; a search
    sweeper whose package is missing is a PreflightError naming the package."""
    from rlvr_sweep.sweep.search import is_search

    with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        parser = OverridesParser.create(config_loader=loader)
        try:
            target = line_config(parser, overrides).hydra.sweeper.get("_target_")
        except Exception as err:  # the line's own mistake: said by the grid's preflight, or the missing plugin
            if any("hydra/sweeper=optuna" in o for o in overrides) and not _importable("hydra_plugins.hydra_optuna_sweeper"):
                raise PreflightError(OPTUNA_MISSING) from err
            return None
    if not is_search(target):
        return None
    module = str(target).rsplit(".", 1)[0]
    if not _importable(module):
        raise PreflightError(OPTUNA_MISSING if "optuna" in str(target).lower()
                             else f"the sweeper {target} does not import: is its package installed?")
    return str(target)


OPTUNA_MISSING = ("hydra/sweeper=optuna needs the hydra-optuna-sweeper package: pip install 'rlvr_sweep[search]' "
                  "(docs/search.md)")


def _importable(module: str) -> bool:
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


# settings that change which items a search's objective is read on: trials that differ in them are not one
# objective (a trial read out on 2 items ranked beside one read out on 8)
OBJECTIVE_ITEMS = ("eval.limit", "eval.benchmarks", "data.toy_seed", "data.toy_heldout_size", "data.splits_dir",
                   "data.root")


def _refuse_swept_objective_items(overrides: list[str], composed) -> None:
    """A search that varies what its objective is read on is refused before any trial (PreflightError)."""
    parser = OverridesParser.create()
    swept = {o.get_key_element().lstrip("+~") for o in parser.parse_overrides(list(overrides)) if o.is_sweep_override()}
    swept |= {str(k) for k in (composed.hydra.sweeper.get("params") or {})}
    bad = sorted(k for k in swept if k in OBJECTIVE_ITEMS or k.startswith("eval.benchmarks"))
    if bad:
        raise PreflightError(f"the search varies {bad}, which change the items its objective is read on: trials would "
                             "be ranked on different items as one objective; fix them on the line (e.g. eval.limit=200)")


def check_search(conf_dir: str, overrides: list[str]) -> tuple[int, list[str]]:
    """A search's preflight (`search_jobs`): its corners composed, built, located and planned as a grid's
    jobs are, its objective resolved on each (`sweep.search.objective_of`: the test-benchmark guard). Returns
    (corner jobs checked, overrides the line gains): a sweeper with a `direction` of its own takes the
    objective's (`sweep.direction`) unless the line sets it, and then they must agree; a sampler with an unset
    seed is seeded with the line's `seed` (so a relaunch proposes the same trials, finds their runs finished
    and reads them; `hydra.sweeper.sampler.seed=null` on the line keeps it unseeded); Optuna's sweeper
    becomes `CheckedOptunaSweeper` (the same, ending in one line where every trial failed), its failure rate
    1.0 unless the line sets one (a failed trial returns a marker, never raises). No launch record
    is written: the trials are recorded as they run (`sweep.search`)."""
    from rlvr_sweep.run import plan
    from rlvr_sweep.run.loggers import check_loggers
    from rlvr_sweep.store import is_finished
    from rlvr_sweep.sweep.search import objective_of

    def settings(cfg) -> None:
        check_loggers(cfg.logger)
        objective_of(cfg)

    def check(cfg, run_dir) -> None:
        if not is_finished(run_dir):
            plan(cfg)

    jobs = located_jobs(conf_dir, overrides, check, expand=search_jobs, what="corner", built=settings)
    with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
        composed = line_config(OverridesParser.create(config_loader=GlobalHydra.instance().config_loader()), overrides)
    _refuse_swept_objective_items(overrides, composed)
    sweeper, wanted, settled = composed.hydra.sweeper, composed.sweep.direction, []
    if "direction" in sweeper:
        given = [o for o in overrides if o.startswith("hydra.sweeper.direction=")]
        if not given:
            settled.append(f"hydra.sweeper.direction={wanted}")
        elif str(sweeper.direction) != wanted:
            raise PreflightError(f"hydra.sweeper.direction={sweeper.direction} but sweep.direction={wanted}: the "
                                 "search would optimise its objective the wrong way; set sweep.direction alone "
                                 "(the sweeper follows it)")
    sampler = sweeper.get("sampler")
    if (sampler is not None and "seed" in sampler and sampler.seed is None
            and not any(o.startswith("hydra.sweeper.sampler.seed=") for o in overrides)):
        settled.append(f"hydra.sweeper.sampler.seed={composed.seed}")  # a relaunch proposes the same trials
    if sweeper.get("_target_") == OPTUNA_SWEEPER:
        settled.append(f"hydra.sweeper._target_={CHECKED_OPTUNA}")
        if not any(o.startswith("hydra.sweeper.max_failure_rate=") for o in overrides):
            settled.append("hydra.sweeper.max_failure_rate=1.0")  # a failed trial is recorded, never fatal
    return len(jobs), settled


OPTUNA_SWEEPER = "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
CHECKED_OPTUNA = "hydra_plugins.rlvr_sweep_launchers.search.CheckedOptunaSweeper"


def located_jobs(conf_dir: str, overrides: list[str], check=None, located=None, expand=None,
                 what: str = "job", built=None, memory: bool = False) -> list[dict]:
    """Every job of the sweep composed, built (then `built(cfg)`: a check of the settings alone, before any
    file is looked for) and located (`run.plan.locate`), as `job_record`s, each passed to `located(job,
    n_jobs)` as soon as it is located; then each is passed to `check(cfg, run_dir)` (the long part: every
    job is located, and recorded, before any is checked). With `memory`, each record holds the job's estimated
    peak memory (`run.memory_plan`, in words). The first job that fails raises PreflightError naming it."""
    from rlvr_sweep.run import memory_plan
    from rlvr_sweep.run.plan import locate

    found = []
    with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
        try:
            jobs = (expand or sweep_jobs)(conf_dir, job_part(overrides))
            _compose_hydra_settings(jobs[0] if jobs else [], overrides)
        except Exception as err:  # the line itself: an unknown option, key or value
            raise PreflightError(f"the command line ({' '.join(overrides)}): {one_line(err)}") from err
        configs = job_configs(jobs)
        for number, job in enumerate(jobs, start=1):
            try:
                cfg = build_config(next(configs))
                if built:
                    built(cfg)
                where = locate(cfg)
            except Exception as err:
                raise PreflightError(f"{what} {number} of {len(jobs)} ({' '.join(job)}): {one_line(err)}") from err
            found.append((job_record(number, job, cfg, where.run_dir, where.identity.run, where.identity.inputs), cfg,
                          where.run_dir))
            if memory:
                est = memory_plan.estimate(cfg, where.model_folder, where.train_rows, where.eval_sets,
                                           shards=ranks_per_run(overrides))
                found[-1][0]["memory"] = est.words() if est else "no estimate (the model's config.json has no shape)"
            if located:
                located(found[-1][0], len(jobs))
        for record, cfg, run_dir in found if check else ():
            try:
                check(cfg, run_dir)
            except Exception as err:
                raise PreflightError(f"{what} {record['number']} of {len(jobs)} ({' '.join(record['overrides'])}): "
                                     f"{one_line(err)}") from err
    return [record for record, _, _ in found]


def _compose_hydra_settings(job: list[str], overrides: list[str]) -> None:
    """Compose the line's own settings of Hydra (`hydra/launcher=slurm_debug`, `hydra.launcher.partition=gpu`,
    all but those swept over) with a job, so a misspelt launcher or key of it fails here, before a launch
    record is written, and not in Hydra's launch after it."""
    parser = OverridesParser.create(config_loader=GlobalHydra.instance().config_loader())
    own = parser.parse_overrides(hydra_part(overrides))
    for o in own:
        if o.is_sweep_override():  # Hydra refuses it only once the sweep is launched
            raise ConfigCompositionException(f"Sweeping over Hydra's configuration is not supported: '{o.input_line}'")
    if own:
        _compose_with_hydra([*job, *(o.input_line for o in own)])


_LINE_CONFIGS: dict | None = None  # inside `one_composition_per_line`: {fixed overrides: composition}


@contextmanager
def one_composition_per_line():
    """Within it, `line_config` composes a line once, however many of the preflight's steps ask for it (the
    sweeper's kind, the preset's swept keys, the search's direction); outside it, every call composes."""
    global _LINE_CONFIGS
    outer = _LINE_CONFIGS
    _LINE_CONFIGS = {} if outer is None else outer
    try:
        yield
    finally:
        _LINE_CONFIGS = outer


def line_config(parser: OverridesParser, overrides: list[str]) -> DictConfig:
    """The config of the line's overrides that are not swept, with Hydra's own node (never changed in place:
    within `one_composition_per_line` the next step is given the same one)."""
    fixed = tuple(o.input_line for o in parser.parse_overrides(overrides) if not o.is_sweep_override())
    if _LINE_CONFIGS is None:
        return _compose_with_hydra(list(fixed))
    if fixed not in _LINE_CONFIGS:
        _LINE_CONFIGS[fixed] = _compose_with_hydra(list(fixed))
    return _LINE_CONFIGS[fixed]


def _compose_with_hydra(overrides: list[str]) -> DictConfig:
    """The config with Hydra's own node, without Hydra's warning that our launcher presets extend the
    submitit plugin's schema of the same name (launchers/README.md)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*'hydra/launcher/submitit_(slurm|local)' is validated against "
                                "ConfigStore schema", category=UserWarning)
        return compose("config", overrides=overrides, return_hydra_config=True)


def composition_problem(conf_dir: str, overrides: list[str]) -> str | None:
    """Why a single run's command line does not compose (unknown option, key or value, or an appended key
    the schema lacks), on one line; None when it composes."""
    with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
        try:  # with Hydra's own settings where the line has some; an appended `+train.stpes=5` before Hydra's folder
            check_keys(_compose_with_hydra(overrides) if hydra_part(overrides) else compose("config", overrides=overrides))
        except Exception as err:  # noqa: BLE001  (Hydra's and OmegaConf's errors: the line's mistake)
            return one_line(err)
    return None


def job_record(number: int, job: list[str], cfg, run_dir, run_hash: str | None = None, inputs: dict | None = None) -> dict:
    """What `status` shows of a job before its run folder exists (`sweep.records`, which keeps `run_dir`
    relative to `out_root`), with its identity inputs' digests (what its job checks it computes again:
    `sweep.planned`)."""
    from rlvr_sweep.config import paper_arm

    return {"number": number, "overrides": job, "arm": cfg.arm, "paper_arm": paper_arm(cfg), "seed": cfg.seed,
            "horizon": cfg.horizon.tokens, "profile": cfg.profile.name, "out_root": str(Path(cfg.run.out_root).resolve()),
            "run_dir": str(Path(run_dir).resolve()), "run_hash": run_hash,
            **({"inputs": {name: part.get("sha256") for name, part in inputs.items()}} if inputs else {})}

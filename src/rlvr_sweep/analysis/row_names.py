"""Every arm row named by what it is: its arm, and what it changes from that arm's preset (docs/analysis.md,
"Row names").

A row's **preset** is the config `+arm=<arm> profile=<profile> horizon='<horizon>'` composes, as a run composes
it (the package's own arms; a plugin's arm is not composed here, which would import its code). A row's
**departures** are the identity settings its stored config.yaml gives otherwise (a setting added to the schema
after the run was made, absent from its config, is not one). Shown as typed on the command line: an option
chosen otherwise as `reward=len_penalty` (the settings that come with that option are not repeated, nor the
`plugins` list that names where it lives), a number to 3 significant digits.

A row keeps its paper arm number only when it chooses every option of its arm (of the groups that tell the
paper's arms apart, `ARM_GROUPS`) as the arm does, loads no plugin and trains no LoRA adapter: `+arm=ra_flat train.lr=3e-5` is still Arm 4
at another learning rate (`4. ra_flat [train.lr=3e-05]`), and a setting of one of its options changed shows the
same way (`12. stopped_tree h1024 [sampler.bifurcate_after_active=1]`); `+arm=ra_flat estimator=tree_mean` is
not Arm 4 (`ra_flat [estimator=tree_mean]`). Departures every row of a profile shares (a pilot's `train.steps=16`) are
said once, in a note, not in each name. Rows left alike after that (the same settings, other inputs: two
versions of one plugin's code, another model) are told apart by the input that differs, numbered in the order
their first runs were made (`clip_lenpen [plugin lenpen.rewards v2]`); `analysis diff` gives the whole
difference of any two runs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from rlvr_sweep.analysis.grouping import MAX_SHOWN, flatten, identity_settings

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
ARM_GROUPS = ("sampler", "estimator", "optimizer_step", "objective", "reward", "horizon")  # what arms differ in
HIDDEN = ("plugins",)  # where an option lives: the option's name says it
ADAPTED = "lora."  # a LoRA adapter trains something else than the paper's full weights


_PRESETS: dict = {}  # (arm, profile, horizon) -> preset_settings' answer, once per process (or `remember_presets`)


def preset_settings(arm: str, profile: str, horizon: int) -> dict | None:
    """The identity settings of the package arm `arm` composed under `profile` at `horizon` (flattened, empty
    mappings dropped); None when it is not the package's arm or does not compose. Composed once per process."""
    key = (arm, profile, horizon)
    if key not in _PRESETS:
        _PRESETS[key] = _composed(arm, profile, horizon)
    return _PRESETS[key]


def presets(keys) -> dict:
    """{(arm, profile, horizon): preset_settings(...)} of each key: what `remember_presets` takes."""
    return {key: preset_settings(*key) for key in keys}


def remember_presets(found: dict) -> None:
    """Presets `presets` composed in another process (`composed_beside`) taken as this process's own; one already
    composed here stays."""
    for key, value in found.items():
        _PRESETS.setdefault(key, value)


def composed_beside(root, profile: str | None = None):
    """A `forked.Beside` child composing `presets` for the (arm, profile, horizon) of each finished training run
    under `root` (of `profile`, if given) as its run.json gives them, while this process does other work
    (`load_sweep` collects: Hydra takes a few tenths of a second a preset). Its one result goes to
    `remember_presets`. A run.json that cannot be read, or with a field missing or of the wrong type, asks for
    nothing: naming composes any preset still missing here. None where this process may not fork (a daemonic
    child)."""
    import multiprocessing  # here, as the others: `status` and a sweep's summary import this module without them

    from rlvr_sweep.analysis.forked import Beside
    from rlvr_sweep.store import DONE_MARKER, RUN_JSON, walk

    if multiprocessing.current_process().daemon:
        return None

    def keys() -> set:
        out = set()
        for folder in walk(root).runs:
            try:
                if not (folder / DONE_MARKER).is_file():
                    continue
                info = json.loads((folder / RUN_JSON).read_text())
                if info.get("task", "train") != "evaluate" and profile in (None, str(info["profile"])):
                    out.add((str(info["arm"]), str(info["profile"]), int(info["horizon"])))
            except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
                continue
        return out

    return Beside([lambda: presets(keys())])


def _composed(arm: str, profile: str, horizon: int) -> dict | None:
    if not (CONF_DIR / "arm" / f"{arm}.yaml").is_file():
        return None
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    from rlvr_sweep.config import build_config, register_configs

    register_configs()
    running = get_gh_backup()  # the sweep's own Hydra, when its summary names the rows: put back as it was
    try:
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            raw = compose("config", overrides=[f"+arm={arm}", f"profile={profile}", f"horizon='{horizon}'"])
        cfg = build_config(raw)
    except Exception:  # noqa: BLE001 - an arm that no longer composes so: no preset, the row is named as before
        return None
    finally:
        restore_gh_from_backup(running)
    return _preset_of(cfg)


def _preset_of(cfg) -> dict:
    import dataclasses

    return _settings(flatten(json.loads(json.dumps(dataclasses.asdict(cfg), default=str))))


PRESET_KEYS = ("arm", "profile", "horizon")  # what `preset_settings` composes a preset from


def remember_preset(cfg, overrides: list[str]) -> None:
    """When the command line that composed `cfg` sets nothing but its arm, profile and horizon, bookkeeping
    (`run.out_root=...`) and Hydra's own settings, `cfg` is that preset: the summary naming its row composes it no
    second time (`preset_settings`; tests/analysis/test_row_names.py holds the two equal)."""
    from rlvr_sweep.analysis.grouping import BOOKKEEPING

    unread = ("hydra.", *(b + "." for b in BOOKKEEPING))  # Hydra's own settings, and those under a bookkeeping key
    for override in overrides:
        key, eq, _ = override.lstrip("+").partition("=")
        if override.startswith("~") or not eq or key.startswith("hydra.searchpath"):
            return
        if not (key in PRESET_KEYS or key in BOOKKEEPING or key.startswith(unread)):
            return
    if (CONF_DIR / "arm" / f"{cfg.arm}.yaml").is_file():  # a package arm (a plugin's is never composed)
        remember_presets({(cfg.arm, cfg.profile.name, cfg.horizon.tokens): _preset_of(cfg)})


def _settings(config: dict) -> dict:
    return {k: v for k, v in identity_settings(config).items() if v != {}}


def departures(config: dict, preset: dict) -> dict:
    """{key: value} of each identity setting of a run's flattened `config` that differs from `preset`'s."""
    return {k: v for k, v in _settings(config).items() if not _same(v, preset.get(k))}


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def keeps_paper_number(departed: dict) -> bool:
    """Whether a row departing from its preset in `departed` is still its paper arm: no option of the groups that
    tell the paper's arms apart is chosen otherwise, and no plugin joined (module docstring)."""
    return not any(k in HIDDEN or (k.endswith(".name") and k.split(".")[0] in ARM_GROUPS) or k.startswith(ADAPTED)
                   for k in departed)


def shown(departed: dict) -> list[str]:
    """The departures as a name shows them (module docstring), options first."""
    chosen = {k[: -len(".name")] for k in departed if k.endswith(".name")}
    out = [f"{group}={_value(departed[f'{group}.name'])}" for group in sorted(chosen)]
    for key in sorted(departed):
        group = key.split(".")[0]
        if key.endswith(".name") and key[: -len(".name")] in chosen or group in chosen or key in HIDDEN:
            continue
        out.append(f"{key}={_value(departed[key])}")
    return out


def _value(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_value(v) for v in value) + "]"
    text = str(value)
    if text.startswith(("/", "~", "./", "../")) and "/" in text.rstrip("/"):  # a folder of this machine: its name
        text = "…/" + text.rstrip("/").rsplit("/", 1)[1]
    return repr(text) if not text or any(c in text for c in " ,=[]") else text


def bracket(parts: list[str]) -> str:
    """` [a, b, c, d, +2 more]`, or "" for none."""
    if not parts:
        return ""
    more = f", +{len(parts) - MAX_SHOWN} more" if len(parts) > MAX_SHOWN else ""
    return f" [{', '.join(parts[:MAX_SHOWN])}{more}]"


def common(departed: dict[str, dict]) -> dict:
    """The departures every one of several rows shares (same key, same value); {} for one row."""
    rows = list(departed.values())
    if len(rows) < 2:
        return {}
    first = rows[0]
    return {k: v for k, v in first.items() if all(k in r and _same(r[k], v) for r in rows[1:])}


def input_versions(keys: list[str], inputs: dict[str, dict], started: dict[str, float]) -> dict[str, list[str]]:
    """{key: ["<input> v<k>", ...]} for rows alike in settings: each input whose digest differs among them,
    its versions numbered by the rows' first runs' start (`inputs[key]`: {input name: digest}; a plugin's
    input names its changed modules, `plugin_modules`)."""
    order = sorted(keys, key=lambda k: (started.get(k, math.inf), k))
    names = sorted({n for k in keys for n in inputs.get(k, {})})
    out: dict[str, list[str]] = {k: [] for k in keys}
    for name in names:
        digests = [inputs.get(k, {}).get(name) for k in order]
        if len(set(digests)) < 2:
            continue
        version = {d: i + 1 for i, d in enumerate(dict.fromkeys(digests))}
        for key, digest in zip(order, digests):
            out[key].append(f"{name} v{version[digest]}")
    return out


def plugin_modules(run_dirs: list[str]) -> dict[str, dict]:
    """{run_dir: {"plugin <module>": digest}} from each run.json's recorded plugin files (what tells two versions
    of one plugin apart by the module edited); a run.json that cannot be read gives {}."""
    out = {}
    for run_dir in run_dirs:
        try:
            info = json.loads((Path(run_dir) / "run.json").read_text())
            files = info["inputs"]["plugins"]["files"]
            out[run_dir] = {f"plugin {m}": str(d) for m, d in files.items()} if isinstance(files, dict) else {}
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            out[run_dir] = {}
    return out


def name_rows(first, sizes: dict, started: dict, label_of) -> tuple[dict, dict, dict, list[str], dict]:
    """({unit: name}, {unit: paper arm kept or ""}, {unit: at its preset}, notes, {profile: the shared departures as
    shown}) for the arm rows `first` (one run of each unit, indexed by unit, with `arm`, `profile`, `horizon`,
    `paper_arm`, `config`, `run_dir` and its `inputs.*` digests); `label_of(run, paper_arm)` is a row's plain name
    (arm, paper number, horizon)."""
    from rlvr_sweep.analysis.grouping import distinguish

    departed, paper = {}, {}
    for unit, run in first.iterrows():
        config = run["config"] if isinstance(run["config"], dict) else {}
        preset = preset_settings(str(run["arm"]), str(run["profile"]), int(run["horizon"])) if config else None
        departed[unit] = departures(config, preset) if preset is not None else None
        keep = departed[unit] is None or keeps_paper_number(departed[unit])
        paper[unit] = str(run["paper_arm"] or "") if keep else ""
    notes, parts, said = [], {}, {}
    for profile in dict.fromkeys(first["profile"]):
        mine = {u: d for u, d in departed.items() if first.at[u, "profile"] == profile and d is not None}
        shared = common(mine)
        said[profile] = shown(shared)
        if shared:
            notes.append(f"every arm row{f' of profile {profile}' if first['profile'].nunique() > 1 else ''} departs "
                         f"from its arm's preset in {', '.join(shown(shared))}: said here, not in each row's name")
        for unit, d in mine.items():
            parts[unit] = shown({k: v for k, v in d.items() if k not in shared})
    at_preset = {u: departed[u] is not None and not parts.get(u) for u in first.index}
    names = {u: label_of(run, paper[u]) + bracket(parts.get(u, [])) for u, run in first.iterrows()}
    for name in {n for n in names.values() if list(names.values()).count(n) > 1}:
        alike = [u for u in first.index if names[u] == name]
        inputs = _inputs_of(first.loc[alike])
        for unit, versions in input_versions(alike, inputs, started).items():
            if versions:
                names[unit] = label_of(first.loc[unit], paper[unit]) + bracket([*parts.get(unit, []), *versions])
    described = {u: {**identity_settings(first.at[u, "config"] or {}),
                     **{c: str(first.at[u, c])[:8] for c in first.columns if c.startswith("inputs.")}}
                 for u in first.index}
    names = distinguish(names, described, sizes)  # what is still alike: by what differs from the largest row
    numbered: dict[str, int] = {}
    for unit in first.index:  # alike in every setting and input (another code version of the package): numbered
        if names[unit].endswith(f"[group {unit}]"):
            plain = names[unit][: -len(f"[group {unit}]")]
            numbered[plain] = k = numbered.get(plain, 1) + 1  # the largest row, named plainly, is the first
            names[unit] = f"{plain}[#{k}]"
    return names, paper, at_preset, notes, said


def _inputs_of(first) -> dict[str, dict]:
    """{unit: {input name: digest}}: the run's input digests, its plugin's by module."""
    modules = plugin_modules([str(d) for d in first["run_dir"]]) if "inputs.plugins" in first.columns else {}
    out = {}
    for unit, run in first.iterrows():
        got = {c[len("inputs."):]: str(run[c]) for c in first.columns
               if c.startswith("inputs.") and c != "inputs.plugins" and isinstance(run[c], str)}
        if isinstance(run.get("inputs.plugins"), str):
            got.update(modules.get(str(run["run_dir"])) or {"plugin code": str(run["inputs.plugins"])})
        out[unit] = got
    return out


def name_folders(run_dirs: list[str]) -> tuple[dict[str, tuple[str, str]], list[str], dict]:
    """({run_dir: (its row's name without the paper number, the paper arm it keeps or "")}, notes, {profile: the
    departures every row shares, as shown}) for run folders read one by one (`status`, the sweep summary): the
    same names as the tables', from each folder's config.yaml and run.json (untrusted: a field that is missing or
    of the wrong type leaves the row named by its arm alone)."""
    import pandas as pd

    from rlvr_sweep.analysis.grouping import read_config

    first, sizes, started, unit_of = {}, {}, {}, {}
    for run_dir in run_dirs:
        try:
            info = json.loads((Path(run_dir) / "run.json").read_text())
        except (OSError, ValueError, RecursionError):
            info = {}
        info = info if isinstance(info, dict) else {}
        # a run.json without its group hash (written by hand, or damaged) joins its arm's plain row
        unit = str(info["group_hash"]) if isinstance(info.get("group_hash"), str) else \
            f"{info.get('arm')}|{info.get('profile')}|{info.get('horizon')}"
        unit_of[run_dir] = unit
        sizes[unit] = sizes.get(unit, 0) + 1
        at = info.get("started_at")
        started[unit] = min(started.get(unit, math.inf), at if isinstance(at, (int, float)) else math.inf)
        if unit in first:
            continue
        horizon = info.get("horizon")
        inputs = info.get("inputs") if isinstance(info.get("inputs"), dict) else {}
        first[unit] = {"arm": str(info.get("arm") or "?"), "profile": str(info.get("profile") or ""),
                       "horizon": horizon if isinstance(horizon, int) and not isinstance(horizon, bool) else 0,
                       "paper_arm": info.get("paper_arm") if isinstance(info.get("paper_arm"), str) else "",
                       "config": read_config(run_dir) if isinstance(horizon, int) else {}, "run_dir": str(run_dir),
                       **{f"inputs.{k}": v["sha256"] for k, v in inputs.items()
                          if isinstance(v, dict) and isinstance(v.get("sha256"), str)}}
    if not first:
        return {}, [], {}
    frame = pd.DataFrame.from_dict(first, orient="index")
    names, paper, _, notes, said = name_rows(frame, sizes, started, lambda run, _: str(run["arm"]))
    return {d: (names[unit_of[d]], paper[unit_of[d]]) for d in run_dirs}, notes, said


LAUNCH_KEYS = ("arm", "profile", "seed", "horizon")  # what a launch line says besides the row's departures


def _bookkeeping(key: str) -> bool:
    """A setting that is no part of what a run computes (`run.out_root`, `data.root`), or a key below one."""
    from rlvr_sweep.analysis.grouping import BOOKKEEPING

    parts = key.split(".")
    return any(".".join(parts[:n]) in BOOKKEEPING for n in range(1, len(parts) + 1))


def override_parts(overrides) -> list[str]:
    """A recorded job's departures from its arm's preset, as its launch line gave them (a job not yet run has no
    config to compare): every override but the arm, profile, seed, horizon and Hydra's own, numbers shortened."""
    out: list[tuple[str, str]] = []
    for item in overrides if isinstance(overrides, list) else []:
        key, sep, value = str(item).partition("=")
        bare = key.lstrip("+~")
        if not sep or bare in LAUNCH_KEYS or bare.startswith("hydra") or _bookkeeping(bare):
            continue
        try:
            number = float(value)
            value = _value(number) if not value.lstrip("+-").isdigit() else value
        except ValueError:
            pass
        out.append((bare, value))
    # in the order `shown` gives a folder's departures: options chosen first, then settings, each by name
    return [f"{k}={v}" for k, v in sorted(out, key=lambda kv: ("." in kv[0], kv[0]))]

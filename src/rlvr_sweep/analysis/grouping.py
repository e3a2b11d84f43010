"""Which runs make one row of a table, what the row is called, and which runs a user asked for.

An **arm row** is the set of runs whose identities differ only in the seed (`group_hash`, written by
the run from `store.identity`): runs of one arm with other settings or other inputs are other rows,
never pooled as seeds and never replaced by the newest. Rows that would print alike ("4. ra_flat") are
told apart by what differs: the row with the most runs keeps the plain label, every other one says
how it differs from it, e.g. `4. ra_flat [eval.benchmarks=['math500'], eval.limit=50]`. The base
model's read-outs form one row per base model and read-out setting (`base_hash`), labelled the same way.

`select_runs(runs, where)` keeps the runs whose stored config matches every `key=value` of `where`
(`--where train.steps=100`; the value is read as YAML, so `eval.limit=50` and `eval.benchmarks=[math500]`
compare as a number and a list).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import yaml

from rlvr_sweep.config import Config, bookkeeping_keys, did_you_mean
from rlvr_sweep.io.digest import stamp

BOOKKEEPING = bookkeeping_keys(Config) | {"seed"}  # what never tells two rows apart
MAX_SHOWN = 4  # differences spelled out in a label; more are counted


def flatten(node, prefix: str = "") -> dict:
    """{dotted key: value} of a nested mapping (lists are values)."""
    out = {}
    for key, value in (node or {}).items():
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def read_config(run_dir, memo=None) -> dict:
    """A run's stored config.yaml, flattened; {} when it cannot be read. `memo`: a `store.remembered`
    cache of parsed configs (a file in the state it was parsed in is not parsed again)."""
    path = Path(str(run_dir)) / "config.yaml" if run_dir else None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        read_at = time.time()
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            flat = memo.get(path, st) if memo is not None else None
            if flat is None:
                cfg = yaml.load(f.read().decode(), Loader=loader)
                flat = flatten(cfg) if isinstance(cfg, dict) else {}
                if memo is not None and stamp(os.fstat(f.fileno())) == stamp(st):
                    memo.put(path, st, flat, read_at)
    except (TypeError, OSError, UnicodeDecodeError, yaml.YAMLError):
        flat = {}
    return flat


def identity_settings(config: dict) -> dict:
    """The settings of a flattened config that define the experiment (no bookkeeping, no seed)."""
    return {k: v for k, v in config.items() if k not in BOOKKEEPING and not k.startswith(_UNDER_BOOKKEEPING)}


_UNDER_BOOKKEEPING = tuple(sorted(b + "." for b in BOOKKEEPING))  # the keys below a bookkeeping key


def _shown(value) -> str:
    """A value as a user types it on the command line: null, [a,b], 1e-05, 'a b'."""
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_shown(v) for v in value) + "]"
    if isinstance(value, str) and (not value or any(c in value for c in " ,=[]")):
        return repr(value)
    return str(value)


def differences(mine: dict, reference: dict) -> list[str]:
    """`key=value` for every setting where `mine` differs from `reference`; input digests (`inputs.*`)
    only where both read that input and its content differs, or when no setting differs (an input a
    setting adds or removes, e.g. another benchmark, is that setting's difference, not one more)."""
    keys = sorted(set(mine) | set(reference))
    settings = [f"{k}={_shown(mine.get(k))}" for k in keys
                if not k.startswith("inputs.") and mine.get(k) != reference.get(k)]
    inputs = [f"{k}={_shown(mine.get(k))}" for k in keys if k.startswith("inputs.") and mine.get(k) != reference.get(k)
              and (not settings or (mine.get(k) is not None and reference.get(k) is not None))]
    return settings + inputs


def distinguish(base_labels: dict[str, str], described: dict[str, dict], sizes: dict[str, int]) -> dict[str, str]:
    """{key: label}: each key's base label, with its differences from the largest key of the same base
    label appended where several keys share one. `described[key]` is what tells rows apart (settings and
    input digests), `sizes[key]` the number of runs behind it (the reference is the largest, then the
    first in order)."""
    labels = dict(base_labels)
    by_label: dict[str, list[str]] = {}
    for key, label in base_labels.items():
        by_label.setdefault(label, []).append(key)
    for label, keys in by_label.items():
        if len(keys) < 2:
            continue
        reference = max(keys, key=lambda k: (sizes.get(k, 0), -keys.index(k)))
        for key in keys:
            if key == reference:
                continue
            diff = differences(described[key], described[reference]) or [f"group {key}"]
            more = f", +{len(diff) - MAX_SHOWN} more" if len(diff) > MAX_SHOWN else ""
            labels[key] = f"{label} [{', '.join(diff[:MAX_SHOWN])}{more}]"
    return labels


def split_notes(labels: dict[str, str], base_labels: dict[str, str], sizes: dict[str, int], what: str) -> list[str]:
    """One note per base label that stands for several rows, naming them."""
    notes = []
    for label in dict.fromkeys(base_labels.values()):
        keys = [k for k, v in base_labels.items() if v == label]
        if len(keys) > 1:
            rows = "; ".join(f"{labels[k]} ({sizes.get(k, 0)} run{'s' if sizes.get(k, 0) != 1 else ''})" for k in keys)
            notes.append(f"{what} {label!r} is {len(keys)} rows (their runs differ in more than the seed, so they "
                         f"are not pooled): {rows}")
    return notes


def parse_where(items) -> list[tuple[str, object]]:
    """[(key, value)] from `key=value` strings; a malformed one is a ValueError naming it."""
    out = []
    for item in items or ():
        key, sep, raw = str(item).partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--where {item!r}: expected key=value, e.g. train.steps=100")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as err:
            raise ValueError(f"--where {item!r}: the value is not YAML ({err})") from None
        out.append((key.strip(), value))
    return out


def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    return a == b


def select_runs(runs: pd.DataFrame, configs: list[dict], where) -> tuple[pd.Series, list[str]]:
    """(mask of the runs whose config matches every (key, value) of `where`, notes). A key no run's
    config has is a ValueError (a typo would otherwise select nothing, silently)."""
    mask = pd.Series(True, index=runs.index)
    if not where:
        return mask, []
    known = set().union(*configs) if configs else set()
    for key, value in where:
        if key not in known:
            hint = did_you_mean(key, sorted(known))
            raise ValueError(f"--where {key}=...: no run's config has {key!r}" + (f" ({hint})" if hint else ""))
        mask &= pd.Series([key in c and _same(c[key], value) for c in configs], index=runs.index)
    shown = " ".join(f"{k}={_shown(v)}" for k, v in where)
    return mask, [f"selected {int(mask.sum())} of {len(mask)} runs with --where {shown}"]

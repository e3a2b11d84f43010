"""PASS 4, with the model: stored teacher-forced margins equal a fresh pass on a sample (seed paper §7).

For each fork read-out and each probe, a few items (evenly spread, `n_items` each) are teacher-forced
again (`evaluation.teacher_forced`, the same unpadded [1, L] pass) through the checkpoint that made them:
a fork's root over its stored prompt and margin-pass tokens; a probe's recipient along the donor's
stored span and along its own first tokens. Margins must agree within `tolerance(dtype)` (float32:
1e-3; bf16 / fp16 logits round to ~1/128 of their magnitude, so 0.25); the top-1 id must agree where
the stored margin exceeds that tolerance, and in float32 the top-2 id everywhere too.

Which checkpoint: a `task=evaluate` read-out's `model.path`; a training run's trained read-out its saved
`<run>/model`; its base read-out the run's configured model; a probe's recipient folder. A read-out
whose checkpoint cannot be loaded (a run saved with `train.save_model=false`, a hub model that is not
cached) is named in the notes as not checked.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from rlvr_sweep.config import ModelConfig
from rlvr_sweep.evaluation.teacher_forcing import teacher_forced

TOLERANCE = {"float32": 1e-3}
HALF_TOLERANCE = 0.25


def tolerance(dtype: str) -> float:
    return TOLERANCE.get(dtype, HALF_TOLERANCE)


def sample(n_total: int, n: int) -> list[int]:
    """`n` positions spread evenly over `n_total` (all of them when fewer): [0, ..., n_total - 1]."""
    if n_total <= n:
        return list(range(n_total))
    return sorted({int(round(x)) for x in np.linspace(0, n_total - 1, n)})


def compare(stored: dict, fresh, dtype: str, where: str) -> list[str]:
    """Stored margins / top-1 / top-2 against a fresh `TeacherForced` pass."""
    tol = tolerance(dtype)
    margins = np.asarray(stored["margins"], dtype=float)
    if len(margins) != len(fresh.margins):
        return [f"{where}: {len(margins)} stored positions, {len(fresh.margins)} fresh"]
    out = []
    worst = float(np.max(np.abs(margins - np.asarray(fresh.margins)))) if len(margins) else 0.0
    if worst > tol:
        out.append(f"{where}: margins differ from a fresh teacher-forced pass by up to {worst:.4g} (tolerance {tol})")
    decided = margins > tol
    if any(a != b for a, b, d in zip(stored["top1"], fresh.top1, decided) if d):
        out.append(f"{where}: top-1 ids differ from a fresh pass where the margin decides them")
    if dtype == "float32" and list(stored["top2"]) != list(fresh.top2):
        out.append(f"{where}: top-2 ids differ from a fresh pass")
    return out


class Loader:
    """Loads each checkpoint once (on `device`)."""

    def __init__(self, device: str = "cpu"):
        self.device, self.cache = device, {}

    def get(self, path: str | None, hub_id: str | None, dtype: str, untie: bool = True):
        key = (path, hub_id, dtype)
        if key not in self.cache:
            from rlvr_sweep.policy import ModelLoadError, load_policy  # transformers: only when a model is loaded

            cfg = ModelConfig(name="verify", hub_id=hub_id, path=path, dtype=dtype, device=self.device,
                              untie_embeddings=untie)
            try:
                self.cache[key] = load_policy(cfg)
            except (ModelLoadError, OSError, ValueError) as err:
                self.cache[key] = err
        return self.cache[key]


def _run_config(run_dir) -> dict:
    path = Path(str(run_dir)) / "config.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def readout_checkpoint(run, phase: str) -> tuple[str | None, str | None, str]:
    """(path, hub id, dtype) of the policy a read-out read."""
    model = _run_config(run["run_dir"]).get("model") or {}
    dtype = model.get("dtype", "bfloat16")
    if run["task"] == "evaluate":
        return str(run.get("model_source") or model.get("path")), None, dtype
    if phase == "base":
        return model.get("path"), model.get("hub_id"), dtype
    saved = Path(str(run["run_dir"])) / "model"
    return (str(saved) if saved.is_dir() else None), None, dtype


def fork_margin_problems(readout, run, loader: Loader, n_items: int) -> tuple[int, list[str], list[str]]:
    """(items checked, notes, problems) for one fork read-out (`analysis.checkpoints.Readout`)."""
    path, hub, dtype = readout_checkpoint(run, readout.phase)
    policy = loader.get(path, hub, dtype) if (path or hub) else None
    if policy is None or isinstance(policy, Exception):
        return 0, [f"{readout.label} ({readout.phase}): checkpoint not loadable, margins not checked "
                   f"({policy or 'no saved model'})"], []
    roots = readout.rows[readout.rows["branch"] == 0].reset_index(drop=True)
    problems = []
    picked = sample(len(roots), n_items)
    for i in picked:
        r = roots.iloc[i]
        fresh = teacher_forced(policy.model, [int(x) for x in r["tf_prompt"]], [int(x) for x in r["tf_tokens"]])
        stored = {"margins": r["tf_margins"], "top1": r["tf_top1"], "top2": r["tf_top2"]}
        problems += compare(stored, fresh, dtype, f"{readout.label} {r['benchmark']} item {r['index']}")
    return len(picked), [], problems


def probe_margin_problems(probe, loader: Loader, n_items: int) -> tuple[int, list[str], list[str]]:
    info = probe.info
    dtype = info.get("model_dtype", "bfloat16")
    policy = loader.get(info["recipient"]["model"], None, dtype)
    if isinstance(policy, Exception):
        return 0, [f"probe {probe.path}: recipient not loadable, margins not checked ({policy})"], []
    problems = []
    picked = sample(len(probe.items), n_items)
    margin_tokens = int(info["settings"]["margin_tokens"])
    for i in picked:
        it = probe.items.iloc[i]
        prompt = [int(x) for x in it["prompt_tokens"]]
        where = f"probe {probe.path} {it['benchmark']} item {it['index']}"
        along = teacher_forced(policy.model, prompt, [int(x) for x in it["donor_tokens"][: int(it["span"])]])
        problems += compare({"margins": it["tf_margins"], "top1": it["tf_top1"], "top2": it["tf_top2"]}, along,
                            dtype, where + " (donor span)")
        own = teacher_forced(policy.model, prompt, [int(x) for x in it["recipient_tokens"][:margin_tokens]])
        problems += compare({"margins": it["self_tf_margins"], "top1": it["self_tf_top1"], "top2": it["self_tf_top2"]},
                            own, dtype, where + " (own margin pass)")
    return len(picked), [], problems

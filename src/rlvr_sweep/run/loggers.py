"""Experiment loggers: CSV, TensorBoard and Weights & Biases, any number at once (`logger=[...]`).

All of them receive the same calls from the trainer: `log_config` once (the resolved config, as
hyperparameters), `log_step` after every step (mean reward, active, grad norm, loss, tokens,
tokens/s, seconds, learning rate) and `log_accuracy` after every read-out phase. Files go to
`<run>/logs/`, outside the run's manifest (they are reports, not results):

- `csv`: `logs/metrics.csv`, one row per step (`kind=step`) or phase accuracy (`kind=accuracy`);
- `tensorboard`: `logs/tensorboard/` through `torch.utils.tensorboard.SummaryWriter`, read by
  TensorBoard and its `EventAccumulator`;
- `wandb`: `logs/wandb/`, `mode=offline` by default (`wandb sync` it later), an optional extra.

A resumed run drops what the killed process logged after its last checkpoint (CSV rows are rewritten
up to that step; TensorBoard purges later events; W&B resumes the same run id), so every step is
logged once.
"""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

STEP_METRICS = ("mean_reward", "active", "grad_norm", "loss", "gen_tokens", "tokens_per_s", "seconds", "lr",
                # the health signals (docs/health.md): None where the step has none
                "entropy", "kl_ref", "clip_low", "clip_high", "ratio_mean", "ratio_max", "length_mean",
                "truncated_share", "logp_gap_max", "logp_gap_outside")
CSV_FIELDS = ("kind", "step", "phase", "benchmark", "accuracy", *STEP_METRICS)


def flat_config(config: dict, prefix: str = "") -> dict:
    """{"train.lr": 1e-5, ...}: nested dicts flattened, lists and None written as text."""
    out = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat_config(value, name + "."))
        else:
            out[name] = value if isinstance(value, (int, float, str, bool)) else json.dumps(value)
    return out


class CsvLogger:
    def __init__(self, log_dir: Path, resume_step: int | None):
        self.path = log_dir / "metrics.csv"
        kept = []
        if resume_step is not None and self.path.is_file():  # rows logged after the checkpoint go
            with open(self.path, newline="") as f:
                kept = [r for r in csv.DictReader(f) if r["kind"] != "step" or int(r["step"]) < resume_step]
        self.file = open(self.path, "w", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=CSV_FIELDS)
        self.writer.writeheader()
        self.writer.writerows(kept)

    def log_config(self, config: dict) -> None:
        pass  # the run folder's config.yaml is the CSV logger's record of the settings

    def log_step(self, step: int, metrics: dict) -> None:
        self.writer.writerow({"kind": "step", "step": step, **{k: metrics.get(k) for k in STEP_METRICS}})
        self.file.flush()

    def log_accuracy(self, step: int, phase: str, accuracy: dict) -> None:
        for benchmark, value in accuracy.items():
            self.writer.writerow({"kind": "accuracy", "step": step, "phase": phase, "benchmark": benchmark,
                                  "accuracy": value})
        self.file.flush()

    def close(self) -> None:
        self.file.close()


class TensorBoardLogger:
    def __init__(self, log_dir: Path, resume_step: int | None):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(log_dir / "tensorboard"), purge_step=resume_step)

    def log_config(self, config: dict) -> None:
        flat = flat_config(config)
        self.writer.add_text("config", "\n".join(f"    {k}: {v}" for k, v in sorted(flat.items())), 0)
        self.writer.add_hparams(flat, {}, run_name=".")

    def log_step(self, step: int, metrics: dict) -> None:
        for name in STEP_METRICS:
            if metrics.get(name) is not None:
                self.writer.add_scalar(f"train/{name}", float(metrics[name]), step)

    def log_accuracy(self, step: int, phase: str, accuracy: dict) -> None:
        for benchmark, value in accuracy.items():
            self.writer.add_scalar(f"accuracy/{phase}/{benchmark}", value, step)

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    def __init__(self, log_dir: Path, resume_step: int | None, *, mode: str, project: str, entity: str | None,
                 run_id: str, name: str):
        try:
            import wandb
        except ImportError as err:
            raise ImportError("logger=wandb needs the wandb package: pip install 'rlvr_sweep[wandb]'") from err
        (log_dir / "wandb").mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=project, entity=entity, mode=mode, dir=str(log_dir), id=run_id, name=name,
                              resume="allow")
        self.wandb = wandb

    def log_config(self, config: dict) -> None:
        self.run.config.update(flat_config(config), allow_val_change=True)

    def log_step(self, step: int, metrics: dict) -> None:
        self.run.log({f"train/{k}": v for k, v in metrics.items() if k in STEP_METRICS and v is not None}, step=step)

    def log_accuracy(self, step: int, phase: str, accuracy: dict) -> None:
        self.run.log({f"accuracy/{phase}/{b}": v for b, v in accuracy.items()}, step=step)

    def close(self) -> None:
        self.run.finish()


class Loggers:
    """Every enabled logger behind one object; the trainer calls it without knowing which are on."""

    def __init__(self, loggers: list):
        self.loggers = loggers

    def log_config(self, config: dict) -> None:
        for logger in self.loggers:
            logger.log_config(config)

    def log_step(self, step: int, metrics: dict) -> None:
        for logger in self.loggers:
            logger.log_step(step, metrics)

    def log_accuracy(self, step: int, phase: str, accuracy: dict) -> None:
        for logger in self.loggers:
            logger.log_accuracy(step, phase, accuracy)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()


def check_loggers(settings) -> None:
    """Fail before any work when an enabled logger's package is missing (W&B is an optional extra)."""
    if settings.wandb.enabled and importlib.util.find_spec("wandb") is None:
        raise ImportError("logger=wandb needs the wandb package: pip install 'rlvr_sweep[wandb]'")


def open_loggers(settings, log_dir: Path, resume_step: int | None, *, run_id: str, name: str) -> Loggers:
    """The loggers `settings` (a LoggerConfig) enables, writing under `log_dir`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    chosen = []
    if settings.csv.enabled:
        chosen.append(CsvLogger(log_dir, resume_step))
    if settings.tensorboard.enabled:
        chosen.append(TensorBoardLogger(log_dir, resume_step))
    if settings.wandb.enabled:
        w = settings.wandb
        chosen.append(WandbLogger(log_dir, resume_step, mode=w.mode, project=w.project, entity=w.entity,
                                  run_id=run_id, name=name))
    return Loggers(chosen)

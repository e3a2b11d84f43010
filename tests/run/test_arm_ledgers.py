"""Every paper arm computes what it computed before the training loop was restructured.

`arm_ledgers.json` holds, for a full smoke run of every arm file (and Arms 12 / 13 at 1,024 tokens),
the sha256 of its ledgers (steps without timings, rollouts, pairs), of its grades and of the saved
policy's weights. They were first written by the code before the training loop and the estimator and
sampler registries were rebuilt, which reproduced every one of them; they were rewritten once since,
when the ledgers gained columns (the rollouts' token ids and first 160 tokens' text, the steps'
`cf_pb_loser`), after checking that every arm's pair rows, grades and weights were unchanged. A change in
any reward, advantage, pair row or update shows as a changed digest.

Each digest covers the columns the tables had when the digests were written (`columns`, per table), so a
column added since (the objective issue's health signals) leaves them as they were, while a change in any
value of the existing ones does not.

The digests are exact float results, so they hold on the machine kind they were written on (the same
torch build and CPU capability, recorded in the file, as in CI); another machine kind keeps its own under
`other_machines` (written by `RLVR_SWEEP_WRITE_LEDGERS=machine` on a commit whose reference digests were
checked to hold, e.g. by running the same commit's arms side by side); elsewhere the test skips, saying why.
Within one capability, a CPU whose math libraries pick other kernels rounds differently (seen: an AVX512
Xeon with AMX, whose steps and weights digests differ for every arm and pairs digests for the
counterfactual arms, while every rollout and grade is the same). Such a CPU keeps its own digests under
`per_cpu`, keyed by `cpu_signature()` (only those that differ from the reference), and is compared with
them; any other CPU of the recorded capability with the reference.
Rewrite them (only for a change meant to alter what an arm computes) with
`RLVR_SWEEP_WRITE_LEDGERS=1 python -m pytest tests/run/test_arm_ledgers.py -m slow` (which drops every
`per_cpu` entry: they were taken against the digests it replaces); record a CPU's own, on a commit whose
reference digests pass, with `RLVR_SWEEP_WRITE_LEDGERS=cpu`.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pandas as pd
import pytest
import torch

from rlvr_sweep import store
from rlvr_sweep.run import run
from tests.conftest import CONF_DIR
from tests.helpers import compose_cfg

GOLDEN = Path(__file__).with_name("arm_ledgers.json")
# every arm but the LoRA presets (their runs are checked exactly by tests/run/test_lora_runs.py: what trains, resume
# to the same ledger and weights); kept out for the slow tier's time on 2 cores
RUNS = [[f"+arm={p.stem}"] for p in sorted((CONF_DIR / "arm").glob("*.yaml")) if not p.stem.endswith("_lora")]
RUNS += [["+arm=stopped_tree", "horizon=1024"], ["+arm=stopped_tree_bonus", "horizon=1024"]]
TIMINGS = ("seconds",)  # wall-clock columns: not what a run computed
KEYS = set(store.RUN_KEYS)


ISA = ("avx", "amx", "fma", "vnni", "bf16", "fp16")


def machine() -> dict:
    return {"torch": torch.__version__, "cpu": torch.backends.cpu.get_cpu_capability()}


def cpu_signature() -> str:
    """The CPU's name, family / model and vector instruction sets, from /proc/cpuinfo ("" where unreadable)."""
    try:
        first = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
    except OSError:
        return ""
    fields = dict(line.split(":", 1) for line in first.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    isa = sorted(f for f in fields.get("flags", "").split() if f.startswith(ISA))
    return (f"{fields.get('model name', '?')} family {fields.get('cpu family', '?')} model {fields.get('model', '?')}: "
            + " ".join(isa))


def machine_key() -> str:
    m = machine()
    return f"{m['torch']} {m['cpu']}"


def expected(golden: dict, key: str) -> dict:
    """The reference digests of `key`: this machine kind's own where it has them, with this CPU's own where
    it has those."""
    if key not in golden["runs"] and key not in golden.get("other_machines", {}).get(machine_key(), {}):
        pytest.skip(f"no digests of {key} recorded on this machine kind ({machine_key()}) yet")
    if golden["machine"] != machine():
        return golden["other_machines"][machine_key()][key]
    own = golden.get("per_cpu", {}).get(cpu_signature(), {}).get(key, {})
    return {**golden["runs"][key], **own}


def frame_digest(frame: pd.DataFrame, recorded: list[str] | None = None) -> str:
    """The digest of a table's rows over its columns, or over the `recorded` ones (those it had when the digests
    were written) where given."""
    columns = sorted(c for c in frame.columns if c not in KEYS and c not in TIMINGS
                     and (recorded is None or c in recorded))
    rows = frame[columns].to_dict("records")
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


def digests(run_dir: Path, columns: dict | None = None) -> dict:
    out = {name: frame_digest(store.read_table(run_dir, name), (columns or {}).get(name))
           for name in ("steps", "rollouts", "pairs", "grades")}
    out["weights"] = hashlib.sha256((run_dir / "model" / "model.safetensors").read_bytes()).hexdigest()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("overrides", RUNS, ids=[" ".join(r) for r in RUNS])
def test_every_arm_writes_the_ledgers_it_wrote_before(overrides, tmp_path):
    key = " ".join(overrides)
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {"machine": machine(), "runs": {}}
    writing = os.environ.get("RLVR_SWEEP_WRITE_LEDGERS")
    if writing not in ("1", "machine") and golden["machine"] != machine() and \
            machine_key() not in golden.get("other_machines", {}):
        pytest.skip(f"digests written on {golden['machine']} and {sorted(golden.get('other_machines', {}))}, this "
                    f"machine is {machine()}: exact floats differ")
    want = expected(golden, key) if writing not in ("1", "cpu", "machine") else None  # skips an arm not recorded here
    info = run(compose_cfg([*overrides, "profile=smoke", f"run.out_root={tmp_path}"]))
    got = digests(Path(info["run_dir"]), None if writing == "1" else golden.get("columns"))
    if writing == "1":  # every column the tables have now, from here on
        for name in ("steps", "rollouts", "pairs", "grades"):
            now = set(store.read_table(Path(info["run_dir"]), name).columns) - KEYS - set(TIMINGS)
            golden.setdefault("columns", {})[name] = sorted(now | set(golden["columns"].get(name, ())))
        golden["runs"][key] = got
        golden["machine"] = machine()
        golden.pop("per_cpu", None)  # recorded against the digests this replaces
        golden.pop("other_machines", None)
    elif writing == "machine":
        golden.setdefault("other_machines", {}).setdefault(machine_key(), {})[key] = got
    elif writing == "cpu":
        own = {name: d for name, d in got.items() if d != golden["runs"][key][name]}
        golden.setdefault("per_cpu", {}).setdefault(cpu_signature(), {})[key] = own
    if writing in ("1", "cpu", "machine"):
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
        return
    assert got == want, (
        f"what {key} computes changed, or this CPU ({cpu_signature()}) rounds differently from the one the "
        "digests were written on: on a commit whose digests pass in CI, RLVR_SWEEP_WRITE_LEDGERS=cpu records its own")

"""The KL reference's memory, named before launch: the parameter count read from the model folder's safetensors
headers is the loaded model's, and the preflight names every job that keeps the copy (and no other)."""

from __future__ import annotations

from pathlib import Path

from rlvr_sweep.config import ModelConfig
from rlvr_sweep.policy import load_policy
from rlvr_sweep.run.memory import parameter_count, reference_bytes, reference_note
from rlvr_sweep.sweep import preflight
from rlvr_sweep.sweep.cli import normalize_overrides
from tests.conftest import CONF_DIR

TINY = Path(__file__).resolve().parents[2] / "src/rlvr_sweep/policy/assets/tiny_qwen3"


def test_the_count_from_the_headers_is_the_loaded_models():
    policy = load_policy(ModelConfig(name="tiny", hub_id=None, path=str(TINY), dtype="float32"))
    assert parameter_count(TINY) == sum(p.numel() for p in policy.model.parameters()) == 149_888
    assert reference_bytes("bfloat16", TINY) == 2 * 149_888
    assert reference_note("float32", TINY) == ("a frozen copy of the initial weights as the KL reference: 0.57 MiB "
                                               "(149,888 parameters at float32)")


def test_the_preflight_names_the_jobs_that_keep_a_reference(tmp_path):
    def notes(*overrides) -> list[str]:
        out: list[str] = []
        preflight.check_sweep(str(CONF_DIR), normalize_overrides(
            [*overrides, "profile=smoke", f"run.out_root={tmp_path}/runs", "seed=1,2"]), record=False, notes=out)
        return out

    assert notes("+arm=grpo_original") == [
        "2 job(s) keep a frozen copy of the initial weights as the KL reference: 0.57 MiB (149,888 parameters at float32)"]
    assert notes("+arm=ra_flat", "objective.measure_kl=true") == notes("+arm=grpo_original")
    assert notes("+arm=ra_flat") == []
    assert not (tmp_path / "runs").exists()

"""`verify --plugins` imports a run's plugins only when their code is the code the run recorded (CONVENTIONS #20):
a plugin edited since the run is named, module and both digests, and nothing is re-derived with it."""

from __future__ import annotations

from rlvr_sweep.plugins import code_record
from rlvr_sweep.verify.plugin_runs import load

PLUGIN = ("from rlvr_sweep.reward import REWARDS\n\n\n"
          "@REWARDS.register('t_verify_half')\n"
          "def half(texts, gold, *, grade):\n"
          "    return [0.5] * len(texts), [True] * len(texts)\n")


def test_a_run_s_plugin_is_imported_only_with_the_code_it_recorded(tmp_path):
    plugin = tmp_path / "t_verify_half.py"
    plugin.write_text(PLUGIN)
    record = {**code_record([str(plugin)]), "options": {"reward.name": "t_verify_half"}}
    config = {"plugins": [str(plugin)], "reward": {}, "profile": {"length_scale": 1.0}}
    rules, why = load({"inputs": {"plugins": record}}, config, "baseline")
    assert why is None and rules.reward(["a", "b"], ["1", "2"], None) == ([0.5, 0.5], [True, True])
    module = "rlvr_sweep_plugin_t_verify_half"
    now = record["files"][module]
    edited = {**record, "files": {module: "0" * 64}}  # the file's digest when the run ran: another file's
    rules, why = load({"inputs": {"plugins": edited}}, config, "baseline")
    assert rules is None
    assert why == (f"the plugin code at hand is not the code the run recorded: {module} (recorded 000000000000, "
                   f"now {now[:12]})")

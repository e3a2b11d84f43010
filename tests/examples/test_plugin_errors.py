"""An exception raised in a plugin's code is the plugin's (CONVENTIONS #20): the run records where in the plugin
it came from (`error_in`), and the frame named is the plugin's own line, not rlvr_sweep's caller nor a library's.
(The command line's one line for it: the slow tier's tests/examples/test_plugin_sweeps.py.)"""

from __future__ import annotations

import json

import pytest

from rlvr_sweep.plugins import plugin_frame
from rlvr_sweep.run import run
from tests.helpers import compose_cfg, run_dir_of

BROKEN = ("from rlvr_sweep.credit import ESTIMATORS\n\n\n"
          "@ESTIMATORS.register('t_broken_leaf', kind='leaf')\n"
          "def broken(rewards, shape):\n"
          "    return sorted([rewards, None])\n")  # line 6: the comparison raises inside sorted() (a builtin)


def test_a_run_whose_plugin_raises_records_the_plugin_s_file_function_and_line(tmp_path):
    plugin = tmp_path / "t_broken_est.py"
    plugin.write_text(BROKEN)
    cfg = compose_cfg(["+arm=ra_flat", "profile=smoke", "train.steps=2", "eval.limit=2", f"plugins=[{plugin}]",
                       "estimator.name=t_broken_leaf", f"run.out_root={tmp_path}/runs"])
    with pytest.raises(TypeError) as err:
        run(cfg)
    frame = plugin_frame(err.value.__traceback__)
    assert (frame.module, frame.function, frame.file, frame.line) == (
        "rlvr_sweep_plugin_t_broken_est", "broken", str(plugin), 6)
    assert frame.source == "return sorted([rewards, None])"
    info = json.loads((run_dir_of(cfg) / "run.json").read_text())
    assert info["status"] == "failed" and info["error"].startswith("TypeError(")
    assert info["error_in"] == f"plugin rlvr_sweep_plugin_t_broken_est.broken ({plugin}:6: return sorted([rewards, None]))"


"""The one face for plugin authors (`rlvr_sweep.extend`, CONVENTIONS #23): every registration from one module,
each name the stage's own object, no torch for a plugin that needs none, and the shipped examples use it."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys

import pytest

import rlvr_sweep.extend as extend
from tests.conftest import REPO

REGISTRIES = {"ESTIMATORS": "credit", "OBJECTIVES": "update", "REWARDS": "reward", "TASKS": "data",
              "SAMPLERS": "rollout", "ENGINES": "rollout", "READOUTS": "evaluation", "SCHEDULES": "evaluation"}


def test_every_registry_a_choice_has_is_offered_and_is_the_stages_own():
    from rlvr_sweep.config.options import REGISTRIES as MADE

    for name, stage in REGISTRIES.items():
        assert getattr(extend, name) is getattr(importlib.import_module(f"rlvr_sweep.{stage}"), name)
    assert {id(r) for r in MADE} <= {id(getattr(extend, n)) for n in REGISTRIES}  # no registry left out
    for name in extend.__all__:
        assert getattr(extend, name) is not None
    from rlvr_sweep.config.options import param
    from rlvr_sweep.credit import GroupShape
    from rlvr_sweep.update import Surrogate

    assert (extend.param, extend.GroupShape, extend.Surrogate) == (param, GroupShape, Surrogate)
    with pytest.raises(AttributeError, match=r"has no attribute 'CREDIT'; it offers \[.*'ESTIMATORS'"):
        extend.CREDIT  # noqa: B018


def test_a_plugin_that_registers_a_reward_imports_no_torch():
    code = ("import sys\nfrom rlvr_sweep.extend import REWARDS, at_least, param, score_rollouts\n"
            "@REWARDS.register('t_face_reward', params={'n': param(1, at_least(1))})\n"
            "def r(texts, gold, *, grade, n):\n    return [0.0] * len(texts), [0.0] * len(texts)\n"
            "print('torch' in sys.modules, 't_face_reward' in REWARDS)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.split() == ["False", "True"]


@pytest.mark.parametrize("path", sorted((REPO / "examples").rglob("*.py")), ids=lambda p: str(p.relative_to(REPO)))
def test_the_shipped_examples_register_through_the_one_face(path):
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rlvr_sweep"):
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported |= {a.name for a in node.names if a.name.startswith("rlvr_sweep")}
    assert imported <= {"rlvr_sweep.extend"}, f"{path} imports {sorted(imported)}"

"""The package layout is the pipeline: stage subpackages, one-direction imports, stage re-exports."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import rlvr_sweep

PACKAGE = Path(rlvr_sweep.__file__).parent
# Lowest first: a module may import its own stage and the stages before it, never one after it.
STAGES = ["io", "config", "plugins", "data", "policy", "rollout", "reward", "credit", "update", "store", "evaluation", "analysis",
          "run", "sweep", "verify", "extend"]
NEVER_THE_TRAINER = {  # these read stored tables and pure functions only
    "verify": {"run", "sweep"},
    "analysis": {"policy", "rollout", "credit", "update", "evaluation", "run", "sweep"},
}


def stage_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "rlvr_sweep" and len(parts) > 1 else None


def imported_modules(path: Path, package: str) -> list[str]:
    """Absolute names of every rlvr_sweep module a file imports (relative imports resolved)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names.append(base)
            names += [f"{base}.{a.name}" for a in node.names]
    return [n for n in names if n.startswith("rlvr_sweep.")]


def source_files():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(rel.parts)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        yield path, module.removesuffix(".__init__"), package


def test_top_level_holds_only_the_entrypoint_and_the_stages():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py"]
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    assert folders == sorted(STAGES)


def test_every_stage_says_what_it_does():
    for stage in STAGES:
        module = importlib.import_module(f"rlvr_sweep.{stage}")
        doc = (module.__doc__ or "").strip()
        assert len(doc.splitlines()) >= 2, f"rlvr_sweep.{stage} needs a docstring of two or three lines"


def test_imports_flow_one_way():
    wrong = []
    for path, module, package in source_files():
        own = stage_of(module)
        if own not in STAGES:
            continue  # rlvr_sweep/__init__.py and __main__.py sit above every stage
        for name in imported_modules(path, package):
            other = stage_of(name)
            if other is None or other == own or other not in STAGES:
                continue
            if STAGES.index(other) > STAGES.index(own) or other in NEVER_THE_TRAINER.get(own, ()):
                wrong.append(f"{module} imports {name}")
    assert not wrong, "imports against the pipeline's direction:\n" + "\n".join(wrong)


@pytest.mark.parametrize("stage", STAGES)
def test_stage_reexports_resolve(stage):
    module = importlib.import_module(f"rlvr_sweep.{stage}")
    for name in getattr(module, "__all__", []):
        assert hasattr(module, name), f"rlvr_sweep.{stage}.__all__ names {name!r}, which it lacks"


def test_public_names_of_the_design_card():
    from rlvr_sweep.reward import extract_answer, grade
    from rlvr_sweep.rollout import ScriptedPolicy, plan_pair
    from rlvr_sweep.store import collect

    assert grade("\\frac{1}{2}", "0.5") and extract_answer("so \\boxed{7}.") == "7"
    assert callable(collect) and callable(plan_pair) and ScriptedPolicy.__name__ == "ScriptedPolicy"


def test_no_module_at_the_old_flat_paths():
    old = ["config.py", "data.py", "model.py", "generation.py", "samplers.py", "grading.py", "estimators.py",
           "train.py", "results.py", "cli.py", "verify.py", "tree_credit.py"]
    assert not [name for name in old if (PACKAGE / name).exists()]


def test_a_training_run_imports_neither_the_analysis_stage_nor_matplotlib():
    import subprocess
    import sys

    code = ("import sys, rlvr_sweep.run, rlvr_sweep.sweep.cli; "
            "print(sorted({m.split('.')[0] if m.startswith('matplotlib') else m for m in sys.modules "
            "if m.startswith(('matplotlib', 'rlvr_sweep.analysis'))}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_module_imports_itself_through_others():
    """No import circle among the package's modules (a package's `__init__` re-exports aside), function-level
    imports included: seen, `sweep.cli` <-> `sweep.status_cli` and `policy.architecture` -> `loading` -> `source`."""
    modules = {module: (path, package) for path, module, package in source_files() if path.name != "__init__.py"}
    graph = {m: {n for n in imported_modules(path, package) if n in modules and n != m}
             for m, (path, package) in modules.items()}
    circles, done = [], set()
    for start in graph:  # a circle through `start`: the modules it reaches that reach it back
        reach = _reached(graph, start)
        if start in reach and start not in done:
            circle = sorted(m for m in reach if start in _reached(graph, m))
            done |= set(circle)
            circles.append(" -> ".join(circle))
    assert not circles, "import circles:\n" + "\n".join(circles)


def _reached(graph: dict, start: str) -> set:
    reach, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in reach:
                reach.add(nxt)
                todo.append(nxt)
    return reach

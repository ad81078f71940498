"""Triton's GPU compiler refuses a @jit function that reads a plain module global (only tl.constexpr globals are
allowed); the interpreter does not check it, so CPU tests pass while every candidate fails to compile on the GPU
(gelu_tanh's first H200 search, run 15). Every template's jit functions read no module-level assignment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TEMPLATES = sorted(p for p in (Path(__file__).parents[2] / "rsi" / "templates").glob("*.py") if p.name != "__init__.py")


def _is_jit(fn: ast.FunctionDef) -> bool:
    """A Triton jit function (CuTe DSL traces its functions as Python, which may read module constants)."""
    return any(ast.unparse(d).startswith("triton.jit") for d in fn.decorator_list)


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_jit_functions_read_no_plain_globals(path):
    tree = ast.parse(path.read_text())
    plain = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
             if isinstance(t, ast.Name) and "constexpr" not in ast.unparse(node.value)}
    bad = []
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and _is_jit(n)):
        local = {a.arg for a in fn.args.args} | {n.id for n in ast.walk(fn)
                                                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        bad += [f"{fn.name}: {n.id}" for n in ast.walk(fn)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in plain and n.id not in local]
    assert not bad, f"{path.name}: jit functions read plain module globals {bad} (use literals or tl.constexpr)"


def test_the_rule_catches_the_gelu_mistake(tmp_path):
    src = "import triton\nK = 0.5\n@triton.jit\ndef f(x):\n    return x * K\n"
    (tmp_path / "t.py").write_text(src)
    with pytest.raises(AssertionError, match="f: K"):
        test_jit_functions_read_no_plain_globals(tmp_path / "t.py")

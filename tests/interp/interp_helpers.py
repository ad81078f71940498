"""Shared helpers for the interpreter tests: judge a template (or a mutated copy) through the real harness."""

from __future__ import annotations

from typing import Any

from rsi.harness.evaluate import evaluate
from rsi.spaces import load_space, template_source


def judge(op: str, config: dict[str, Any] | None = None, source: str | None = None) -> dict[str, Any]:
    """evaluate() in-process on the interpret backend (TRITON_INTERPRET=1 is set by the shell)."""
    space = load_space(op)
    src = source if source is not None else template_source(space.template)
    cfg = space.heuristic() if config is None else config
    return evaluate({"candidate": {"op": op, "source": src, "config": cfg}, "backend": "interpret"}, {})


def mutated(op: str, old: str, new: str) -> str:
    """The op's template with one exact substring replaced (fails loudly if the substring is gone)."""
    src = template_source(load_space(op).template)
    assert src.count(old) >= 1, f"{old!r} not in the {op} template"
    return src.replace(old, new)


def load_template(op: str):
    """Import the template as a module (for direct launches on strided inputs)."""
    import importlib.util
    import os
    import tempfile

    src = template_source(load_space(op).template)
    path = os.path.join(tempfile.mkdtemp(prefix="rsi-interp-"), f"tpl_{op}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(f"tpl_{op}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

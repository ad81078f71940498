"""Shared helpers for the interpreter tests: judge a template (or a mutated copy) through the real harness."""

from __future__ import annotations

from typing import Any

from rsi.contract import Candidate
from rsi.harness.judge import Judge, JudgeOptions
from rsi.spaces import load_space, template_source

_JUDGE: Judge | None = None


def shared_judge() -> Judge:
    """One interpreter judge for the test session (each candidate still gets a fresh producer process)."""
    global _JUDGE
    if _JUDGE is None:
        _JUDGE = Judge(JudgeOptions(backend="interpret"))
    return _JUDGE


def judge(op: str, config: dict[str, Any] | None = None, source: str | None = None) -> dict[str, Any]:
    """The real judge on the interpret backend (TRITON_INTERPRET=1 is set by the shell)."""
    space = load_space(op)
    src = source if source is not None else template_source(space.template)
    cfg = space.heuristic() if config is None else config
    return shared_judge().evaluate(Candidate(op, src, cfg))


def assert_full_plan(op: str, v: dict[str, Any]) -> None:
    """The verdict ran the judge's whole trial plan: seeds, refill, every special case, every layout, drawn shapes."""
    from rsi.refs import get_op_group

    g = get_op_group(op)
    plan = shared_judge().trial_plan(g)
    corr = v["details"]["correctness"]
    assert corr["trials"] == len(plan)
    assert sum(p[4] for p in plan) == len(g.interp_shapes)                       # one refill per named shape
    assert {p[1] for p in plan} == set(range(g.n_layouts))
    assert {p[3].name for p in plan if p[3] is not None} == {sc.name for sc in g.special_cases}
    assert len(corr["shapes"]) > len(g.interp_shapes)                            # drawn shapes too


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

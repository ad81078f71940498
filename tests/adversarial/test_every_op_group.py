"""Every op group is judged by the same fail-closed contract: its own template at its space's heuristic config is
accepted (the honest control), and cheats wrapped around that template are rejected.

The run-time wrappers need full Python (module state, in-place torch ops), so they are judged with the static check
off (``skip_static``) to show that the run-time defences catch them in every op group, whatever its inputs (strided
views, shared storages, integer indices, plain ints); the same wrappers with the static check on, and the static-only
wrappers, are rejected at "static" before any code runs.
"""

from __future__ import annotations

import pytest

from rsi.contract import Candidate
from rsi.harness.judge import Judge, JudgeOptions
from rsi.harness.static_cute import kernel_language
from rsi.kernel import cute_unavailable
from rsi.refs import op_names
from rsi.spaces import load_space, template_source
from tests.adversarial.verdicts import expect_accepted, expect_rejected

pytestmark = pytest.mark.interpreter


@pytest.fixture(scope="module")
def judge():
    with Judge(JudgeOptions(backend="interpret")) as j:
        yield j


@pytest.fixture(scope="module")
def runtime():
    with Judge(JudgeOptions(backend="interpret", skip_static=True)) as j:
        yield j


def _wrap(op: str, body: str, prelude: str = "") -> str:
    src = template_source(_cpu_space(op).template)
    assert src.count("\ndef launch(") == 1, f"{op}: template has no single launch()"
    src = src.replace("\ndef launch(", "\ndef _launch(", 1)
    return src + "\n" + prelude + "\n\ndef launch(*inputs, **config):\n" + body


# name -> (static check skipped, prelude, body of launch(*inputs, **config), stage, reason words)
CHEATS = {
    # scribbles on its first input after computing (in place, through whatever view the input is; an e4m3 input, which
    # torch cannot add to, through its bytes)
    "mutates_input": (True, "", ("    outs = _launch(*inputs, **config)\n    t = inputs[0]\n"
                                 "    t.view(K.uint8).add_(1) if t.element_size() == 1 else t.add_(1.0)\n"
                                 "    return outs\n"), "correctness", "input 0 was modified"),
    # computes on the first call only; later calls return unwritten buffers of the same shapes (skipped work)
    "first_call_only": (True, "_SHAPES = []\n", (
        "    if not _SHAPES:\n"
        "        outs = _launch(*inputs, **config)\n"
        "        for o in (outs if isinstance(outs, tuple) else (outs,)):\n"
        "            _SHAPES.append((tuple(o.shape), o.dtype, o.device))\n"
        "        return outs\n"
        "    outs = tuple(K.empty(s, dtype=d, device=v) for s, d, v in _SHAPES)\n"
        "    return outs if len(outs) > 1 else outs[0]\n"),
        "correctness", ("non-deterministic", "NaN pattern", "Inf pattern", "max-abs", "not bitwise equal")),
    # the same two with the static check on
    "mutates_input_static": (False, "", ("    outs = _launch(*inputs, **config)\n    inputs[0].add_(1.0)\n"
                                         "    return outs\n"), "static", ("add_", "host code")),
    "first_call_only_static": (False, "_SHAPES = []\n", "    return _launch(*inputs, **config)\n",
                               "static", "module-level value _SHAPES"),
    # falls back to the reference's math in torch when the kernel fails
    "try_fallback": (False, "", ("    try:\n        return _launch(*inputs, **config)\n"
                                 "    except Exception:\n        return None\n"), "static", "try/except"),
    # calls the op group's reference
    "calls_reference": (False, "", ("    from rsi.refs import get_op_group\n"
                                    "    return get_op_group('OP').reference(*inputs)\n"), "static", "import"),
}


def _gpu_only(template: str) -> bool:
    """A CuTe DSL template runs on the GPU only (fp8_gemm's main one; its judged runs are H200 runs 48 and 49): on
    the CPU the judge must refuse it cleanly at compile."""
    return kernel_language(template_source(template)) == "cute" and bool(cute_unavailable("interpret"))


def _cpu_space(op: str):
    """The op group's main template, or where that runs on the GPU only its first template that runs here (fp8_gemm:
    the Triton TMA one), so that every op group's run-time defences are exercised on the CPU."""
    space = load_space(op)
    return next((s for s in (space, *space.alternatives) if not _gpu_only(s.template)), space)


@pytest.mark.parametrize("op", op_names())
def test_honest_template_accepted(judge, op):
    for space in (load_space(op), *load_space(op).alternatives):
        v = judge.evaluate(Candidate(op, template_source(space.template), space.heuristic(), origin="offline"))
        if _gpu_only(space.template):
            expect_rejected(v, "compile", "run on the GPU only")
        else:
            expect_accepted(v)


@pytest.mark.parametrize("cheat", list(CHEATS))
@pytest.mark.parametrize("op", op_names())
def test_cheat_rejected(judge, runtime, op, cheat):
    skip, prelude, body, stage, words = CHEATS[cheat]
    src = _wrap(op, body.replace("'OP'", repr(op)), prelude)
    space = _cpu_space(op)
    v = (runtime if skip else judge).evaluate(Candidate(op, src, space.heuristic(), origin="offline"))
    if _gpu_only(space.template) and stage != "static":   # the run-time defences need the kernel to run: here it cannot
        stage, words = "compile", "run on the GPU only"
    expect_rejected(v, stage, words)

"""The adversarial cheats, wrapped around every op group's own template: each op group is judged by the same
fail-closed contract. The honest template is the control; each wrapper adds one cheat."""

from __future__ import annotations

import pytest

from rsi.harness.evaluate import evaluate
from rsi.refs import op_names
from rsi.spaces import load_space, template_source

pytestmark = pytest.mark.interpreter


def _wrap(op: str, body: str, prelude: str = "") -> str:
    src = template_source(load_space(op).template).replace("\ndef launch(", "\ndef _launch(", 1)
    return src + prelude + "\n\ndef launch(*inputs, **config):\n" + body


CHEATS = {
    # a result cache keyed by shape (hidden from the static checks: run-time defence)
    "cached": ("runtime", ("    key = tuple(tuple(t.shape) for t in inputs if hasattr(t, 'shape'))\n"
                          "    if key not in _C:\n        _C[key] = _launch(*inputs, **config)\n    return _C[key]\n"),
               "\n_C = {}\n", "earlier call"),
    # scribbles on its first input after computing
    "mutates": ("runtime", "    out = _launch(*inputs, **config)\n    inputs[0].add_(1.0)\n    return out\n",
                "", "was modified"),
    # returns unwritten buffers shaped like the outputs (skips the work)
    "skips": ("runtime", ("    out = _launch(*inputs, **config)\n"
                         "    if isinstance(out, tuple):\n"
                         "        return tuple(torch.empty_like(o) for o in out)\n"
                         "    return torch.empty_like(out)\n"), "", ""),
    "try_fallback": ("static", ("    try:\n        return _launch(*inputs, **config)\n"
                               "    except Exception:\n        return None\n"), "", "try/except"),
    "calls_reference": ("static", ("    from rsi.refs import get_op_group\n"
                                  "    return get_op_group('OP').reference(*inputs)\n"), "", "reference"),
}


@pytest.mark.parametrize("op", op_names())
def test_honest_template_accepted(op):
    space = load_space(op)
    v = evaluate({"candidate": {"op": op, "source": template_source(space.template), "config": space.heuristic()},
                  "backend": "interpret"}, {})
    assert v["status"] == "accepted", v["reason"]


@pytest.mark.parametrize("cheat", list(CHEATS))
@pytest.mark.parametrize("op", op_names())
def test_cheat_rejected(op, cheat):
    kind, body, prelude, words = CHEATS[cheat]
    src = _wrap(op, body.replace("OP", op), prelude)
    v = evaluate({"candidate": {"op": op, "source": src, "config": load_space(op).heuristic()},
                  "backend": "interpret", "skip_static": kind == "runtime"}, {})
    assert v["status"] == "rejected", f"{op}/{cheat} accepted"
    assert v["stage"] == ("static" if kind == "static" else "correctness"), v
    assert words in v["reason"], v["reason"]

"""gelu_tanh under the Triton interpreter: the reference is diffusers' FFN activation, the template (its heuristic
passes the real harness in tests/adversarial/test_every_op_group.py) at both layouts of work (tile, flat) on every
layout and special case; broken variants fail."""

from __future__ import annotations

import pytest
import torch

from rsi.contract import Shape
from rsi.refs import get_op_group
from rsi.spaces import load_space, template_source
from tests.interp.ltx_helpers import every_case, module, run

pytestmark = pytest.mark.interpreter
OP = "gelu_tanh"
CONFIGS = [
    {"FLAT": 1, "BLOCK_F": 512, "num_warps": 4, "EVICT": ""},
    {"FLAT": 0, "BLOCK_F": 128, "ROWS": 2, "num_warps": 2, "EVICT": "evict_first"},
]


def test_reference_is_diffusers():
    activations = pytest.importorskip("diffusers.models.activations")
    g = get_op_group(OP)
    (x,) = g.make_inputs(Shape("s", {"rows": 5, "ffn": 300}), 4, "cpu")
    act = activations.GELU(300, 300, approximate="tanh")
    assert torch.equal(g.reference(x).view(torch.int16), act.gelu(x).view(torch.int16))


@pytest.mark.parametrize("config", CONFIGS)
def test_every_layout_and_special_case(config):
    """tanh is not torch's: ~98% of the outputs carry the reference's bits, all within the class."""
    every_case(OP, module(OP), config, min_bitwise=0.9)


def test_video_width():
    g = get_op_group(OP)
    inputs = g.make_inputs(Shape("w", {"rows": 4, "ffn": 16384}), 7, "cpu")
    ((ok, stats, why, same),) = run(OP, module(OP), inputs, load_space(OP).heuristic())
    assert ok and same >= 0.95 and stats["elem_worst_ratio"] < 0.5, (why, same)


@pytest.mark.parametrize("old,new", [
    ("u = 0.7978845608028654 * (x + 0.044715 * (x * x * x))", "u = 0.7978845608028654 * x"),  # the cubic dropped
    ("mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)",
     "mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols - 1)"),                      # last column
])
def test_broken_variants_fail(old, new):
    src = template_source(OP)
    assert old in src
    g = get_op_group(OP)
    ((ok, _, _, _),) = run(OP, module(OP, src.replace(old, new)), g.make_inputs(g.interp_shapes[1], 0, "cpu"),
                           load_space(OP).heuristic())
    assert not ok

"""head_merge under the Triton interpreter: bitwise through the real harness, broken index maps rejected,
a strided source read in place."""

from __future__ import annotations

import pytest

from rsi.harness import check
from rsi.refs import get_op_group
from tests.interp.interp_helpers import judge, load_template, mutated

pytestmark = pytest.mark.interpreter
OP = "head_merge"


@pytest.mark.parametrize("config", [None, {"BLOCK_P": 4, "num_warps": 1, "EVICT": "evict_first", "CONST": 0},
                                    {"BLOCK_P": 8, "num_warps": 2, "EVICT": "", "CONST": 1}])
def test_template_configs_accepted(config):
    v = judge(OP, config)
    assert v["status"] == "accepted", v["reason"]
    assert v["tolerance"]["class"] == "bitwise"


@pytest.mark.parametrize("const,old,new", [
    (0, "w = sw % world\n        s = sw // world", "s = sw % world\n        w = sw // world"),  # rank and row swapped
    (1, "w = sw % WORLD\n        s = sw // WORLD", "s = sw % WORLD\n        w = sw // WORLD"),  # same, compiled-in
    (1, "m = pmask[:, None] & (d[None, :] < D)", "m = pmask[:, None] & (d[None, :] < D - 1)"),  # last dim dropped
])
def test_broken_variants_rejected(const, old, new):
    v = judge(OP, {"BLOCK_P": 4, "num_warps": 1, "CONST": const}, mutated(OP, old, new))
    assert v["status"] == "rejected" and v["stage"] == "correctness", v["reason"]


def test_strided_source():
    op = get_op_group(OP)
    (x,) = op.make_inputs(op.interp_shapes[1], 6, "cpu")  # [W, S, h, D]
    xs = x.permute(1, 0, 2, 3).contiguous().permute(1, 0, 2, 3)  # same values, row-major in S
    assert not xs.is_contiguous()
    assert check.bitwise_equal(load_template(OP).launch(xs, BLOCK_P=8, num_warps=2), op.reference(xs))

"""fp8_gemm's Triton TMA template (rsi/templates/fp8_gemm_tma.py) under the interpreter: device-side descriptors over
x8 and w8 at every interpreter shape and layout, persistent and one program a tile, within the op group's
approximate class; layouts TMA cannot take (an offset or a row stride that is not a multiple of 16 bytes) are refused
with a clear error, before any launch."""

from __future__ import annotations

import pytest

from rsi.harness import check
from rsi.refs import get_op_group
from rsi.spaces import load_space, template_source
from tests.interp.test_fp8_producers import _module

pytestmark = pytest.mark.interpreter
SMALL = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 1, "num_warps": 4, "num_stages": 3}


def _template():
    return _module(template_source("fp8_gemm_tma"), "tpl_fp8_gemm_tma")


@pytest.mark.parametrize("persist", [3, 0])
def test_within_class_every_layout(persist):
    g, tpl = get_op_group("fp8_gemm"), _template()
    space = next(a for a in load_space("fp8_gemm").alternatives if a.template == "fp8_gemm_tma")
    cfg = {**SMALL, "PERSIST": persist}
    assert space.valid({**cfg, "PERSIST": 132})[0], cfg    # 3 programs (not an axis value): several tiles each here
    for s in g.interp_shapes:
        for lay in range(g.n_layouts):
            inputs = g.make_inputs(s, 11, "cpu", layout=lay)
            ok, _, why = check.compare(tpl.launch(*inputs, **cfg), g.reference(*inputs), g.oracle(*inputs),
                                           g.tolerance, None)
            assert ok, (s.name, lay, why)


def test_unaligned_layout_refused():
    g, tpl = get_op_group("fp8_gemm"), _template()
    x8, xs, w8, ws = g.make_inputs(g.interp_shapes[0], 1, "cpu")
    flat = x8.view(-1)
    shifted = flat.new_empty(flat.numel() + 1)[1:].view(x8.shape)      # one byte off: not 16-byte aligned
    with pytest.raises(ValueError, match="16-byte aligned"):
        tpl.launch(shifted, xs, w8, ws, **SMALL)
    R, Kd = x8.shape
    wide = x8.new_empty((R, Kd + 8))[:, :Kd]                         # aligned base, row stride K + 8 bytes
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        tpl.launch(wide, xs, w8, ws, **SMALL)

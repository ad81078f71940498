"""qk_norm_rope under the Triton interpreter: the template through the real harness, wrong rotation pairs and
masks rejected, q/k read in place from a qkv buffer with a padded row stride."""

from __future__ import annotations

import pytest
import torch

from rsi.harness import check
from rsi.refs import get_op_group
from tests.interp.interp_helpers import assert_full_plan, judge, load_template, mutated

pytestmark = pytest.mark.interpreter
OP = "qk_norm_rope"


@pytest.mark.parametrize("config", [
    None,  # the space's heuristic
    {"BLOCK_P": 4, "num_warps": 1, "EVICT": ""},  # tile boundary inside a row's heads
])
def test_template_configs_accepted(config):
    v = judge(OP, config)
    assert v["status"] == "accepted", v["reason"]
    assert_full_plan("qk_norm_rope", v)


@pytest.mark.parametrize("old,new", [
    # rotation partner one dim off: pairs (j, j + 47) instead of (j, j + 48)
    ("x2 = tl.load(row + (48 + i[None, :]) * stride_c", "x2 = tl.load(row + (47 + i[None, :]) * stride_c"),
    # wrong rotation sign
    ("o1 = n1 * cos - n2 * sin", "o1 = n1 * cos + n2 * sin"),
    # cos/sin halves swapped
    ("sin = tl.load(rope + (48 + i[None, :]) * stride_rope_c", "sin = tl.load(rope + (0 + i[None, :]) * stride_rope_c"),
    # last pass-through dim dropped (off-by-one mask)
    ("mj = pmask[:, None] & (j[None, :] < 32)", "mj = pmask[:, None] & (j[None, :] < 31)"),
])
def test_broken_variants_rejected(old, new):
    v = judge(OP, {"BLOCK_P": 4, "num_warps": 1}, mutated(OP, old, new))
    assert v["status"] == "rejected" and v["stage"] == "correctness", v["reason"]


def test_qkv_with_padded_row_stride():
    op = get_op_group(OP)
    qkv, wq, wk, rope = op.make_inputs(op.interp_shapes[1], 2, "cpu")
    big = torch.randn(qkv.shape[0], qkv.shape[1] + 128).to(torch.bfloat16)
    big[:, : qkv.shape[1]] = qkv
    qs = big[:, : qkv.shape[1]]
    assert not qs.is_contiguous()
    outs = load_template(OP).launch(qs, wq, wk, rope, BLOCK_P=8, num_warps=2)
    args = (qs, wq, wk, rope)
    for o, r, orc, sc in zip(outs, op.reference(*args), op.oracle(*args), check.term_scales(op, args, 2)):
        assert o.is_contiguous() and o.shape == r.shape
        ok, _, why = check.compare(o, r, orc, op.tolerance, term_scale=sc)
        assert ok, why

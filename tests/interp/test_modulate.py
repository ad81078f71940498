"""modulate under the Triton interpreter: the template through the real harness, broken variants rejected, strided
inputs read in place."""

from __future__ import annotations

import pytest
import torch

from rsi.harness import check
from rsi.refs import get_op_group
from tests.interp.interp_helpers import assert_full_plan, judge, load_template, mutated

pytestmark = pytest.mark.interpreter
OP = "modulate"


@pytest.mark.parametrize("config", [
    None,  # the space's heuristic (what a search starts from)
    {"BLOCK_H": 128, "BLOCK_T": 128, "ROWS": 2, "SEQ": 2, "num_warps": 4, "EVICT": "evict_first"},  # tail + pipeline
    {"BLOCK_H": 256, "BLOCK_T": 0, "ROWS": 1, "SEQ": 1, "num_warps": 2},  # one block, no tail
])
def test_template_configs_accepted(config):
    v = judge(OP, config)
    assert v["status"] == "accepted", v["reason"]
    assert_full_plan("modulate", v)


@pytest.mark.parametrize("old,new", [
    ("mb = rmask[:, None] & (cols_b[None, :] < n_cols)", "mb = rmask[:, None] & (cols_b[None, :] < n_cols - 1)"),
    ("h = n * (1.0 + sc.to(tl.float32)) + sh.to(tl.float32)", "h = n * (1.0 + sh.to(tl.float32)) + sc.to(tl.float32)"),
])
def test_broken_variants_rejected(old, new):
    v = judge(OP, {"BLOCK_H": 128, "BLOCK_T": 128, "ROWS": 1, "SEQ": 1, "num_warps": 4}, mutated(OP, old, new))
    assert v["status"] == "rejected" and v["stage"] == "correctness", v["reason"]


def test_strided_inputs_read_in_place():
    """x with a padded row stride and shift/scale as views of the [T, 6H] table: no copies needed."""
    op = get_op_group(OP)
    x, w, shift, scale, idx = op.make_inputs(op.interp_shapes[1], 3, "cpu")
    big = torch.randn(x.shape[0], x.shape[1] + 24).to(torch.bfloat16)
    big[:, : x.shape[1]] = x
    xs = big[:, : x.shape[1]]
    assert not xs.is_contiguous() and not shift.is_contiguous()
    mod = load_template(OP)
    out = mod.launch(xs, w, shift, scale, idx, BLOCK_H=128, BLOCK_T=128, num_warps=4)
    args = (xs, w, shift, scale, idx)
    ok, _, why = check.compare(out, op.reference(*args), op.oracle(*args), op.tolerance,
                               term_scale=check.term_scales(op, args, 1)[0])
    assert ok, why


def test_row_wider_than_blocks_refused():
    op = get_op_group(OP)
    inputs = op.make_inputs(op.interp_shapes[1], 0, "cpu")  # hidden 200
    with pytest.raises(ValueError, match="does not fit"):
        load_template(OP).launch(*inputs, BLOCK_H=128, BLOCK_T=0)

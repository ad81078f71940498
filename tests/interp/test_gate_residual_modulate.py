"""gate_residual_modulate under the Triton interpreter: the template through the real harness, broken variants
rejected, r bitwise equal to the reference's residual, strided inputs read in place."""

from __future__ import annotations

import pytest
import torch

from rsi.harness import check
from rsi.refs import get_op_group
from tests.interp.interp_helpers import assert_full_plan, judge, load_template, mutated

pytestmark = pytest.mark.interpreter
OP = "gate_residual_modulate"


@pytest.mark.parametrize("config", [
    None,  # the space's heuristic
    {"BLOCK_H": 128, "BLOCK_T": 128, "ROWS": 2, "SEQ": 2, "num_warps": 4, "EVICT": "evict_first"},
])
def test_template_configs_accepted(config):
    v = judge(OP, config)
    assert v["status"] == "accepted", v["reason"]
    assert_full_plan("gate_residual_modulate", v)


@pytest.mark.parametrize("old,new", [
    # the residual's tail columns skipped
    ("mb_n = rmask[:, None] & (cols_b[None, :] < n_cols)\n    ra_n",
     "mb_n = rmask[:, None] & (cols_b[None, :] < n_cols - 1)\n    ra_n"),
    # statistics of the un-gated residual
    ("r = (res.to(tl.float32) + gb.to(tl.float32)).to(tl.bfloat16)",
     "r = (res.to(tl.float32) + br.to(tl.float32)).to(tl.bfloat16)"),
])
def test_broken_variants_rejected(old, new):
    v = judge(OP, {"BLOCK_H": 128, "BLOCK_T": 128, "ROWS": 1, "SEQ": 1, "num_warps": 4}, mutated(OP, old, new))
    assert v["status"] == "rejected" and v["stage"] == "correctness", v["reason"]


def test_residual_bitwise_and_strided_inputs():
    """r follows the model's eager rounding exactly (same bits as the reference), also for a branch with a padded
    row stride and gate/shift/scale as views of the [T, 6H] table."""
    op = get_op_group(OP)
    res, gate, branch, w, shift, scale, idx = op.make_inputs(op.interp_shapes[1], 5, "cpu")
    big = torch.randn(branch.shape[0], branch.shape[1] + 40).to(torch.bfloat16)
    big[:, 8: 8 + branch.shape[1]] = branch
    bs = big[:, 8: 8 + branch.shape[1]]
    args = (res, gate, bs, w, shift, scale, idx)
    r, h = load_template(OP).launch(*args, BLOCK_H=128, BLOCK_T=128, num_warps=4)
    r_ref, h_ref = op.reference(*args)
    assert check.bitwise_equal(r, r_ref)
    ok, _, why = check.compare(h, h_ref, op.oracle(*args)[1], op.tolerance,
                               term_scale=check.term_scales(op, args, 2)[1])
    assert ok, why

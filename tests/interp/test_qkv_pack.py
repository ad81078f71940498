"""qkv_pack under the Triton interpreter: bitwise through the real harness (NaN payloads included), broken index
maps rejected, q/k/v from unrelated strided buffers."""

from __future__ import annotations

import pytest
import torch

from rsi.harness import check
from rsi.refs import get_op_group
from tests.interp.interp_helpers import assert_full_plan, judge, load_template, mutated

pytestmark = pytest.mark.interpreter
OP = "qkv_pack"


@pytest.mark.parametrize("config", [None, {"BLOCK_P": 4, "num_warps": 1, "EVICT": "evict_first"}])
def test_template_configs_accepted(config):
    v = judge(OP, config)
    assert v["status"] == "accepted", v["reason"]
    assert v["tolerance"]["class"] == "bitwise"
    assert_full_plan("qkv_pack", v)


@pytest.mark.parametrize("old,new", [
    # heads dealt round-robin to ranks (j * W + w) instead of in contiguous blocks (w * h + j)
    ("head = (ws // n_rows) * heads_per_rank + j",
     "head = (ws // n_rows) + j * (n_slots // (n_rows * heads_per_rank))"),
    ("tl.store(out + D, xk, mask=m)\n    tl.store(out + 2 * D, xv, mask=m)",
     "tl.store(out + D, xv, mask=m)\n    tl.store(out + 2 * D, xk, mask=m)"),  # k and v swapped
    ("pmask = p < n_slots", "pmask = p < n_slots - 1"),  # last slot skipped
])
def test_broken_variants_rejected(old, new):
    v = judge(OP, {"BLOCK_P": 4, "num_warps": 1}, mutated(OP, old, new))
    assert v["status"] == "rejected" and v["stage"] == "correctness", v["reason"]


def test_unrelated_strided_sources():
    """q, k, v need not share a buffer: a transposed q and a k with a padded head stride are read in place."""
    op = get_op_group(OP)
    q, k, v, world = op.make_inputs(op.interp_shapes[1], 4, "cpu")
    qt = q.transpose(0, 1).contiguous().transpose(0, 1)  # [S, NH, D] with stride (D, S*D, 1)
    kp = torch.randn(k.shape[0], k.shape[1], 2 * k.shape[2]).to(torch.bfloat16)[:, :, : k.shape[2]]
    kp.copy_(k)
    out = load_template(OP).launch(qt, kp, v, world, BLOCK_P=8, num_warps=2)
    assert check.bitwise_equal(out, op.reference(qt, kp, v, world))

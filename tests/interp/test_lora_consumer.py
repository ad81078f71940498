"""lora_consumer under the Triton interpreter: bitwise against add + the unfused swiglu consumer, through the real
harness; skipping the sum's bf16 rounding is rejected; the reference's consumer gives the swiglu template's bits."""

from __future__ import annotations

import pytest
import torch

from rsi.harness import check
from rsi.refs import get_op_group
from rsi.refs import lora_consumer as L
from rsi.refs.common import ALL_SPECIALS
from tests.interp.interp_helpers import assert_full_plan, judge, load_template, mutated

pytestmark = pytest.mark.interpreter
OP = "lora_consumer"


@pytest.mark.parametrize("config", [None, {"BLOCK_F": 64, "ROWS": 4, "num_warps": 2, "EVICT": "evict_first"}])
def test_template_configs_accepted(config):
    v = judge(OP, config)
    assert v["status"] == "accepted", v["reason"]
    assert v["tolerance"]["class"] == "bitwise"
    assert_full_plan("lora_consumer", v)


@pytest.mark.parametrize("old,new", [
    # the precision bug the op exists to prevent: the sum kept in fp32 instead of rounded to bf16 first
    ("g = (bg + lg).to(tl.bfloat16).to(tl.float32)", "g = bg + lg"),
    # the LoRA branch dropped from the up half
    ("u = (bu + lu).to(tl.bfloat16).to(tl.float32)", "u = bu"),
])
def test_broken_variants_rejected(old, new):
    v = judge(OP, {"BLOCK_F": 64, "ROWS": 2, "num_warps": 2}, mutated(OP, old, new))
    assert v["status"] == "rejected" and v["stage"] == "correctness", v["reason"]


def test_reference_consumer_is_the_swiglu_template():
    """The reference's embedded consumer gives the current swiglu template's bits at every swiglu config family
    (elementwise: config-independent), special values included."""
    sw = load_template("swiglu")
    op = get_op_group(OP)
    for shape in op.interp_shapes:
        base, lora = op.make_inputs(shape, 1, "cpu")
        for case in (None,) + tuple(ALL_SPECIALS):
            b, lo = (base, lora) if case is None else case.apply((base, lora), ())
            y = torch.add(b, lo)
            ref = L.swiglu_consumer(y)
            for cfg in ({"FLAT": 0, "BLOCK_F": 64, "ROWS": 2}, {"FLAT": 1, "BLOCK_F": 128}):
                assert check.bitwise_equal(sw.launch(y, **cfg), ref), (shape.name, case and case.name, cfg)


def test_strided_branches():
    op = get_op_group(OP)
    base, lora = op.make_inputs(op.interp_shapes[1], 2, "cpu")
    big = torch.randn(lora.shape[0], lora.shape[1] + 16).to(torch.bfloat16)
    big[:, : lora.shape[1]] = lora
    ls = big[:, : lora.shape[1]]
    out = load_template(OP).launch(base, ls, BLOCK_F=64, ROWS=2, num_warps=2)
    assert check.bitwise_equal(out, op.reference(base, ls))

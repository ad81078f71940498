"""ltx_modulate under the Triton interpreter: the reference is diffusers' computation; the template (its heuristic
passes the real harness in tests/adversarial/test_every_op_group.py) at two more configs (pipelined row groups,
several rows per program) on every layout and special case, diffusers' bits at the LTX row widths; broken variants
fail."""

from __future__ import annotations

import pytest
import torch

from rsi.contract import Shape
from rsi.refs import get_op_group
from rsi.spaces import load_space, template_source
from tests.interp.ltx_helpers import every_case, module, run

pytestmark = pytest.mark.interpreter
OP = "ltx_modulate"
CONFIGS = [
    {"ROWS": 2, "SEQ": 2, "num_warps": 4, "EVICT": "evict_first", "STREAM": 0},   # pipelined row groups
    {"ROWS": 4, "SEQ": 1, "num_warps": 2, "EVICT": "", "STREAM": 1},
]


def test_reference_is_diffusers():
    """The reference gives the bits of diffusers' RMSNorm(elementwise_affine=False) and the block's modulation."""
    normalization = pytest.importorskip("diffusers.models.normalization")
    g = get_op_group(OP)
    x, scale, shift = g.make_inputs(Shape("s", {"rows": 9, "dim": 512}), 4, "cpu")
    norm = normalization.RMSNorm(512, eps=1e-6, elementwise_affine=False)
    want = norm(x[None]) * (1 + scale[None, None]) + shift[None, None]   # [B, S, D] with [B, 1, D] params
    assert torch.equal(g.reference(x, scale, shift).view(torch.int16), want[0].view(torch.int16))
    assert torch.equal(g.reference(x, scale[None], shift[None]), want[0])   # a [1, D] row broadcasts the same


@pytest.mark.parametrize("config", CONFIGS)
def test_every_layout_and_special_case(config):
    every_case(OP, module(OP), config)


def test_diffusers_bits_at_ltx_widths():
    """At the video (4096) and audio (2048) widths the heuristic reproduces the reference bit for bit; skipping
    diffusers' rounding of the product (one fp32 affine) stays within the class but loses the bits."""
    g = get_op_group(OP)
    heur = load_space(OP).heuristic()
    fused = module(OP, template_source(OP).replace("p = (n * one_sc[None, :]).to(tl.bfloat16).to(tl.float32)",
                                                   "p = n * one_sc[None, :]"))
    for dim in (4096, 2048):
        inputs = g.make_inputs(Shape("w", {"rows": 16, "dim": dim}), 7, "cpu")
        ((ok, _, why, same),) = run(OP, module(OP), inputs, heur)
        assert ok and same >= 0.999, (dim, why, same)
        ((ok, _, why, same),) = run(OP, fused, inputs, heur)
        assert ok and same < 0.99, (dim, why, same)


@pytest.mark.parametrize("old,new", [
    ("m = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]",
     "m = (rows < n_rows)[:, None] & (cols < n_cols - 1)[None, :]"),                 # last column dropped
    ("/ n_cols + eps", "/ BLOCK_D + eps"),                                           # mean over the padded block
    ("h = (p + sh[None, :])", "h = (p + sc[None, :])"),                              # shift <-> scale
])
def test_broken_variants_fail(old, new):
    src = template_source(OP)
    assert old in src
    g = get_op_group(OP)
    inputs = g.make_inputs(g.interp_shapes[1], 0, "cpu")   # dim 200: a padded 256 block
    ((ok, _, _, _),) = run(OP, module(OP, src.replace(old, new)), inputs, load_space(OP).heuristic())
    assert not ok

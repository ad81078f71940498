"""ltx_gate_residual_modulate under the Triton interpreter: the reference is diffusers' gated residual followed by the
next norm and modulation; the template (its heuristic passes the real harness in
tests/adversarial/test_every_op_group.py) at two more configs on every layout and special case, x' bitwise and h
with diffusers' bits at the LTX widths; broken variants fail."""

from __future__ import annotations

import pytest
import torch

from rsi.contract import Shape
from rsi.refs import get_op_group
from rsi.spaces import load_space, template_source
from tests.interp.ltx_helpers import every_case, module, run

pytestmark = pytest.mark.interpreter
OP = "ltx_gate_residual_modulate"
CONFIGS = [
    {"ROWS": 2, "SEQ": 2, "num_warps": 4, "EVICT": "evict_first", "STREAM": 0},
    {"ROWS": 4, "SEQ": 1, "num_warps": 2, "EVICT": "", "STREAM": 1},
]


def test_reference_is_diffusers():
    normalization = pytest.importorskip("diffusers.models.normalization")
    g = get_op_group(OP)
    x, branch, gate, scale, shift = g.make_inputs(Shape("s", {"rows": 9, "dim": 512}), 4, "cpu")
    b = x[None] + branch[None] * gate[None, None]       # hidden_states + attn_hidden_states * gate_msa
    norm = normalization.RMSNorm(512, eps=1e-6, elementwise_affine=False)
    h = norm(b) * (1 + scale[None, None]) + shift[None, None]
    r_ref, h_ref = g.reference(x, branch, gate, scale, shift)
    assert torch.equal(r_ref.view(torch.int16), b[0].view(torch.int16))
    assert torch.equal(h_ref.view(torch.int16), h[0].view(torch.int16))


@pytest.mark.parametrize("config", CONFIGS)
def test_every_layout_and_special_case(config):
    every_case(OP, module(OP), config)


def test_diffusers_bits_at_ltx_widths():
    """x' is bitwise the reference's, h at least 99.9% at the video and audio widths (all of it measured)."""
    g = get_op_group(OP)
    heur = load_space(OP).heuristic()
    for dim in (4096, 2048):
        inputs = g.make_inputs(Shape("w", {"rows": 16, "dim": dim}), 7, "cpu", layout=1)
        (ok_r, _, why_r, same_r), (ok_h, _, why_h, same_h) = run(OP, module(OP), inputs, heur)
        assert ok_r and same_r == 1.0, (dim, why_r, same_r)
        assert ok_h and same_h >= 0.999, (dim, why_h, same_h)


@pytest.mark.parametrize("old,new", [
    ("r = (x.to(tl.float32) + gb.to(tl.float32))", "r = (x.to(tl.float32) + br.to(tl.float32))"),   # gate dropped
    ("m = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]",
     "m = (rows < n_rows)[:, None] & (cols < n_cols - 1)[None, :]"),                            # last column
    ("tl.sum(rf * rf, axis=1) / n_cols", "tl.sum(rf * rf, axis=1) / BLOCK_D"),                  # padded mean
])
def test_broken_variants_fail(old, new):
    src = template_source(OP)
    assert old in src
    g = get_op_group(OP)
    inputs = g.make_inputs(g.interp_shapes[1], 0, "cpu")
    results = run(OP, module(OP, src.replace(old, new)), inputs, load_space(OP).heuristic())
    assert not all(ok for ok, _, _, _ in results)

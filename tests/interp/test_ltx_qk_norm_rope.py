"""ltx_qk_norm_rope under the Triton interpreter: the reference is diffusers' norm_q/norm_k (torch.nn.RMSNorm) and
apply_interleaved_rotary_emb; the template (its heuristic passes the real harness in
tests/adversarial/test_every_op_group.py) with both PAIR paths on every layout and special case, diffusers' own
rope table at the video width; broken variants fail."""

from __future__ import annotations

import pytest
import torch

from rsi.contract import Shape
from rsi.refs import get_op_group
from rsi.spaces import load_space, template_source
from tests.interp.ltx_helpers import every_case, module, run

pytestmark = pytest.mark.interpreter
OP = "ltx_qk_norm_rope"
CONFIGS = [
    {"ROWS": 2, "num_warps": 4, "PAIR": 1, "EVICT": ""},     # partner loaded again
    {"ROWS": 2, "num_warps": 8, "PAIR": 0, "EVICT": "evict_first"},
]


def _diffusers_rope(dim: int, rows_fhw: tuple[int, int, int]):
    """cos, sin [R, D] fp32 exactly as LTX2AudioVideoRotaryPosEmbed makes them for a video latent grid."""
    ltx2 = pytest.importorskip("diffusers.models.transformers.transformer_ltx2")
    rope = ltx2.LTX2AudioVideoRotaryPosEmbed(dim=dim, modality="video", double_precision=True,
                                             rope_type="interleaved")
    cos, sin = rope(rope.prepare_video_coords(1, *rows_fhw, "cpu"))
    return ltx2, cos[0], sin[0]


def test_reference_is_diffusers():
    """The reference gives the bits of torch.nn.RMSNorm (bf16 weight) + diffusers' apply_interleaved_rotary_emb,
    with diffusers' fp32 cos/sin."""
    ltx2, cos, sin = _diffusers_rope(256, (2, 3, 2))
    g = get_op_group(OP)
    q, k, wq, wk, _, _ = g.make_inputs(Shape("s", {"rows": 12, "dim": 256}), 4, "cpu")
    assert cos.dtype == torch.float32 and cos.shape == q.shape
    outs = []
    for x, w in ((q, wq), (k, wk)):
        norm = torch.nn.RMSNorm(256, eps=1e-6, elementwise_affine=True).to(torch.bfloat16)
        with torch.no_grad():
            norm.weight.copy_(w)
            outs.append(ltx2.apply_interleaved_rotary_emb(norm(x[None]), (cos[None], sin[None]))[0])
    for got, want in zip(g.reference(q, k, wq, wk, cos, sin), outs):
        assert torch.equal(got.view(torch.int16), want.view(torch.int16))


@pytest.mark.parametrize("config", CONFIGS)
def test_every_layout_and_special_case(config):
    every_case(OP, module(OP), config)


def test_diffusers_rope_table_at_video_width():
    """diffusers' own (pair-repeated, padded) cos/sin at D = 4096: the heuristic passes and keeps >= 99.9% of the
    reference's bits (all of them measured)."""
    _, cos, sin = _diffusers_rope(4096, (2, 2, 3))
    g = get_op_group(OP)
    q, k, wq, wk, _, _ = g.make_inputs(Shape("w", {"rows": 12, "dim": 4096}), 5, "cpu")
    for ok, _, why, same in run(OP, module(OP), (q, k, wq, wk, cos, sin), load_space(OP).heuristic()):
        assert ok and same >= 0.999, (why, same)


@pytest.mark.parametrize("old,new", [
    ("rot = tl.reshape(tl.join(-od, ev), (ROWS, BLOCK_D))", "rot = tl.reshape(tl.join(od, -ev), (ROWS, BLOCK_D))"),
    ("rot = tl.reshape(tl.join(-od, ev), (ROWS, BLOCK_D))", "rot = tl.reshape(tl.join(-ev, od), (ROWS, BLOCK_D))"),
    ("out = n * cos + rot * sin", "out = n * cos - rot * sin"),
    ("rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)", "rstd = tl.rsqrt(tl.sum(x * x, axis=1) / BLOCK_D + eps)"),
    ("_norm_rope(k_ptr, stride_kr, stride_kc, wk_ptr", "_norm_rope(k_ptr, stride_kr, stride_kc, wq_ptr"),
])
def test_broken_variants_fail(old, new):
    src = template_source(OP)
    assert old in src
    g = get_op_group(OP)
    inputs = g.make_inputs(g.interp_shapes[1], 0, "cpu")
    results = run(OP, module(OP, src.replace(old, new)), inputs, load_space(OP).heuristic())
    assert not all(ok for ok, _, _, _ in results)

"""QK RMSNorm across all heads, then interleaved RoPE, of one LTX-2 self-attention layer (q and k together).

diffusers 0.42.1 ``LTX2AudioVideoAttnProcessor.__call__`` (transformer_ltx2.py), ``qk_norm="rms_norm_across_heads"``,
``rope_type="interleaved"``::

    query = attn.norm_q(query)      # torch.nn.RMSNorm(heads * dim_head, eps=1e-6, elementwise_affine=True)
    key = attn.norm_k(key)
    query = apply_interleaved_rotary_emb(query, query_rotary_emb)
    key = apply_interleaved_rotary_emb(key, query_rotary_emb)    # self-attention: key_rotary_emb is None

``torch.nn.RMSNorm.forward`` is ``F.rms_norm(x, (D,), weight, eps)``; for bf16 x and bf16 weight torch 2.13 runs
``aten::_fused_rms_norm`` on CPU and CUDA: fp32 statistics and ``bf16(x_f32 * rstd * w_f32)``, one rounding
(checked on the CPU against both spellings: the unfused ``bf16(bf16(x * rstd) * w)`` differs at ~25% of the
elements). ``apply_interleaved_rotary_emb``: pairs (2i, 2i + 1), ``x_rotated = (-x[2i+1], x[2i])``,
``out = (x.float() * cos + x_rotated.float() * sin).to(bf16)``. cos/sin: [R, D] fp32, as
``LTX2AudioVideoRotaryPosEmbed`` returns them (fp64 frequency grid with ``rope_double_precision=True``, cast to
fp32 before cos/sin, each value repeated for the pair, padded with cos 1 / sin 0 to D).

q, k: [R, D] bf16 (the to_q / to_k outputs; video D = 4096 = 32 x 128 at 16,128 rows, audio D = 2048 = 32 x 64,
~126 rows); wq, wk: [D] bf16; cos, sin: [R, D] fp32 -> (q', k') contiguous [R, D] bf16.
Inputs are drawn with an independent angle per element (cos_j^2 + sin_j^2 = 1, no pair structure): the contract is
the formula above for any [R, D] table, so a kernel may not read half the table on the strength of the
production pairs.

Class ``tolerance``: the fp32 statistics depend on the reduction order (see rsi.refs.ltx_modulate) and a GPU
kernel may contract ``x * cos + x_rot * sin`` into an fma; bounds as ``qk_norm_rope``'s.
Term scales: ``max(|n cos|, |n_rot sin|)`` per element, n from the fp64 chain.
Bytes: read q, k, write q', k' (8*R*D) + cos, sin fp32 (8*R*D) + wq, wk (4*D): the fusion reads the rope table
once for both.
Layouts (same values): 0 production (contiguous q, k, cos, sin, wq, wk); 1 q, k, v column views of one fused
[R, 3D] qkv output (row stride 3D), cos/sin with padded row strides (D + 24) at storage offsets, wq/wk at
16-byte offsets; 2 q, k with odd row strides at odd offsets (unaligned), cos/sin stored transposed ([D, R]
storage), wq/wk at odd offsets.
No huge shape: the largest tensor is 6.6e7 elements.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from rsi.contract import OpGroup, Shape
from rsi.refs import ltx_modulate as M
from rsi.refs.common import ALL_SPECIALS, BF16, generator, padded_rows, randn, relayout

OP = "ltx_qk_norm_rope"
EPS = 1e-6
SCHEMA = "(Tensor q, Tensor k, Tensor wq, Tensor wk, Tensor cos, Tensor sin) -> (Tensor, Tensor)"


def apply_interleaved_rotary_emb(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """diffusers' ``apply_interleaved_rotary_emb`` on [..., D] (it unflattens dim 2 of [B, S, D]; -1 here)."""
    x_real, x_imag = x.unflatten(-1, (-1, 2)).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(-2)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def reference(q, k, wq, wk, cos, sin):
    """q, k: [R, D] bf16, wq/wk: [D] bf16, cos/sin: [R, D] fp32 -> (q', k') [R, D] bf16."""
    D = q.shape[-1]
    qn = F.rms_norm(q, (D,), wq, EPS)     # attn.norm_q (torch.nn.RMSNorm.forward)
    kn = F.rms_norm(k, (D,), wk, EPS)     # attn.norm_k
    return apply_interleaved_rotary_emb(qn, cos, sin), apply_interleaved_rotary_emb(kn, cos, sin)


def _norm64(x, w):
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + EPS) * w.double()


def _rot(n: torch.Tensor) -> torch.Tensor:
    a, b = n.unflatten(-1, (-1, 2)).unbind(-1)
    return torch.stack([-b, a], dim=-1).flatten(-2)


def oracle(q, k, wq, wk, cos, sin):
    c, s = cos.double(), sin.double()
    outs = []
    for x, w in ((q, wq), (k, wk)):
        n = _norm64(x, w)
        outs.append(n * c + _rot(n) * s)
    return tuple(outs)


def term_scale(q, k, wq, wk, cos, sin):
    c, s = cos.double(), sin.double()
    outs = []
    for x, w in ((q, wq), (k, wk)):
        n = _norm64(x, w)
        outs.append(torch.maximum((n * c).abs(), (_rot(n) * s).abs()))
    return tuple(outs)


def make_inputs(shape: Shape, seed: int, device, layout: int = 0):
    R, D = shape.dims["rows"], shape.dims["dim"]
    g = generator(seed + 3, device)
    q = randn((R, D), seed, device, BF16, scale=2.0)
    k = randn((R, D), seed + 1, device, BF16, scale=2.0)
    wq = (randn((D,), seed + 4, device, BF16, scale=0.2) + 1.0).to(BF16)
    wk = (randn((D,), seed + 5, device, BF16, scale=0.2) + 1.0).to(BF16)
    theta = torch.rand((R, D), generator=g, device=device, dtype=torch.float64) * (2 * math.pi)
    cos, sin = theta.cos().float(), theta.sin().float()
    if layout == 1:   # q, k (and v) as column views of one fused [R, 3D] qkv GEMM output (NaN where v is)
        qkv = relayout(torch.cat([q, k], dim=1), pad=(0, D))
        return (qkv[:, :D], qkv[:, D:], relayout(wq, offset=8), relayout(wk, offset=16), padded_rows(cos, 24, 4),
                padded_rows(sin, 24, 8))
    if layout == 2:
        return (padded_rows(q, 3, 1), padded_rows(k, 5, 3), relayout(wq, offset=1), relayout(wk, offset=3),
                relayout(cos, order=(1, 0), offset=1), relayout(sin, order=(1, 0), offset=3))
    return q, k, wq, wk, cos, sin


def dims_of(args: tuple) -> dict[str, int]:
    """q: [R, D] -> rows, dim."""
    return {"rows": args[0].shape[0], "dim": args[0].shape[1]}


def fake(q, k, wq, wk, cos, sin):
    return q.new_empty(q.shape), k.new_empty(k.shape)


def bytes_moved(shape: Shape) -> int:
    R, D = shape.dims["rows"], shape.dims["dim"]
    return 8 * R * D + 8 * R * D + 2 * 2 * D


def flops(shape: Shape) -> int:
    """Per row of q and of k: sum of squares (2D), mean, + eps, rsqrt (3), * rstd, * w (2D), rope x * cos,
    x_rot * sin, + (3D; the sign flip is free): 2 x rows x (7D + 3)."""
    R, D = shape.dims["rows"], shape.dims["dim"]
    return 2 * R * (7 * D + 3)


OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=oracle,
    make_inputs=make_inputs,
    tolerance=M.TOL,
    shapes=M.ltx_shapes(),
    odd_shapes=M.ODD_SHAPES,
    interp_shapes=M.INTERP_SHAPES,
    special_cases=ALL_SPECIALS,
    bytes_moved=bytes_moved,
    flops=flops,
    noncontiguous_inputs=(),
    special_inputs=(),
    input_names=("q", "k", "wq", "wk", "cos", "sin"),
    template="ltx_qk_norm_rope",
    notes="LTX-2 self-attention: torch RMSNorm across all heads (eps 1e-6, bf16 weight, one rounding) then "
          "interleaved RoPE with fp32 cos/sin [R, D] (one angle per element in the trials); specials reach q, k, "
          "wq, wk, cos and sin; largest tensor 6.6e7 elements: no huge shape",
    term_scale=term_scale,
    n_layouts=M.N_LAYOUTS,
    sample_shapes=M.sample_shapes,
    huge_shapes=(),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
)

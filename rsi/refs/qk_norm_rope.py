"""Per-head QK RMSNorm then partial 3-D RoPE, read straight out of the fused QKV projection output.

``qkv: [R, 3*NH*128]`` bf16 is the output of ``attn.qkv_proj`` ([Q; K; V] after the per-head reorder); q and k are
its strided ``[R, NH, 128]`` views (row stride 3*NH*128, no copy). Per head (H3_SPEC.md sections 1 and 5):
  n = bf16(x_f32 * rsqrt(mean(x_f32^2) + 1e-5) * w_f32)                      (per-head RMSNorm, 128 dims)
  for j < 48: out[j]    = bf16(n[j] * cos[j] - n[j+48] * sin[j])             (fp32 math, NeoX half-split
              out[j+48] = bf16(n[j+48] * cos[j] + n[j] * sin[j])               over the first 96 dims)
  out[96:128] = n[96:128]                                                     (pass through)
``rope: [R, 96]`` bf16 is vLLM's table cos(theta[0:48]) | sin(theta[0:48]) with theta = [t16 | h16 | w16] and
inv_freq[j] = 10000^(-j/16). Outputs q_out, k_out: contiguous ``[R, NH, 128]`` bf16, the layout varlen attention
consumes. Class ``tolerance``. Bytes: read q, k (4*R*NH*128) + rope (192*R), write q, k (4*R*NH*128).
"""

from __future__ import annotations

import torch

from rsi.contract import OpGroup, Shape, Tolerance
from rsi.refs.common import ALL_SPECIALS, BF16, generator, randn

OP = "qk_norm_rope"
HEADS = 56
HEAD_DIM = 128
ROT = 96
EPS = 1e-5


def split_qk(qkv: torch.Tensor, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    R = qkv.shape[0]
    inner = heads * HEAD_DIM
    return qkv[:, :inner].view(R, heads, HEAD_DIM), qkv[:, inner:2 * inner].view(R, heads, HEAD_DIM)


def _norm_rope(x: torch.Tensor, w: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    n = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(BF16).float()
    cos = rope[:, None, : ROT // 2].float()
    sin = rope[:, None, ROT // 2:].float()
    a, b, rest = n[..., : ROT // 2], n[..., ROT // 2: ROT], n[..., ROT:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1).to(BF16)


def reference(qkv, wq, wk, rope):
    """qkv: [R, 3*NH*128] bf16, wq/wk: [128] bf16, rope: [R, 96] bf16 -> (q, k) contiguous [R, NH, 128] bf16."""
    heads = qkv.shape[1] // (3 * HEAD_DIM)
    q, k = split_qk(qkv, heads)
    return _norm_rope(q, wq, rope), _norm_rope(k, wk, rope)


def _oracle_one(x, w, rope):
    xd = x.double()
    n = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + EPS) * w.double()
    cos = rope[:, None, : ROT // 2].double()
    sin = rope[:, None, ROT // 2:].double()
    a, b, rest = n[..., : ROT // 2], n[..., ROT // 2: ROT], n[..., ROT:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)


def oracle(qkv, wq, wk, rope):
    heads = qkv.shape[1] // (3 * HEAD_DIM)
    q, k = split_qk(qkv, heads)
    return _oracle_one(q, wq, rope), _oracle_one(k, wk, rope)


def rope_table(t: torch.Tensor, h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """[R] fp64 positions per axis -> [R, 96] bf16 table cos(theta48) | sin(theta48) (H3_SPEC.md section 1)."""
    inv_freq = 10000.0 ** (-torch.arange(16, dtype=torch.float64, device=t.device) / 16)
    theta = torch.cat([t[:, None] * inv_freq, h[:, None] * inv_freq, w[:, None] * inv_freq], dim=-1).float()
    return torch.cat([theta.cos(), theta.sin()], dim=-1).to(BF16)


def make_inputs(shape: Shape, seed: int, device):
    R, NH = shape.dims["rows"], shape.dims["heads"]
    qkv = randn((R, 3 * NH * HEAD_DIM), seed, device, BF16, scale=2.0)
    wq = (randn((HEAD_DIM,), seed + 1, device, BF16, scale=0.2) + 1.0).to(BF16)
    wk = (randn((HEAD_DIM,), seed + 2, device, BF16, scale=0.2) + 1.0).to(BF16)
    g = generator(seed + 3, device)
    t = torch.randint(0, 400, (R,), generator=g, device=device).double() * (5.0 / 3.0)
    h = torch.rand((R,), generator=g, device=device, dtype=torch.float64) * 32
    w = torch.rand((R,), generator=g, device=device, dtype=torch.float64) * 32
    return qkv, wq, wk, rope_table(t, h, w)


def bytes_moved(shape: Shape) -> int:
    R, NH = shape.dims["rows"], shape.dims["heads"]
    return 8 * R * NH * HEAD_DIM + 2 * ROT * R + 4 * HEAD_DIM


def _s(name: str, rows: int, heads: int = HEADS) -> Shape:
    return Shape(name, {"rows": rows, "heads": heads})


OP_GROUP = OpGroup(
    name=OP,
    reference=reference,
    oracle=oracle,
    make_inputs=make_inputs,
    tolerance=Tolerance(atol=1e-6, rtol=1e-4, factor=2.0, cosine_floor=0.9999),
    shapes=(_s("stage1", 10250), _s("per_rank", 9562, 14), _s("full", 38248)),
    odd_shapes=(_s("one_row", 1), _s("odd", 333, 7)),
    interp_shapes=(_s("tiny", 3, 2), _s("odd", 7, 3)),
    special_cases=ALL_SPECIALS,
    bytes_moved=bytes_moved,
    noncontiguous_inputs=("qkv (q and k are strided views)",),
    special_inputs=(0,),
    input_names=("qkv", "wq", "wk", "rope"),
    template="qk_norm_rope",
    notes="per_rank: 14 of 56 heads after the Ulysses all-to-all on four ranks",
)

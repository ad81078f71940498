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
Term scales (the last operation per output element): ``max(|a cos|, |b sin|)`` for ``a cos - b sin``,
``max(|b cos|, |a sin|)`` for ``b cos + a sin`` (n from the fp64 chain), ``|n|`` for the pass-through dims.
Layouts (same values): 0 production (contiguous qkv, rope, wq, wk); 1 qkv and rope with padded row strides
(+24) at 16-byte storage offsets, wq/wk at offsets; 2 qkv with an odd row stride at an odd offset (unaligned),
rope stored transposed ([96, R] storage), wq/wk at odd offsets.
Huge shape: rows 104,000 x 56 heads (qkv: 2.24e9 elements > 2**31, 4.5 GB; 2.6x the 38,248 production rows,
e.g. a 13 s clip). The fp64 oracle and term scale of the two [R, 56, 128] outputs (7.5e8 elements each, 6 GB in
fp64): the whole trial peaked at 43 GB on the H200, judged against the full oracle like any other.
"""

from __future__ import annotations

import random

import torch

from rsi.contract import OpGroup, Shape, Tolerance
from rsi.refs.common import (
    ALL_SPECIALS,
    BF16,
    ULYSSES_WORLDS,
    draw_rows,
    drawn,
    generator,
    padded_rows,
    randn,
    relayout,
)

OP = "qk_norm_rope"
HEADS = 56
HEAD_DIM = 128
ROT = 96
EPS = 1e-5
SCHEMA = "(Tensor qkv, Tensor wq, Tensor wk, Tensor rope) -> (Tensor, Tensor)"


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


def _norm64(x, w):
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + EPS) * w.double()


def _cos_sin64(rope):
    return rope[:, None, : ROT // 2].double(), rope[:, None, ROT // 2:].double()


def _oracle_one(x, w, rope):
    n = _norm64(x, w)
    cos, sin = _cos_sin64(rope)
    a, b, rest = n[..., : ROT // 2], n[..., ROT // 2: ROT], n[..., ROT:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)


def oracle(qkv, wq, wk, rope):
    heads = qkv.shape[1] // (3 * HEAD_DIM)
    q, k = split_qk(qkv, heads)
    return _oracle_one(q, wq, rope), _oracle_one(k, wk, rope)


def _term_one(x, w, rope):
    n = _norm64(x, w)
    cos, sin = _cos_sin64(rope)
    a, b, rest = n[..., : ROT // 2], n[..., ROT // 2: ROT], n[..., ROT:]
    return torch.cat([torch.maximum((a * cos).abs(), (b * sin).abs()),
                      torch.maximum((b * cos).abs(), (a * sin).abs()), rest.abs()], dim=-1)


def term_scale(qkv, wq, wk, rope):
    heads = qkv.shape[1] // (3 * HEAD_DIM)
    q, k = split_qk(qkv, heads)
    return _term_one(q, wq, rope), _term_one(k, wk, rope)


def rope_table(t: torch.Tensor, h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """[R] fp64 positions per axis -> [R, 96] bf16 table cos(theta48) | sin(theta48) (H3_SPEC.md section 1)."""
    inv_freq = 10000.0 ** (-torch.arange(16, dtype=torch.float64, device=t.device) / 16)
    theta = torch.cat([t[:, None] * inv_freq, h[:, None] * inv_freq, w[:, None] * inv_freq], dim=-1).float()
    return torch.cat([theta.cos(), theta.sin()], dim=-1).to(BF16)


def make_inputs(shape: Shape, seed: int, device, layout: int = 0):
    R, NH = shape.dims["rows"], shape.dims["heads"]
    qkv = randn((R, 3 * NH * HEAD_DIM), seed, device, BF16, scale=2.0)
    wq = (randn((HEAD_DIM,), seed + 1, device, BF16, scale=0.2) + 1.0).to(BF16)
    wk = (randn((HEAD_DIM,), seed + 2, device, BF16, scale=0.2) + 1.0).to(BF16)
    g = generator(seed + 3, device)
    t = torch.randint(0, 400, (R,), generator=g, device=device).double() * (5.0 / 3.0)
    h = torch.rand((R,), generator=g, device=device, dtype=torch.float64) * 32
    w = torch.rand((R,), generator=g, device=device, dtype=torch.float64) * 32
    rope = rope_table(t, h, w)
    if layout == 1:
        return padded_rows(qkv, 24, 8), relayout(wq, offset=8), relayout(wk, offset=16), padded_rows(rope, 24, 8)
    if layout == 2:
        return padded_rows(qkv, 3, 1), relayout(wq, offset=1), relayout(wk, offset=3), relayout(rope, order=(1, 0))
    return qkv, wq, wk, rope


def dims_of(args: tuple) -> dict[str, int]:
    """qkv: [R, 3 * NH * 128] -> rows, heads."""
    return {"rows": args[0].shape[0], "heads": args[0].shape[1] // (3 * HEAD_DIM)}


def fake(qkv, wq, wk, rope):
    shape = (qkv.shape[0], qkv.shape[1] // (3 * HEAD_DIM), HEAD_DIM)
    return qkv.new_empty(shape), qkv.new_empty(shape)


def bytes_moved(shape: Shape) -> int:
    R, NH = shape.dims["rows"], shape.dims["heads"]
    return 8 * R * NH * HEAD_DIM + 2 * ROT * R + 4 * HEAD_DIM


# per (row, head) of q and of k: sum of squares (2 * 128), mean, + eps, rsqrt (3), * rstd, * w (2 * 128),
# rotation of 96 dims (2 multiplies + 1 add each: 3 * 96); the 32 pass-through dims cost nothing more
FLOPS_PER_HEAD = 2 * HEAD_DIM + 3 + 2 * HEAD_DIM + 3 * ROT


def flops(shape: Shape) -> int:
    """2 (q and k) x rows x heads x (2*128 + 3 + 2*128 + 3*96) = 803 per head (counting rule: rsi.contract)."""
    return 2 * shape.dims["rows"] * shape.dims["heads"] * FLOPS_PER_HEAD


def sample_dims(rng: random.Random, backend: str) -> dict[str, int]:
    """Heads of 128 dims: 1..4 under the interpreter; on a GPU H3's 56 heads split over W Ulysses ranks."""
    heads = rng.randint(1, 4) if backend == "interpret" else HEADS // rng.choice(ULYSSES_WORLDS)
    return {"rows": draw_rows(rng, backend), "heads": heads}


def sample_shapes(rng: random.Random, backend: str, n: int) -> list[Shape]:
    return drawn(rng, backend, n, sample_dims)


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
    flops=flops,
    noncontiguous_inputs=("qkv (q and k are strided views)",),
    special_inputs=(),
    input_names=("qkv", "wq", "wk", "rope"),
    template="qk_norm_rope",
    notes="per_rank: 14 of 56 heads after the Ulysses all-to-all on four ranks; specials reach qkv, wq, wk and "
          "rope; huge: 104,000 rows (qkv > 2**31 elements), compared with the fp64 oracle (43 GB peak on the H200)",
    term_scale=term_scale,
    n_layouts=3,
    sample_shapes=sample_shapes,
    huge_shapes=(_s("huge", 104000),),
    dims_of=dims_of,
    fake=fake,
    schema=SCHEMA,
)

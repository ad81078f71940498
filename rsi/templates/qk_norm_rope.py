"""Parametric Triton template for ``qk_norm_rope`` (searched by the offline proposer).

Per (row t, head h) of q and k, read in place from the fused qkv output (rsi/refs/qk_norm_rope.py):
  n = bf16(x * rsqrt(mean(x^2) + eps) * w)                      (128 dims, fp32 statistics)
  out[j] = bf16(n[j] cos[j] - n[j+48] sin[j]),  out[j+48] = bf16(n[j+48] cos[j] + n[j] sin[j])   (j < 48)
  out[96:128] = n[96:128]
The (row, head) pairs are flattened, p = t * NH + h, and one program takes BLOCK_P consecutive pairs of q AND k:
that is q, k and the output rows in memory order, and the rope row of t is loaded once for both (the rope loads of
one row's NH heads hit L1). Each head row is read as three contiguous segments, [0, 48), [48, 96) and [96, 128)
(the first two as masked 64-wide tiles), so the rotation partner of a dim is the same lane of the other tile: no
shuffles, no second read. Bytes: q and k read once, written once contiguous ([R, NH, 128]), plus 192 B of rope per
row.
Config: BLOCK_P (pairs per program), num_warps, EVICT (policy of the streaming q/k loads).
"""

import triton
import triton.language as tl

from rsi import kernel as K

EPS = 1e-5
HEAD_DIM = 128


@triton.jit
def _norm_rope_pairs(src_ptr, base, stride_c, w_ptr, stride_w, dst_ptr, out_base, cos, sin, pmask, eps,
                     EVICT: tl.constexpr):
    i = tl.arange(0, 64)  # rotating dims i (first half) and 48 + i (second half), i < 48
    j = tl.arange(0, 32)  # pass-through dims 96 + j
    mi = pmask[:, None] & (i[None, :] < 48)
    mj = pmask[:, None] & (j[None, :] < 32)
    row = src_ptr + base[:, None]
    x1 = tl.load(row + i[None, :] * stride_c, mask=mi, other=0.0, eviction_policy=EVICT).to(tl.float32)
    x2 = tl.load(row + (48 + i[None, :]) * stride_c, mask=mi, other=0.0, eviction_policy=EVICT).to(tl.float32)
    x3 = tl.load(row + (96 + j[None, :]) * stride_c, mask=mj, other=0.0, eviction_policy=EVICT).to(tl.float32)
    ss = tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1) + tl.sum(x3 * x3, axis=1)
    rstd = tl.rsqrt(ss / 128.0 + eps)[:, None]  # [BLOCK_P, 1]
    w1 = tl.load(w_ptr + i * stride_w, mask=i < 48, other=0.0, eviction_policy="evict_last").to(tl.float32)
    w2 = tl.load(w_ptr + (48 + i) * stride_w, mask=i < 48, other=0.0, eviction_policy="evict_last").to(tl.float32)
    w3 = tl.load(w_ptr + (96 + j) * stride_w, eviction_policy="evict_last").to(tl.float32)
    n1 = (x1 * rstd * w1[None, :]).to(tl.bfloat16).to(tl.float32)
    n2 = (x2 * rstd * w2[None, :]).to(tl.bfloat16).to(tl.float32)
    n3 = (x3 * rstd * w3[None, :]).to(tl.bfloat16)
    o1 = n1 * cos - n2 * sin
    o2 = n2 * cos + n1 * sin
    out = dst_ptr + out_base[:, None]
    tl.store(out + i[None, :], o1.to(tl.bfloat16), mask=mi)
    tl.store(out + 48 + i[None, :], o2.to(tl.bfloat16), mask=mi)
    tl.store(out + 96 + j[None, :], n3, mask=mj)


@triton.jit
def _qk_norm_rope_kernel(qkv_ptr, wq_ptr, wk_ptr, rope_ptr, q_out_ptr, k_out_ptr, n_pairs, n_heads, k_off, eps,
                         stride_r, stride_c, stride_wq, stride_wk, stride_rope_r, stride_rope_c,
                         BLOCK_P: tl.constexpr, EVICT: tl.constexpr):
    p = tl.program_id(0).to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)
    pmask = p < n_pairs
    t = p // n_heads
    h = p - t * n_heads
    i = tl.arange(0, 64)
    mi = pmask[:, None] & (i[None, :] < 48)
    rope = rope_ptr + t[:, None] * stride_rope_r
    cos = tl.load(rope + i[None, :] * stride_rope_c, mask=mi, other=0.0).to(tl.float32)
    sin = tl.load(rope + (48 + i[None, :]) * stride_rope_c, mask=mi, other=0.0).to(tl.float32)
    base = t * stride_r + h * (128 * stride_c)  # [BLOCK_P] element offset of head h of row t
    out_base = p * 128  # outputs are contiguous [R, NH, 128]
    _norm_rope_pairs(qkv_ptr, base, stride_c, wq_ptr, stride_wq, q_out_ptr, out_base, cos, sin, pmask, eps, EVICT)
    _norm_rope_pairs(qkv_ptr, base + k_off, stride_c, wk_ptr, stride_wk, k_out_ptr, out_base, cos, sin, pmask, eps,
                     EVICT)


def launch(qkv, wq, wk, rope, BLOCK_P=16, num_warps=4, EVICT="evict_first"):
    n_rows = qkv.shape[0]
    n_heads = qkv.shape[1] // (3 * HEAD_DIM)
    q_out = K.empty((n_rows, n_heads, HEAD_DIM), dtype=qkv.dtype, device=qkv.device)
    k_out = K.empty((n_rows, n_heads, HEAD_DIM), dtype=qkv.dtype, device=qkv.device)
    n_pairs = n_rows * n_heads
    grid = (triton.cdiv(n_pairs, BLOCK_P),)
    _qk_norm_rope_kernel[grid](qkv, wq, wk, rope, q_out, k_out, n_pairs, n_heads,
                               n_heads * HEAD_DIM * qkv.stride(1), EPS,
                               qkv.stride(0), qkv.stride(1), wq.stride(0), wk.stride(0), rope.stride(0),
                               rope.stride(1), BLOCK_P=BLOCK_P, EVICT=EVICT, num_warps=num_warps)
    return q_out, k_out

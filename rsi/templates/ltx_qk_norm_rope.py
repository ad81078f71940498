"""Parametric Triton template for ``ltx_qk_norm_rope`` (searched by the offline proposer).

Per row of q and of k (rsi/refs/ltx_qk_norm_rope.py; D = heads * head_dim, the norm spans all heads):
  n = bf16(x * rsqrt(mean(x^2) + eps) * w)                    (fp32 statistics, one rounding: aten::_fused_rms_norm)
  out = bf16(n * cos + rot(n) * sin),  rot(n)[2i] = -n[2i+1],  rot(n)[2i+1] = n[2i]      (interleaved RoPE, fp32)
A program takes ROWS rows of q AND k: the cos/sin rows (fp32, the larger half of the bytes) are read once for both,
and q, k, their outputs and the table rows are visited in memory order. Each row is one block of
BLOCK_D = next_power_of_2(D) columns (4096 video, 2048 audio), held in registers between the reduction and the
rotation: q and k are read once. PAIR selects how the partner value is formed: 0 reshapes the normalized row to
[ROWS, BLOCK_D / 2, 2], splits it into its even and odd lanes and joins (-odd, even) back (registers only); 1 loads
the row a second time at the partner's address (col ^ 1, the same cache lines: an L1 hit) and normalizes it again.
Config: ROWS, num_warps, PAIR, EVICT (policy of the streaming q/k loads).
"""

import triton
import triton.language as tl

from rsi import kernel as K

EPS = 1e-6


@triton.jit
def _norm_rope(src_ptr, stride_r, stride_c, w_ptr, stride_w, dst_ptr, rows64, m, cos, sin, n_cols, eps,
               BLOCK_D: tl.constexpr, ROWS: tl.constexpr, PAIR: tl.constexpr, EVICT: tl.constexpr):
    cols = tl.arange(0, BLOCK_D)
    cm = cols < n_cols
    row = src_ptr + rows64[:, None] * stride_r
    x = tl.load(row + cols[None, :] * stride_c, mask=m, other=0.0, eviction_policy=EVICT).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)[:, None]  # [ROWS, 1]
    w = tl.load(w_ptr + cols * stride_w, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
    n = (x * rstd * w[None, :]).to(tl.bfloat16).to(tl.float32)
    if PAIR == 0:
        ev, od = tl.split(tl.reshape(n, (ROWS, BLOCK_D // 2, 2)))
        rot = tl.reshape(tl.join(-od, ev), (ROWS, BLOCK_D))
    else:
        odd = cols % 2
        pc = cols + 1 - 2 * odd  # the partner column (col ^ 1)
        xp = tl.load(row + pc[None, :] * stride_c, mask=m, other=0.0).to(tl.float32)
        wp = tl.load(w_ptr + pc * stride_w, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
        np_ = (xp * rstd * wp[None, :]).to(tl.bfloat16).to(tl.float32)
        rot = tl.where((odd == 0)[None, :], -np_, np_)
    out = n * cos + rot * sin
    tl.store(dst_ptr + rows64[:, None] * n_cols + cols[None, :], out.to(tl.bfloat16), mask=m)


@triton.jit
def _ltx_qk_norm_rope_kernel(q_ptr, k_ptr, wq_ptr, wk_ptr, cos_ptr, sin_ptr, qo_ptr, ko_ptr, n_rows, n_cols, eps,
                             stride_qr, stride_qc, stride_kr, stride_kc, stride_wq, stride_wk, stride_cr, stride_cc,
                             stride_sr, stride_scol, BLOCK_D: tl.constexpr, ROWS: tl.constexpr,
                             PAIR: tl.constexpr, EVICT: tl.constexpr):
    rows64 = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    m = (rows64 < n_rows)[:, None] & (cols < n_cols)[None, :]
    cos = tl.load(cos_ptr + rows64[:, None] * stride_cr + cols[None, :] * stride_cc, mask=m, other=0.0,
                  eviction_policy=EVICT)
    sin = tl.load(sin_ptr + rows64[:, None] * stride_sr + cols[None, :] * stride_scol, mask=m, other=0.0,
                  eviction_policy=EVICT)
    _norm_rope(q_ptr, stride_qr, stride_qc, wq_ptr, stride_wq, qo_ptr, rows64, m, cos, sin, n_cols, eps, BLOCK_D,
               ROWS, PAIR, EVICT)
    _norm_rope(k_ptr, stride_kr, stride_kc, wk_ptr, stride_wk, ko_ptr, rows64, m, cos, sin, n_cols, eps, BLOCK_D,
               ROWS, PAIR, EVICT)


def launch(q, k, wq, wk, cos, sin, ROWS=1, num_warps=8, PAIR=0, EVICT="evict_first"):
    n_rows, n_cols = q.shape
    q_out = K.empty((n_rows, n_cols), dtype=q.dtype, device=q.device)
    k_out = K.empty((n_rows, n_cols), dtype=k.dtype, device=k.device)
    grid = (triton.cdiv(n_rows, ROWS),)
    _ltx_qk_norm_rope_kernel[grid](q, k, wq, wk, cos, sin, q_out, k_out, n_rows, n_cols, EPS,
                                   q.stride(0), q.stride(1), k.stride(0), k.stride(1), wq.stride(0), wk.stride(0),
                                   cos.stride(0), cos.stride(1), sin.stride(0), sin.stride(1),
                                   BLOCK_D=triton.next_power_of_2(n_cols), ROWS=ROWS, PAIR=PAIR, EVICT=EVICT,
                                   num_warps=num_warps)
    return q_out, k_out

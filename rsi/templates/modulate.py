"""Parametric Triton template for ``modulate`` (searched by the offline proposer).

h[r] = bf16(n[r] * (1 + scale[idx[r]]) + shift[idx[r]]),  n = bf16(x * rsqrt(mean(x^2) + eps) * w)
for x: [R, H] bf16, w: [H], shift/scale: [T, H] strided views of the AdaLN table, idx: [R] (rsi/refs/modulate.py).

A program owns SEQ groups of ROWS whole rows and keeps a group in registers: x is read once, h written once
(4*R*H bytes; w and the few table rows are L2 hits, loaded ``evict_last`` after the reduction). The row is covered
by a main block of BLOCK_H columns plus a tail block of BLOCK_T columns (Triton blocks are powers of two: H3's
5376 = 4096 + 2048 keeps 87.5% of lanes busy, one 8192 block 66%; BLOCK_T = 0 means no tail). With SEQ > 1 the
next group's x load is issued before the current group's reduction, so DRAM latency overlaps the row's
reduce/affine/store instead of following it (a hand-written two-stage pipeline). Statistics in fp32, the
normalized value rounded to bf16 as the model does, the affine in fp32 (one fma) rounded once.
STREAM = 1 loads x with ``.cg`` (L2 only, so the streamed rows do not displace w and the table rows from L1) and
stores h with ``.cs`` (streaming).
Config: BLOCK_H, BLOCK_T, ROWS, SEQ, num_warps, EVICT (policy of the streaming x load), STREAM.
"""

import triton
import triton.language as tl

from rsi import kernel as K

EPS = 1e-5


@triton.jit
def _load_rows(x_ptr, idx_ptr, rows, n_rows, n_cols, stride_xr, stride_xc, stride_idx,
               BLOCK_H: tl.constexpr, TAIL: tl.constexpr, EVICT: tl.constexpr, XMOD: tl.constexpr):
    rmask = rows < n_rows
    rows64 = rows.to(tl.int64)
    t64 = tl.load(idx_ptr + rows64 * stride_idx, mask=rmask, other=0).to(tl.int64)  # [ROWS] table row
    cols_a = tl.arange(0, BLOCK_H)
    cols_b = BLOCK_H + tl.arange(0, TAIL)  # TAIL = max(BLOCK_T, 1): a masked-off dummy column without a tail
    ma = rmask[:, None] & (cols_a[None, :] < n_cols)
    mb = rmask[:, None] & (cols_b[None, :] < n_cols)
    base = x_ptr + rows64[:, None] * stride_xr
    xa = tl.load(base + cols_a[None, :] * stride_xc, mask=ma, other=0.0, eviction_policy=EVICT, cache_modifier=XMOD)
    xb = tl.load(base + cols_b[None, :] * stride_xc, mask=mb, other=0.0, eviction_policy=EVICT, cache_modifier=XMOD)
    return xa, xb, t64, rows64


@triton.jit
def _finish(x, rstd, t64, rows64, rmask, cols, n_cols, w_ptr, shift_ptr, scale_ptr, out_ptr, stride_w, stride_shr,
            stride_shc, stride_scr, stride_scc, stride_or, SMOD: tl.constexpr):
    m = rmask[:, None] & (cols[None, :] < n_cols)
    w = tl.load(w_ptr + cols * stride_w, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
    sc = tl.load(scale_ptr + t64[:, None] * stride_scr + cols[None, :] * stride_scc, mask=m, other=0.0,
                 eviction_policy="evict_last")
    sh = tl.load(shift_ptr + t64[:, None] * stride_shr + cols[None, :] * stride_shc, mask=m, other=0.0,
                 eviction_policy="evict_last")
    n = (x * rstd[:, None] * w.to(tl.float32)[None, :]).to(tl.bfloat16).to(tl.float32)
    h = n * (1.0 + sc.to(tl.float32)) + sh.to(tl.float32)
    tl.store(out_ptr + rows64[:, None] * stride_or + cols[None, :], h.to(tl.bfloat16), mask=m, cache_modifier=SMOD)


@triton.jit
def _modulate_kernel(x_ptr, w_ptr, shift_ptr, scale_ptr, idx_ptr, out_ptr, n_rows, n_cols, eps,
                     stride_xr, stride_xc, stride_w, stride_shr, stride_shc, stride_scr, stride_scc, stride_idx,
                     stride_or, BLOCK_H: tl.constexpr, TAIL: tl.constexpr, ROWS: tl.constexpr, SEQ: tl.constexpr,
                     EVICT: tl.constexpr, XMOD: tl.constexpr, SMOD: tl.constexpr):
    row0 = tl.program_id(0) * (ROWS * SEQ)
    cols_a = tl.arange(0, BLOCK_H)
    cols_b = BLOCK_H + tl.arange(0, TAIL)
    rows = row0 + tl.arange(0, ROWS)
    xa_n, xb_n, t64_n, rows64_n = _load_rows(x_ptr, idx_ptr, rows, n_rows, n_cols, stride_xr, stride_xc,
                                             stride_idx, BLOCK_H, TAIL, EVICT, XMOD)
    for k in tl.static_range(SEQ):
        xa = xa_n.to(tl.float32)
        xb = xb_n.to(tl.float32)
        t64 = t64_n
        rows64 = rows64_n
        rmask = rows64 < n_rows
        if k + 1 < SEQ:  # issue the next group's loads before this group's reduction
            rows = row0 + (k + 1) * ROWS + tl.arange(0, ROWS)
            xa_n, xb_n, t64_n, rows64_n = _load_rows(x_ptr, idx_ptr, rows, n_rows, n_cols, stride_xr, stride_xc,
                                                     stride_idx, BLOCK_H, TAIL, EVICT, XMOD)
        ss = tl.sum(xa * xa, axis=1) + tl.sum(xb * xb, axis=1)
        rstd = tl.rsqrt(ss / n_cols + eps)  # [ROWS]
        _finish(xa, rstd, t64, rows64, rmask, cols_a, n_cols, w_ptr, shift_ptr, scale_ptr, out_ptr, stride_w,
                stride_shr, stride_shc, stride_scr, stride_scc, stride_or, SMOD)
        _finish(xb, rstd, t64, rows64, rmask, cols_b, n_cols, w_ptr, shift_ptr, scale_ptr, out_ptr, stride_w,
                stride_shr, stride_shc, stride_scr, stride_scc, stride_or, SMOD)


def launch(x, w, shift, scale, idx, BLOCK_H=4096, BLOCK_T=2048, ROWS=1, SEQ=1, num_warps=4, EVICT="",
           STREAM=0):
    n_rows, n_cols = x.shape
    if n_cols > BLOCK_H + BLOCK_T:
        raise ValueError(f"row of {n_cols} columns does not fit BLOCK_H + BLOCK_T = {BLOCK_H + BLOCK_T}")
    out = K.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(n_rows, ROWS * SEQ),)
    _modulate_kernel[grid](x, w, shift, scale, idx, out, n_rows, n_cols, EPS,
                           x.stride(0), x.stride(1), w.stride(0), shift.stride(0), shift.stride(1),
                           scale.stride(0), scale.stride(1), idx.stride(0), out.stride(0),
                           BLOCK_H=BLOCK_H, TAIL=max(BLOCK_T, 1), ROWS=ROWS, SEQ=SEQ, EVICT=EVICT,
                           XMOD=".cg" if STREAM else "", SMOD=".cs" if STREAM else "",
                           num_warps=num_warps)
    return out

"""Parametric Triton template for ``gate_residual_modulate`` (searched by the offline proposer).

r = bf16(res + bf16(gate[idx] * branch));  h = bf16(n * (1 + scale[idx]) + shift[idx]),
n = bf16(r * rsqrt(mean(r^2) + eps) * w)       (rsi/refs/gate_residual_modulate.py, H3 block steps 3-4)

A program owns SEQ groups of ROWS whole rows and keeps a group in registers: res and branch are read once, r and h
written once (8*R*H bytes; w and the few table rows are L2 hits, loaded ``evict_last``). r is computed in the
model's eager order (product rounded to bf16, then the add rounded), so the residual stream carries exactly the
reference's bits and the norm's statistics (fp32) see the same r. The row is covered by BLOCK_H columns plus a
BLOCK_T tail (5376 = 4096 + 2048, or 8192 masked with BLOCK_T = 0). With SEQ > 1 the next group's res/branch loads
are issued before the current group's reduction (a hand-written two-stage pipeline).
STREAM = 1 loads res/branch with ``.cg`` (L2 only, keeping gate/w/table rows in L1) and stores r and h with ``.cs``.
Config: BLOCK_H, BLOCK_T, ROWS, SEQ, num_warps, EVICT (policy of the streaming res/branch loads), STREAM.
"""

import triton
import triton.language as tl

from rsi import kernel as K

EPS = 1e-5


@triton.jit
def _load_piece(res_ptr, branch_ptr, gate_ptr, rows64, t64, m, cols, stride_rr, stride_rc, stride_br, stride_bc,
                stride_gr, stride_gc, EVICT: tl.constexpr, XMOD: tl.constexpr):
    res = tl.load(res_ptr + rows64[:, None] * stride_rr + cols[None, :] * stride_rc, mask=m, other=0.0,
                  eviction_policy=EVICT, cache_modifier=XMOD)
    br = tl.load(branch_ptr + rows64[:, None] * stride_br + cols[None, :] * stride_bc, mask=m, other=0.0,
                 eviction_policy=EVICT, cache_modifier=XMOD)
    g = tl.load(gate_ptr + t64[:, None] * stride_gr + cols[None, :] * stride_gc, mask=m, other=0.0,
                eviction_policy="evict_last")
    return res, br, g


@triton.jit
def _residual(res, br, g, m, rows64, cols, r_ptr, stride_or, SMOD: tl.constexpr):
    gb = (g.to(tl.float32) * br.to(tl.float32)).to(tl.bfloat16)  # eager rounds the gated branch before the add
    r = (res.to(tl.float32) + gb.to(tl.float32)).to(tl.bfloat16)
    tl.store(r_ptr + rows64[:, None] * stride_or + cols[None, :], r, mask=m, cache_modifier=SMOD)
    return r.to(tl.float32)


@triton.jit
def _finish(x, m, rstd, t64, rows64, cols, n_cols, w_ptr, shift_ptr, scale_ptr, out_ptr, stride_w, stride_shr,
            stride_shc, stride_scr, stride_scc, stride_or, SMOD: tl.constexpr):
    w = tl.load(w_ptr + cols * stride_w, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
    sc = tl.load(scale_ptr + t64[:, None] * stride_scr + cols[None, :] * stride_scc, mask=m, other=0.0,
                 eviction_policy="evict_last")
    sh = tl.load(shift_ptr + t64[:, None] * stride_shr + cols[None, :] * stride_shc, mask=m, other=0.0,
                 eviction_policy="evict_last")
    n = (x * rstd[:, None] * w.to(tl.float32)[None, :]).to(tl.bfloat16).to(tl.float32)
    h = n * (1.0 + sc.to(tl.float32)) + sh.to(tl.float32)
    tl.store(out_ptr + rows64[:, None] * stride_or + cols[None, :], h.to(tl.bfloat16), mask=m, cache_modifier=SMOD)


@triton.jit
def _gate_residual_modulate_kernel(res_ptr, gate_ptr, branch_ptr, w_ptr, shift_ptr, scale_ptr, idx_ptr,
                                   r_ptr, h_ptr, n_rows, n_cols, eps,
                                   stride_rr, stride_rc, stride_gr, stride_gc, stride_br, stride_bc, stride_w,
                                   stride_shr, stride_shc, stride_scr, stride_scc, stride_idx, stride_or,
                                   BLOCK_H: tl.constexpr, TAIL: tl.constexpr, ROWS: tl.constexpr,
                                   SEQ: tl.constexpr, EVICT: tl.constexpr, XMOD: tl.constexpr,
                                   SMOD: tl.constexpr):
    row0 = tl.program_id(0) * (ROWS * SEQ)
    cols_a = tl.arange(0, BLOCK_H)
    cols_b = BLOCK_H + tl.arange(0, TAIL)  # TAIL = max(BLOCK_T, 1): a masked-off dummy column without a tail
    rows = row0 + tl.arange(0, ROWS)
    rmask = rows < n_rows
    rows64_n = rows.to(tl.int64)
    t64_n = tl.load(idx_ptr + rows64_n * stride_idx, mask=rmask, other=0).to(tl.int64)  # [ROWS] table row
    ma_n = rmask[:, None] & (cols_a[None, :] < n_cols)
    mb_n = rmask[:, None] & (cols_b[None, :] < n_cols)
    ra_n, ba_n, ga_n = _load_piece(res_ptr, branch_ptr, gate_ptr, rows64_n, t64_n, ma_n, cols_a, stride_rr,
                                   stride_rc, stride_br, stride_bc, stride_gr, stride_gc, EVICT, XMOD)
    rb_n, bb_n, gb_n = _load_piece(res_ptr, branch_ptr, gate_ptr, rows64_n, t64_n, mb_n, cols_b, stride_rr,
                                   stride_rc, stride_br, stride_bc, stride_gr, stride_gc, EVICT, XMOD)
    for k in tl.static_range(SEQ):
        rows64, t64, ma, mb = rows64_n, t64_n, ma_n, mb_n
        xa = _residual(ra_n, ba_n, ga_n, ma, rows64, cols_a, r_ptr, stride_or, SMOD)
        xb = _residual(rb_n, bb_n, gb_n, mb, rows64, cols_b, r_ptr, stride_or, SMOD)
        if k + 1 < SEQ:  # issue the next group's loads before this group's reduction
            rows = row0 + (k + 1) * ROWS + tl.arange(0, ROWS)
            rmask = rows < n_rows
            rows64_n = rows.to(tl.int64)
            t64_n = tl.load(idx_ptr + rows64_n * stride_idx, mask=rmask, other=0).to(tl.int64)
            ma_n = rmask[:, None] & (cols_a[None, :] < n_cols)
            mb_n = rmask[:, None] & (cols_b[None, :] < n_cols)
            ra_n, ba_n, ga_n = _load_piece(res_ptr, branch_ptr, gate_ptr, rows64_n, t64_n, ma_n, cols_a, stride_rr,
                                           stride_rc, stride_br, stride_bc, stride_gr, stride_gc, EVICT, XMOD)
            rb_n, bb_n, gb_n = _load_piece(res_ptr, branch_ptr, gate_ptr, rows64_n, t64_n, mb_n, cols_b, stride_rr,
                                           stride_rc, stride_br, stride_bc, stride_gr, stride_gc, EVICT, XMOD)
        ss = tl.sum(xa * xa, axis=1) + tl.sum(xb * xb, axis=1)
        rstd = tl.rsqrt(ss / n_cols + eps)  # [ROWS]
        _finish(xa, ma, rstd, t64, rows64, cols_a, n_cols, w_ptr, shift_ptr, scale_ptr, h_ptr, stride_w,
                stride_shr, stride_shc, stride_scr, stride_scc, stride_or, SMOD)
        _finish(xb, mb, rstd, t64, rows64, cols_b, n_cols, w_ptr, shift_ptr, scale_ptr, h_ptr, stride_w,
                stride_shr, stride_shc, stride_scr, stride_scc, stride_or, SMOD)


def launch(res, gate, branch, w, shift, scale, idx, BLOCK_H=4096, BLOCK_T=2048, ROWS=1, SEQ=1, num_warps=4,
           EVICT="", STREAM=0):
    n_rows, n_cols = res.shape
    if n_cols > BLOCK_H + BLOCK_T:
        raise ValueError(f"row of {n_cols} columns does not fit BLOCK_H + BLOCK_T = {BLOCK_H + BLOCK_T}")
    r = K.empty((n_rows, n_cols), dtype=res.dtype, device=res.device)
    h = K.empty((n_rows, n_cols), dtype=res.dtype, device=res.device)
    grid = (triton.cdiv(n_rows, ROWS * SEQ),)
    _gate_residual_modulate_kernel[grid](
        res, gate, branch, w, shift, scale, idx, r, h, n_rows, n_cols, EPS,
        res.stride(0), res.stride(1), gate.stride(0), gate.stride(1), branch.stride(0), branch.stride(1),
        w.stride(0), shift.stride(0), shift.stride(1), scale.stride(0), scale.stride(1), idx.stride(0), r.stride(0),
        BLOCK_H=BLOCK_H, TAIL=max(BLOCK_T, 1), ROWS=ROWS, SEQ=SEQ, EVICT=EVICT,
        XMOD=".cg" if STREAM else "", SMOD=".cs" if STREAM else "", num_warps=num_warps)
    return r, h

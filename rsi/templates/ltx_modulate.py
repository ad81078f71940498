"""Parametric Triton template for ``ltx_modulate`` (searched by the offline proposer).

h = bf16(bf16(n * bf16(1 + scale)) + shift),  n = bf16(x * rsqrt(mean(x^2) + eps))     (rsi/refs/ltx_modulate.py)
for x: [R, D] bf16, scale/shift: [D] bf16 (rows of the ada table, any element stride).

Every rounding after the statistics is diffusers' eager bf16 order: n rounded to bf16, 1 + scale rounded, the
product rounded, the sum rounded (a cast between two operations also keeps the compiler from fusing them into one
fma). Only the fp32 sum of squares (reduction order) and rsqrt can differ from torch in the last bits.
A program owns SEQ groups of ROWS whole rows and keeps a group in registers: x is read once and h written once
(4*R*D bytes; scale/shift are L2/L1 hits, loaded ``evict_last`` after the reduction). The row is one block of
BLOCK_D = next_power_of_2(D) columns (4096 and 2048 for LTX-2's video and audio streams: no idle lanes). With
SEQ > 1 the next group's x load is issued before the current group's reduction (a two-stage pipeline).
STREAM = 1 loads x with ``.cg`` (L2 only, keeping scale/shift in L1) and stores h with ``.cs``.
Config: ROWS, SEQ, num_warps, EVICT (policy of the streaming x load), STREAM.
"""

import triton
import triton.language as tl

from rsi import kernel as K

EPS = 1e-6


@triton.jit
def _load_rows(x_ptr, rows, n_rows, n_cols, stride_xr, stride_xc, BLOCK_D: tl.constexpr, EVICT: tl.constexpr,
               XMOD: tl.constexpr):
    cols = tl.arange(0, BLOCK_D)
    m = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64[:, None] * stride_xr + cols[None, :] * stride_xc, mask=m, other=0.0,
                eviction_policy=EVICT, cache_modifier=XMOD)
    return x, m, rows64


@triton.jit
def _modulate_rows(x, m, rows64, n_cols, eps, scale_ptr, shift_ptr, stride_sc, stride_sh, out_ptr, stride_or,
                   BLOCK_D: tl.constexpr, SMOD: tl.constexpr):
    xf = x.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(xf * xf, axis=1) / n_cols + eps)  # [ROWS]
    cols = tl.arange(0, BLOCK_D)
    cm = cols < n_cols
    sc = tl.load(scale_ptr + cols * stride_sc, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
    sh = tl.load(shift_ptr + cols * stride_sh, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
    n = (xf * rstd[:, None]).to(tl.bfloat16).to(tl.float32)
    one_sc = (1.0 + sc).to(tl.bfloat16).to(tl.float32)
    p = (n * one_sc[None, :]).to(tl.bfloat16).to(tl.float32)
    h = (p + sh[None, :]).to(tl.bfloat16)
    tl.store(out_ptr + rows64[:, None] * stride_or + cols[None, :], h, mask=m, cache_modifier=SMOD)


@triton.jit
def _ltx_modulate_kernel(x_ptr, scale_ptr, shift_ptr, out_ptr, n_rows, n_cols, eps, stride_xr, stride_xc,
                         stride_sc, stride_sh, stride_or, BLOCK_D: tl.constexpr, ROWS: tl.constexpr,
                         SEQ: tl.constexpr, EVICT: tl.constexpr, XMOD: tl.constexpr, SMOD: tl.constexpr):
    row0 = tl.program_id(0) * (ROWS * SEQ)
    rows = row0 + tl.arange(0, ROWS)
    x_n, m_n, rows64_n = _load_rows(x_ptr, rows, n_rows, n_cols, stride_xr, stride_xc, BLOCK_D, EVICT, XMOD)
    for k in tl.static_range(SEQ):
        x, m, rows64 = x_n, m_n, rows64_n
        if k + 1 < SEQ:  # issue the next group's load before this group's reduction
            rows = row0 + (k + 1) * ROWS + tl.arange(0, ROWS)
            x_n, m_n, rows64_n = _load_rows(x_ptr, rows, n_rows, n_cols, stride_xr, stride_xc, BLOCK_D, EVICT,
                                            XMOD)
        _modulate_rows(x, m, rows64, n_cols, eps, scale_ptr, shift_ptr, stride_sc, stride_sh, out_ptr, stride_or,
                       BLOCK_D, SMOD)


def launch(x, scale, shift, ROWS=1, SEQ=1, num_warps=4, EVICT="", STREAM=0):
    n_rows, n_cols = x.shape
    out = K.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(n_rows, ROWS * SEQ),)
    _ltx_modulate_kernel[grid](x, scale, shift, out, n_rows, n_cols, EPS, x.stride(0), x.stride(1),
                               scale.stride(-1), shift.stride(-1), out.stride(0),
                               BLOCK_D=triton.next_power_of_2(n_cols), ROWS=ROWS, SEQ=SEQ, EVICT=EVICT,
                               XMOD=".cg" if STREAM else "", SMOD=".cs" if STREAM else "", num_warps=num_warps)
    return out

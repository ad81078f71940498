"""Parametric Triton template for ``ltx_gate_residual_modulate`` (searched by the offline proposer).

x' = bf16(x + bf16(branch * gate));  h = bf16(bf16(n * bf16(1 + scale)) + shift),  n = bf16(x' * rsqrt(mean(x'^2)
+ eps))       (rsi/refs/ltx_gate_residual_modulate.py; gate/scale/shift: [D] bf16 rows of the ada table)

Every rounding is diffusers' eager bf16 order: the gated branch rounded, the residual sum rounded (x' carries the
reference's exact bits), n rounded, 1 + scale, the product and the sum each rounded. Only the fp32 sum of squares
(reduction order) and rsqrt can differ from torch in the last bits.
A program owns SEQ groups of ROWS whole rows and keeps a group in registers: x and branch are read once, x' and h
written once (8*R*D bytes; gate/scale/shift are L2/L1 hits, loaded ``evict_last``). The row is one block of
BLOCK_D = next_power_of_2(D) columns (4096 video, 2048 audio). With SEQ > 1 the next group's x/branch loads are
issued before the current group's reduction (a two-stage pipeline).
STREAM = 1 loads x/branch with ``.cg`` (L2 only, keeping the table rows in L1) and stores x' and h with ``.cs``.
Config: ROWS, SEQ, num_warps, EVICT (policy of the streaming x/branch loads), STREAM.
"""

import triton
import triton.language as tl

from rsi import kernel as K

EPS = 1e-6


@triton.jit
def _load_rows(x_ptr, br_ptr, rows, n_rows, n_cols, stride_xr, stride_xc, stride_br, stride_bc,
               BLOCK_D: tl.constexpr, EVICT: tl.constexpr, XMOD: tl.constexpr):
    cols = tl.arange(0, BLOCK_D)
    m = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64[:, None] * stride_xr + cols[None, :] * stride_xc, mask=m, other=0.0,
                eviction_policy=EVICT, cache_modifier=XMOD)
    br = tl.load(br_ptr + rows64[:, None] * stride_br + cols[None, :] * stride_bc, mask=m, other=0.0,
                 eviction_policy=EVICT, cache_modifier=XMOD)
    return x, br, m, rows64


@triton.jit
def _rows(x, br, m, rows64, n_cols, eps, gate_ptr, scale_ptr, shift_ptr, stride_g, stride_sc, stride_sh, r_ptr,
          h_ptr, stride_or, BLOCK_D: tl.constexpr, SMOD: tl.constexpr):
    cols = tl.arange(0, BLOCK_D)
    cm = cols < n_cols
    g = tl.load(gate_ptr + cols * stride_g, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
    gb = (br.to(tl.float32) * g[None, :]).to(tl.bfloat16)        # eager rounds the gated branch before the add
    r = (x.to(tl.float32) + gb.to(tl.float32)).to(tl.bfloat16)
    out = rows64[:, None] * stride_or + cols[None, :]
    tl.store(r_ptr + out, r, mask=m, cache_modifier=SMOD)
    rf = r.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(rf * rf, axis=1) / n_cols + eps)  # [ROWS]
    sc = tl.load(scale_ptr + cols * stride_sc, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
    sh = tl.load(shift_ptr + cols * stride_sh, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
    n = (rf * rstd[:, None]).to(tl.bfloat16).to(tl.float32)
    one_sc = (1.0 + sc).to(tl.bfloat16).to(tl.float32)
    p = (n * one_sc[None, :]).to(tl.bfloat16).to(tl.float32)
    tl.store(h_ptr + out, (p + sh[None, :]).to(tl.bfloat16), mask=m, cache_modifier=SMOD)


@triton.jit
def _ltx_gate_residual_modulate_kernel(x_ptr, br_ptr, gate_ptr, scale_ptr, shift_ptr, r_ptr, h_ptr, n_rows, n_cols,
                                       eps, stride_xr, stride_xc, stride_br, stride_bc, stride_g, stride_sc,
                                       stride_sh, stride_or, BLOCK_D: tl.constexpr, ROWS: tl.constexpr,
                                       SEQ: tl.constexpr, EVICT: tl.constexpr, XMOD: tl.constexpr,
                                       SMOD: tl.constexpr):
    row0 = tl.program_id(0) * (ROWS * SEQ)
    rows = row0 + tl.arange(0, ROWS)
    x_n, br_n, m_n, rows64_n = _load_rows(x_ptr, br_ptr, rows, n_rows, n_cols, stride_xr, stride_xc, stride_br,
                                          stride_bc, BLOCK_D, EVICT, XMOD)
    for k in tl.static_range(SEQ):
        x, br, m, rows64 = x_n, br_n, m_n, rows64_n
        if k + 1 < SEQ:  # issue the next group's loads before this group's reduction
            rows = row0 + (k + 1) * ROWS + tl.arange(0, ROWS)
            x_n, br_n, m_n, rows64_n = _load_rows(x_ptr, br_ptr, rows, n_rows, n_cols, stride_xr, stride_xc,
                                                  stride_br, stride_bc, BLOCK_D, EVICT, XMOD)
        _rows(x, br, m, rows64, n_cols, eps, gate_ptr, scale_ptr, shift_ptr, stride_g, stride_sc, stride_sh, r_ptr,
              h_ptr, stride_or, BLOCK_D, SMOD)


def launch(x, branch, gate, scale, shift, ROWS=1, SEQ=1, num_warps=4, EVICT="", STREAM=0):
    n_rows, n_cols = x.shape
    r = K.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    h = K.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(n_rows, ROWS * SEQ),)
    _ltx_gate_residual_modulate_kernel[grid](
        x, branch, gate, scale, shift, r, h, n_rows, n_cols, EPS, x.stride(0), x.stride(1), branch.stride(0),
        branch.stride(1), gate.stride(-1), scale.stride(-1), shift.stride(-1), r.stride(0),
        BLOCK_D=triton.next_power_of_2(n_cols), ROWS=ROWS, SEQ=SEQ, EVICT=EVICT, XMOD=".cg" if STREAM else "",
        SMOD=".cs" if STREAM else "", num_warps=num_warps)
    return r, h

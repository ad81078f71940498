"""Parametric Triton template for ``swiglu`` (searched by the offline proposer).

out[r, j] = bf16(bf16(silu(x[r, j])) * x[r, F + j]) for x: [R, 2F] bf16 (fc1 output, [gate | up]).
silu is evaluated in fp32 as g / (1 + exp(-g)) and rounded to bf16 before the product, as the model's eager code
rounds it (H3_SPEC.md section 5).
Config:
  FLAT      1: each program covers BLOCK_F consecutive *output* elements of the flattened [R, F] (row/col from
            index math, F a compile-time constant), walking memory linearly like Inductor's pointwise kernels;
            0: each program covers a ROWS x BLOCK_F tile; programs enumerate column blocks fastest.
  BLOCK_F   elements (FLAT) or columns (tile) per program; ROWS rows per tile; num_warps; EVICT eviction policy.
"""

import triton
import triton.language as tl

from rsi import kernel as K


@triton.jit
def _silu_mul(g, u):
    g = g.to(tl.float32)
    s = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32)
    return (s * u.to(tl.float32)).to(tl.bfloat16)


@triton.jit
def _swiglu_tile_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_x, stride_out,
                        BLOCK_F: tl.constexpr, ROWS: tl.constexpr, EVICT: tl.constexpr):
    pid = tl.program_id(0)
    n_cb = tl.cdiv(n_cols, BLOCK_F)
    pid_r = pid // n_cb
    pid_c = pid % n_cb
    rows = pid_r * ROWS + tl.arange(0, ROWS)
    cols = pid_c * BLOCK_F + tl.arange(0, BLOCK_F)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    row_off = rows[:, None].to(tl.int64)
    g_ptrs = x_ptr + row_off * stride_x + cols[None, :]
    g = tl.load(g_ptrs, mask=mask, other=0.0, eviction_policy=EVICT)
    u = tl.load(g_ptrs + n_cols, mask=mask, other=0.0, eviction_policy=EVICT)
    tl.store(out_ptr + row_off * stride_out + cols[None, :], _silu_mul(g, u), mask=mask)


@triton.jit
def _swiglu_flat_kernel(x_ptr, out_ptr, n_elem, stride_x, stride_out, N_COLS: tl.constexpr,
                        BLOCK_F: tl.constexpr, EVICT: tl.constexpr, IDX64: tl.constexpr):
    if IDX64:
        offs = tl.program_id(0).to(tl.int64) * BLOCK_F + tl.arange(0, BLOCK_F)
    else:  # 32-bit index math (cheaper div/mod by the constant F) whenever every offset fits
        offs = tl.program_id(0) * BLOCK_F + tl.arange(0, BLOCK_F)
    mask = offs < n_elem
    row = offs // N_COLS
    col = offs % N_COLS
    g_ptrs = x_ptr + row * stride_x + col
    g = tl.load(g_ptrs, mask=mask, other=0.0, eviction_policy=EVICT)
    u = tl.load(g_ptrs + N_COLS, mask=mask, other=0.0, eviction_policy=EVICT)
    tl.store(out_ptr + row * stride_out + col, _silu_mul(g, u), mask=mask)


def launch(x, BLOCK_F=1024, ROWS=1, num_warps=4, EVICT="", FLAT=0):
    n_rows = x.shape[0]
    n_cols = x.shape[1] // 2
    out = K.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if FLAT:
        n_elem = n_rows * n_cols
        _swiglu_flat_kernel[(triton.cdiv(n_elem, BLOCK_F),)](
            x, out, n_elem, x.stride(0), out.stride(0), N_COLS=n_cols, BLOCK_F=BLOCK_F, EVICT=EVICT,
            IDX64=x.numel() + BLOCK_F >= 2**31 - 1, num_warps=num_warps)
    else:
        grid = (triton.cdiv(n_rows, ROWS) * triton.cdiv(n_cols, BLOCK_F),)
        _swiglu_tile_kernel[grid](x, out, n_rows, n_cols, x.stride(0), out.stride(0),
                                  BLOCK_F=BLOCK_F, ROWS=ROWS, EVICT=EVICT, num_warps=num_warps)
    return out

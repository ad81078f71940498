"""Parametric Triton template for ``gelu_tanh`` (searched by the offline proposer).

out = bf16(0.5 * x * (1 + tanh(u))),  u = sqrt(2 / pi) * (x + 0.044715 * x^3)      (rsi/refs/gelu_tanh.py)
evaluated in fp32 as ``x / (1 + exp(-2u))`` (0.5 (1 + tanh u) is the logistic function of 2u: no cancellation
where x is very negative, one exp); x: [R, F] bf16, any row stride.
Config:
  FLAT      1: each program covers BLOCK_F consecutive elements of the flattened [R, F] (row/col from index math,
            F a compile-time constant), walking memory linearly like Inductor's pointwise kernels; 0: each program
            covers a ROWS x BLOCK_F tile, column blocks fastest.
  BLOCK_F   elements (FLAT) or columns (tile) per program; ROWS rows per tile; num_warps; EVICT eviction policy.
"""

import triton
import triton.language as tl

from rsi import kernel as K


@triton.jit
def _gelu(x):
    # sqrt(2 / pi) and 0.044715 as literals: a @jit function may read module globals only when they are
    # tl.constexpr (the GPU compiler refuses plain floats; the interpreter does not check)
    x = x.to(tl.float32)
    u = 0.7978845608028654 * (x + 0.044715 * (x * x * x))
    return (x / (1.0 + tl.exp(-2.0 * u))).to(tl.bfloat16)


@triton.jit
def _gelu_tile_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_x, stride_out,
                      BLOCK_F: tl.constexpr, ROWS: tl.constexpr, EVICT: tl.constexpr):
    pid = tl.program_id(0)
    n_cb = tl.cdiv(n_cols, BLOCK_F)
    rows = (pid // n_cb) * ROWS + tl.arange(0, ROWS)
    cols = (pid % n_cb) * BLOCK_F + tl.arange(0, BLOCK_F)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    row_off = rows[:, None].to(tl.int64)
    x = tl.load(x_ptr + row_off * stride_x + cols[None, :], mask=mask, other=0.0, eviction_policy=EVICT)
    tl.store(out_ptr + row_off * stride_out + cols[None, :], _gelu(x), mask=mask)


@triton.jit
def _gelu_flat_kernel(x_ptr, out_ptr, n_elem, stride_x, stride_out, N_COLS: tl.constexpr, BLOCK_F: tl.constexpr,
                      EVICT: tl.constexpr, IDX64: tl.constexpr):
    if IDX64:
        offs = tl.program_id(0).to(tl.int64) * BLOCK_F + tl.arange(0, BLOCK_F)
    else:  # 32-bit index math (cheaper div/mod by the constant F) whenever every offset fits
        offs = tl.program_id(0) * BLOCK_F + tl.arange(0, BLOCK_F)
    mask = offs < n_elem
    row = offs // N_COLS
    col = offs % N_COLS
    x = tl.load(x_ptr + row * stride_x + col, mask=mask, other=0.0, eviction_policy=EVICT)
    tl.store(out_ptr + row * stride_out + col, _gelu(x), mask=mask)


def launch(x, BLOCK_F=2048, ROWS=1, num_warps=8, EVICT="", FLAT=0):
    n_rows, n_cols = x.shape
    out = K.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if FLAT:
        n_elem = n_rows * n_cols
        _gelu_flat_kernel[(triton.cdiv(n_elem, BLOCK_F),)](
            x, out, n_elem, x.stride(0), out.stride(0), N_COLS=n_cols, BLOCK_F=BLOCK_F, EVICT=EVICT,
            IDX64=x.shape[0] * x.stride(0) + BLOCK_F >= 2**31 - 1, num_warps=num_warps)
    else:
        grid = (triton.cdiv(n_rows, ROWS) * triton.cdiv(n_cols, BLOCK_F),)
        _gelu_tile_kernel[grid](x, out, n_rows, n_cols, x.stride(0), out.stride(0),
                                BLOCK_F=BLOCK_F, ROWS=ROWS, EVICT=EVICT, num_warps=num_warps)
    return out

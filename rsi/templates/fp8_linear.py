"""Parametric Triton template for ``fp8_linear`` (searched by the offline proposer).

out = bf16(x_scale[r] * (w_scale[n] * sum_k x8[r, k] w8[n, k])) with x8, x_scale the per-row e4m3 quantisation of
the bf16 activation x [R, K] (scale = amax / 448, rsi/refs/fp8_common.py) and w8 [N, K] e4m3, w_scale [N] fp32
the offline per-channel weight (rsi/refs/fp8_linear.py).

A candidate may allocate only its output, so there is no workspace for x8 or the row scales. Three launches, in
stream order:

1. ``_amax_kernel``, grid (cdiv(R, AMAX_ROWS),): each program reduces |x| over K for AMAX_ROWS rows on the bf16 bit
   patterns with the sign cleared (int16: NaN > +Inf > every finite value, so a row holding a NaN or Inf gets a
   non-finite amax) and writes the amax, itself a bf16 value, into column 0 of the output (``out[r, 0]``).
2. ``_gemm_kernel`` over the column blocks 1.. of the output: a program reads its BLOCK_M rows' amax from column 0,
   forms the row scales (amax / 448 with ``div_rn``; 1 for a zero row, NaN for a non-finite one), and per K step
   loads the bf16 x tile, quantises it in registers (RCP = 1: ``x * (448 / amax)``, with rows below 2**-64 lifted by
   2**64 first so the reciprocal stays finite; it can differ from the reference's IEEE quotient in the last bit;
   RCP = 0: ``div_rn(x, scale)``, the reference's bits) to e4m3 (``cvt.rn.satfinite``: nearest even, saturating at
   448), loads the e4m3 weight tile as [BLOCK_K, BLOCK_N] (K-major: the B operand Hopper's fp8 wgmma takes) and
   accumulates ``tl.dot`` in fp32 (PREC = 1: the fp8 accumulator is promoted to fp32 every BLOCK_K products,
   ``max_num_imprecise_acc = BLOCK_K``; PREC = 0: Triton's sm_90 default, the tensor core's reduced-precision fp8
   accumulation over all of K, what cuBLAS calls fast accumulation). Epilogue: ``x_scale * (w_scale * acc)`` in
   fp32, rounded to bf16 once.
3. The same kernel over column block 0 only: each program reads its rows' amax before it overwrites them
   (``tl.debug_barrier`` between the read and the K loop), and no other program of that launch touches those rows.

Grouped ordering (GROUP_M row blocks share the column sweep, for L2 reuse of the weight and x tiles); PERSIST > 0
launches min(tiles, PERSIST) programs that loop over the tiles (132 = the H200's SMs). x is read through its two
strides, w8 through its row stride and w_scale through its element stride, offsets 64-bit. The x tile is quantised
once per (row block, column block): a column sweep re-quantises it N / BLOCK_N times (cvt throughput, not DRAM, is
the cost; the x tiles come from L2). No TMA descriptors: the x tile is quantised in registers after its load, so a
TMA copy into shared memory would be read back first (fp8_gemm_tma uses device-side descriptors on operands that are
already e4m3; rsi.kernel provides their scratch).
Config: BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, RCP, PREC, PERSIST.
"""

import triton
import triton.language as tl

from rsi import kernel as K

AMAX_ROWS = 4
AMAX_COLS = 256
E4M3_MAX = tl.constexpr(448.0)
NONFINITE_BITS = tl.constexpr(0x7F80)    # bf16 bits of +Inf: |x| bits at or above it are Inf or NaN
NAN_BITS = tl.constexpr(0x7FC00000)      # the fp32 NaN the reference's scale holds
TINY = tl.constexpr(2.0 ** -64)
HUGE = tl.constexpr(2.0 ** 64)


@triton.jit
def _amax_kernel(x_ptr, o_ptr, n_rows, n_k, stride_xr, stride_xk, stride_or,
                 ROWS: tl.constexpr, COLS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows < n_rows
    rows64 = rows.to(tl.int64)
    cols = tl.arange(0, COLS)
    best = tl.zeros((ROWS, COLS), tl.int16)
    for k0 in range(0, n_k, COLS):
        kk = k0 + cols
        m = rmask[:, None] & (kk[None, :] < n_k)
        x = tl.load(x_ptr + rows64[:, None] * stride_xr + kk.to(tl.int64)[None, :] * stride_xk, mask=m, other=0.0)
        best = tl.maximum(best, x.to(tl.int16, bitcast=True) & 0x7FFF)
    amax = tl.max(best, 1).to(tl.int16)        # tl.max widens int16 to int32
    tl.store(o_ptr + rows64 * stride_or, amax.to(tl.bfloat16, bitcast=True), mask=rmask)


@triton.jit
def _row_scales(o_ptr, rows64, rmask, stride_or):
    """(scale, prelift, inv) of the rows from the amax bits in column 0 of the output."""
    bits = tl.load(o_ptr + rows64 * stride_or, mask=rmask, other=0.0).to(tl.int16, bitcast=True).to(tl.int32)
    bad = bits >= NONFINITE_BITS
    amax = tl.where(bad, 0, bits).to(tl.int16).to(tl.bfloat16, bitcast=True).to(tl.float32)
    nan = tl.full(amax.shape, NAN_BITS, tl.int32).to(tl.float32, bitcast=True)
    zero = amax == 0.0
    scale = tl.where(bad, nan, tl.where(zero, 1.0, tl.div_rn(amax, E4M3_MAX)))
    lift = tl.where(amax < TINY, HUGE, 1.0)
    inv = tl.where(zero, 1.0, tl.div_rn(E4M3_MAX, tl.where(zero, 1.0, amax) * lift))
    return scale, lift, inv


@triton.jit
def _tile(x_ptr, w_ptr, ws_ptr, o_ptr, pid_m, pid_n, n_rows, n_cols, n_k, stride_xr, stride_xk, stride_wn,
          stride_wk, stride_ws, stride_or, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
          RCP: tl.constexpr, PREC: tl.constexpr):
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rmask = rows < n_rows
    cmask = cols < n_cols
    rows64 = rows.to(tl.int64)
    cols64 = cols.to(tl.int64)
    scale, lift, inv = _row_scales(o_ptr, rows64, rmask, stride_or)
    tl.debug_barrier()                         # every thread has read the amax before any output is stored
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, n_k, BLOCK_K):
        kk = (k0 + ks).to(tl.int64)
        kmask = kk < n_k
        x = tl.load(x_ptr + rows64[:, None] * stride_xr + kk[None, :] * stride_xk,
                    mask=rmask[:, None] & kmask[None, :], other=0.0).to(tl.float32)
        if RCP:
            q = (x * lift[:, None]) * inv[:, None]
        else:
            q = tl.div_rn(x, scale[:, None])
        a8 = q.to(tl.float8e4nv)
        b8 = tl.load(w_ptr + cols64[None, :] * stride_wn + kk[:, None] * stride_wk,
                     mask=kmask[:, None] & cmask[None, :], other=0.0)
        if PREC:
            acc = tl.dot(a8, b8, acc, max_num_imprecise_acc=BLOCK_K)
        else:
            acc = tl.dot(a8, b8, acc)
    ws = tl.load(ws_ptr + cols64 * stride_ws, mask=cmask, other=0.0)
    out = scale[:, None] * (ws[None, :] * acc)
    tl.store(o_ptr + rows64[:, None] * stride_or + cols64[None, :], out.to(tl.bfloat16),
             mask=rmask[:, None] & cmask[None, :])


@triton.jit
def _gemm_kernel(x_ptr, w_ptr, ws_ptr, o_ptr, n_rows, n_cols, n_k, stride_xr, stride_xk, stride_wn, stride_wk,
                 stride_ws, stride_or, col_block0, n_col_blocks, n_tiles,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                 RCP: tl.constexpr, PREC: tl.constexpr, PERSIST: tl.constexpr):
    n_row_blocks = tl.cdiv(n_rows, BLOCK_M)
    per_group = GROUP_M * n_col_blocks
    if PERSIST:
        start = tl.program_id(0)
        step = tl.num_programs(0)
    else:
        start = tl.program_id(0)
        step = n_tiles
    for t in range(start, n_tiles, step):
        group = t // per_group
        first_m = group * GROUP_M
        group_m = tl.minimum(n_row_blocks - first_m, GROUP_M)
        pid_m = first_m + (t % per_group) % group_m
        pid_n = col_block0 + (t % per_group) // group_m
        _tile(x_ptr, w_ptr, ws_ptr, o_ptr, pid_m, pid_n, n_rows, n_cols, n_k, stride_xr, stride_xk, stride_wn,
              stride_wk, stride_ws, stride_or, BLOCK_M, BLOCK_N, BLOCK_K, RCP, PREC)


def _gemm(x, w8, w_scale, out, col_block0, n_col_blocks, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps,
          num_stages, RCP, PREC, PERSIST):
    n_rows, n_k = x.shape
    n_cols = w8.shape[0]
    n_tiles = triton.cdiv(n_rows, BLOCK_M) * n_col_blocks
    grid = (min(n_tiles, PERSIST) if PERSIST else n_tiles,)
    _gemm_kernel[grid](x, w8, w_scale, out, n_rows, n_cols, n_k, x.stride(0), x.stride(1), w8.stride(0),
                       w8.stride(1), w_scale.stride(0), out.stride(0), col_block0, n_col_blocks, n_tiles,
                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, RCP=RCP, PREC=PREC,
                       PERSIST=PERSIST, num_warps=num_warps, num_stages=num_stages)


def launch(x, w8, w_scale, BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=3, RCP=1,
           PREC=1, PERSIST=0):
    n_rows, n_k = x.shape
    n_cols = w8.shape[0]
    out = K.empty((n_rows, n_cols), dtype=K.bfloat16, device=x.device)
    if n_rows == 0 or n_cols == 0:
        return out
    _amax_kernel[(triton.cdiv(n_rows, AMAX_ROWS),)](x, out, n_rows, n_k, x.stride(0), x.stride(1), out.stride(0),
                                                    ROWS=AMAX_ROWS, COLS=AMAX_COLS, num_warps=4)
    n_col_blocks = triton.cdiv(n_cols, BLOCK_N)
    if n_col_blocks > 1:
        _gemm(x, w8, w_scale, out, 1, n_col_blocks - 1, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages,
              RCP, PREC, PERSIST)
    _gemm(x, w8, w_scale, out, 0, 1, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, RCP, PREC, PERSIST)
    return out

"""Parametric Triton template for ``fp8_gemm`` with TMA loads (searched by the offline proposer; the op group's
second template, beside the CuTe DSL one).

out = bf16(x_scale[r] * (w_scale[n] * sum_k x8[r, k] w8[n, k])) (rsi/refs/fp8_gemm.py): x8 [R, K] and w8 [N, K]
e4m3 with unit column strides, the row and column scales fp32.

The operand tiles come through device-side TMA descriptors (``tl.make_tensor_descriptor`` over x8 [R, K] and w8
[N, K]; Triton writes the descriptors into a global scratch that ``rsi.kernel`` provides, fresh each launch): the
hardware copies [BLOCK_M, BLOCK_K] and [BLOCK_N, BLOCK_K] tiles into swizzled shared memory, zero-filled past the
tensor's edges, and ``tl.dot`` runs Hopper's e4m3 wgmma on them (w8's tile transposed as a view: K-major B, what the
fp8 wgmma takes). Accumulation in fp32: PREC = 1 promotes the tensor core's fp8 accumulator to fp32 every BLOCK_K
products (``max_num_imprecise_acc = BLOCK_K``, fp8_linear's PREC 1); PREC = 0 leaves Triton's sm_90 default, the
reduced-precision fp8 accumulation over all of K (cuBLAS's fast accumulation, which fp8_gemm's bounds admit). The
epilogue multiplies by the row and column scales in fp32 and rounds to bf16 once, stored with masks (no TMA store:
the output's row stride need not be a multiple of 16 bytes at every shape).

A persistent grid (PERSIST > 0: min(tiles, PERSIST) programs, 132 = the H200's SMs) walks the tiles in grouped order
(GROUP_M row tiles share a column sweep, for L2 reuse); PERSIST = 0 launches one program a tile. FLATTEN = 1 asks
Triton to flatten the tile loop and the K loop into one pipelined loop (``tl.range(..., flatten=True)``), so that the
next tile's loads are in flight during a tile's epilogue (on sm_90 it compiles to different code, with 32 KiB more
shared memory at 128 x 256 x 128 x 4 stages). No warp
specialisation: Triton 3.6's ``tl.range(..., warp_specialize=True)`` compiles to the same PTX as without it for sm_90
(checked on the CPU, docs/kernels.md), so the software pipeline (num_stages) is what overlaps loads and MMAs.
TMA needs 16-byte aligned bases and row strides: launch checks the storage offsets and row strides on the tensors'
metadata (the element size is one byte) and refuses other layouts with a clear error; the storage itself is taken to
be 16-byte aligned, as every torch CUDA allocation is (a candidate cannot read a pointer). ALIGN is that 16, a
launch parameter because a shape may be compared only with 0, 1, -1 or the config (rsi/harness/static.py rule 4).
Config: BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, PERSIST, PREC, FLATTEN.
"""

import triton
import triton.language as tl

from rsi import kernel as K


@triton.jit
def _tile(t, n_m, n_n, GROUP_M: tl.constexpr):
    """(row tile, column tile) of tile t in grouped order."""
    width = GROUP_M * n_n
    first_m = (t // width) * GROUP_M
    rows_in_group = tl.minimum(n_m - first_m, GROUP_M)
    return first_m + (t % width) % rows_in_group, (t % width) // rows_in_group


@triton.jit
def _gemm_tile(xd, wd, xs_ptr, ws_ptr, o_ptr, pid_m, pid_n, n_rows, n_cols, n_k, stride_or,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PREC: tl.constexpr):
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, n_k, BLOCK_K):
        a = tl.load_tensor_descriptor(xd, [pid_m * BLOCK_M, k0])
        b = tl.load_tensor_descriptor(wd, [pid_n * BLOCK_N, k0])
        if PREC:
            acc = tl.dot(a, b.T, acc, max_num_imprecise_acc=BLOCK_K)
        else:
            acc = tl.dot(a, b.T, acc)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rmask = rows < n_rows
    cmask = cols < n_cols
    xs = tl.load(xs_ptr + rows, mask=rmask, other=0.0)
    ws = tl.load(ws_ptr + cols, mask=cmask, other=0.0)
    out = (xs[:, None] * (ws[None, :] * acc)).to(tl.bfloat16)
    tl.store(o_ptr + rows.to(tl.int64)[:, None] * stride_or + cols[None, :], out,
             mask=rmask[:, None] & cmask[None, :])


@triton.jit
def _fp8_gemm_tma_kernel(x_ptr, xs_ptr, w_ptr, ws_ptr, o_ptr, n_rows, n_cols, n_k, stride_xr, stride_wr, stride_or,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                         PERSIST: tl.constexpr, PREC: tl.constexpr, FLATTEN: tl.constexpr):
    xd = tl.make_tensor_descriptor(x_ptr, shape=[n_rows, n_k], strides=[stride_xr, 1],
                                   block_shape=[BLOCK_M, BLOCK_K])
    wd = tl.make_tensor_descriptor(w_ptr, shape=[n_cols, n_k], strides=[stride_wr, 1],
                                   block_shape=[BLOCK_N, BLOCK_K])
    n_m = tl.cdiv(n_rows, BLOCK_M)
    n_n = tl.cdiv(n_cols, BLOCK_N)
    if PERSIST > 0:
        for t in tl.range(tl.program_id(0), n_m * n_n, tl.num_programs(0), flatten=FLATTEN):
            pid_m, pid_n = _tile(t, n_m, n_n, GROUP_M)
            _gemm_tile(xd, wd, xs_ptr, ws_ptr, o_ptr, pid_m, pid_n, n_rows, n_cols, n_k, stride_or, BLOCK_M,
                       BLOCK_N, BLOCK_K, PREC)
    else:
        pid_m, pid_n = _tile(tl.program_id(0), n_m, n_n, GROUP_M)
        _gemm_tile(xd, wd, xs_ptr, ws_ptr, o_ptr, pid_m, pid_n, n_rows, n_cols, n_k, stride_or, BLOCK_M, BLOCK_N,
                   BLOCK_K, PREC)


def launch(x8, x_scale, w8, w_scale, BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=4,
           PERSIST=132, PREC=1, FLATTEN=0, ALIGN=16):
    n_rows, n_k = x8.shape
    n_cols = w8.shape[0]
    if w8.shape[1] != n_k or x_scale.shape[0] != n_rows or w_scale.shape[0] != n_cols:
        raise ValueError("x8 [R, K], x_scale [R], w8 [N, K], w_scale [N]: the sizes do not match")
    if x8.stride(1) != 1 or w8.stride(1) != 1 or x_scale.stride(0) != 1 or w_scale.stride(0) != 1:
        raise ValueError("x8 and w8 need unit column strides and the scales unit strides")
    if x8.stride(0) % ALIGN != 0 or w8.stride(0) % ALIGN != 0 or x8.storage_offset() % ALIGN != 0 \
            or w8.storage_offset() % ALIGN != 0:
        raise ValueError("TMA needs x8 and w8 at 16-byte aligned offsets with row strides of a multiple of 16 bytes")
    out = K.empty((n_rows, n_cols), dtype=K.bfloat16, device=x8.device)
    if n_rows * n_cols == 0:
        return out
    if n_k == 0:
        raise ValueError("K = 0 is not supported (TMA needs rows of 16 bytes)")
    tiles = triton.cdiv(n_rows, BLOCK_M) * triton.cdiv(n_cols, BLOCK_N)
    grid = (min(tiles, PERSIST) if PERSIST else tiles,)
    _fp8_gemm_tma_kernel[grid](x8, x_scale, w8, w_scale, out, n_rows, n_cols, n_k, x8.stride(0), w8.stride(0),
                               out.stride(0), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
                               PERSIST=PERSIST, PREC=PREC, FLATTEN=FLATTEN, num_warps=num_warps,
                               num_stages=num_stages)
    return out

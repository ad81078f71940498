"""Parametric Triton template for ``swiglu_fp8`` (searched by the offline proposer).

h = bf16(silu_c(gate) * up), silu_c(g) = bf16(fp32(g / (1 + exp(-g)))) evaluated in fp64, for x [R, 2F] bf16 =
[gate | up]; then h8 = e4m3(h / h_scale), h_scale = max |h row| / 448 (rsi/refs/swiglu_fp8.py,
rsi/refs/fp8_common.py: 1 for a zero row; NaN and bytes 0x7F for a row holding NaN/Inf).

The row's amax is needed before any of its values can be quantised and there is no workspace, so a program holds
ROWS whole rows of h in registers (bf16) as up to three pieces of BLOCK_A, BLOCK_B and BLOCK_C columns (a piece of
0 columns is absent; H3's F = 14336 = 8192 + 4096 + 2048 exactly). Each piece: load gate and up (one contiguous
run each, through the row stride), silu in fp64 (``tl.exp`` of an fp64 value is libdevice's ``__nv_exp`` on the
GPU, numpy's under the interpreter; the division is IEEE in fp64), rounded to fp32 then bf16, times up in fp32,
rounded to bf16. Then the amax on the bf16 bit patterns with the sign cleared (int16: NaN > Inf > every finite
value; exact), ``div_rn(amax, 448)``, and per piece ``div_rn(h, scale)`` converted with ``cvt.rn.satfinite``.
Config: BLOCK_A, BLOCK_B, BLOCK_C, ROWS, num_warps, EVICT (policy of the x loads).
"""

import triton
import triton.language as tl

from rsi import kernel as K

E4M3_MAX = tl.constexpr(448.0)
NONFINITE_BITS = tl.constexpr(0x7F80)    # bf16 bits of +Inf: |h| bits at or above it are Inf or NaN
NAN_BITS = tl.constexpr(0x7FC00000)      # the fp32 NaN of a non-finite row's scale
NAN_BYTE = tl.constexpr(0x7F)            # e4m3fn's NaN


@triton.jit
def _row_scale(abits):
    """(scale, bad) per row from the largest |h| bit pattern of each row (int32)."""
    bad = abits >= NONFINITE_BITS
    amax = tl.where(bad, 0, abits).to(tl.int16).to(tl.bfloat16, bitcast=True).to(tl.float32)
    nan = tl.full(amax.shape, NAN_BITS, tl.int32).to(tl.float32, bitcast=True)
    scale = tl.where(bad, nan, tl.where(amax == 0.0, 1.0, tl.div_rn(amax, E4M3_MAX)))
    return scale, bad


@triton.jit
def _quantise(hf, scale, bad):
    """e4m3 bytes of hf / scale (IEEE quotient, RNE saturating), NaN bytes where bad (all broadcast to hf)."""
    q = tl.div_rn(hf, scale).to(tl.float8e4nv).to(tl.uint8, bitcast=True)
    return tl.where(bad, NAN_BYTE, q).to(tl.uint8).to(tl.float8e4nv, bitcast=True)


@triton.jit
def _piece(x_ptr, rows64, rmask, n_cols, stride_x, OFF: tl.constexpr, BLOCK: tl.constexpr, EVICT: tl.constexpr):
    """h (bf16) of columns [OFF, OFF + BLOCK) of ROWS rows, and their largest |h| bit pattern per row."""
    cols = OFF + tl.arange(0, BLOCK)
    m = rmask[:, None] & (cols[None, :] < n_cols)
    ptrs = x_ptr + rows64[:, None] * stride_x + cols[None, :]
    g = tl.load(ptrs, mask=m, other=0.0, eviction_policy=EVICT)
    u = tl.load(ptrs + n_cols, mask=m, other=0.0, eviction_policy=EVICT)
    g64 = g.to(tl.float32).to(tl.float64)
    s = (g64 / (1.0 + tl.exp(-g64))).to(tl.float32).to(tl.bfloat16).to(tl.float32)
    h = (s * u.to(tl.float32)).to(tl.bfloat16)
    return h, tl.max(h.to(tl.int16, bitcast=True) & 0x7FFF, 1)


@triton.jit
def _put(q_ptr, h, scale, bad, rows64, rmask, n_cols, OFF: tl.constexpr, BLOCK: tl.constexpr):
    cols = OFF + tl.arange(0, BLOCK)
    m = rmask[:, None] & (cols[None, :] < n_cols)
    q = _quantise(h.to(tl.float32), scale[:, None], bad[:, None])
    tl.store(q_ptr + rows64[:, None] * n_cols + cols[None, :], q, mask=m)


@triton.jit
def _swiglu_fp8_kernel(x_ptr, q_ptr, s_ptr, n_rows, n_cols, stride_x, BLOCK_A: tl.constexpr,
                       BLOCK_B: tl.constexpr, BLOCK_C: tl.constexpr, ROWS: tl.constexpr, EVICT: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows < n_rows
    rows64 = rows.to(tl.int64)
    ha, abits = _piece(x_ptr, rows64, rmask, n_cols, stride_x, 0, BLOCK_A, EVICT)
    if BLOCK_B > 0:
        hb, bb = _piece(x_ptr, rows64, rmask, n_cols, stride_x, BLOCK_A, BLOCK_B, EVICT)
        abits = tl.maximum(abits, bb)
    if BLOCK_C > 0:
        hc, bc = _piece(x_ptr, rows64, rmask, n_cols, stride_x, BLOCK_A + BLOCK_B, BLOCK_C, EVICT)
        abits = tl.maximum(abits, bc)
    scale, bad = _row_scale(abits)
    _put(q_ptr, ha, scale, bad, rows64, rmask, n_cols, 0, BLOCK_A)
    if BLOCK_B > 0:
        _put(q_ptr, hb, scale, bad, rows64, rmask, n_cols, BLOCK_A, BLOCK_B)
    if BLOCK_C > 0:
        _put(q_ptr, hc, scale, bad, rows64, rmask, n_cols, BLOCK_A + BLOCK_B, BLOCK_C)
    tl.store(s_ptr + rows64, scale, mask=rmask)


def launch(x, BLOCK_A=8192, BLOCK_B=4096, BLOCK_C=2048, ROWS=1, num_warps=16, EVICT=""):
    n_rows = x.shape[0]
    n_cols = x.shape[1] // 2
    if n_cols > BLOCK_A + BLOCK_B + BLOCK_C:
        raise ValueError(f"row of {n_cols} columns does not fit BLOCK_A + BLOCK_B + BLOCK_C")
    h8 = K.empty((n_rows, n_cols), dtype=K.float8_e4m3fn, device=x.device)
    h_scale = K.empty((n_rows,), dtype=K.float32, device=x.device)
    _swiglu_fp8_kernel[(triton.cdiv(n_rows, ROWS),)](x, h8, h_scale, n_rows, n_cols, x.stride(0),
                                                     BLOCK_A=BLOCK_A, BLOCK_B=BLOCK_B, BLOCK_C=BLOCK_C, ROWS=ROWS,
                                                     EVICT=EVICT, num_warps=num_warps)
    return h8, h_scale

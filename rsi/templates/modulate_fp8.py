"""Parametric Triton template for ``modulate_fp8`` (searched by the offline proposer).

h = modulate_canonical(x, w, shift, scale, idx), then h8 = e4m3(h / h_scale), h_scale = max |h row| / 448
(rsi/refs/modulate_fp8.py, rsi/refs/fp8_common.py: 1 for a zero row; NaN and bytes 0x7F for a row holding
NaN/Inf). Bitwise class, so every rounding of the reference is reproduced:

* the sum of squares is the canonical pairwise tree over the row zero-padded to P = next_power_of_2(H), folding
  halves (``v[i] + v[i + n/2]`` per level): ``_fold_sum`` realizes a level as ``tl.sum`` over an axis of size 2
  (exact: a sum of two values does not depend on their order). The row is held as a piece of P/2 columns plus a
  power-of-two tail (SPLIT = 1; H3's 5376 = 4096 + 1280 of a 2048 tail), whose first level is the main piece plus
  the zero-padded tail (the tail added to the first BLOCK_B columns, +0 elsewhere), or as one piece of P
  (SPLIT = 0);
* ``rstd = div_rn(1, sqrt_rn(div_rn(ss, H) + eps))``;
* ``n = bf16(x * rstd * w)`` left to right, ``h = bf16(bf16(n * bf16(1 + scale)) + shift)``: the bf16 rounding
  between the product and the sum keeps the compiler from contracting them into an fma.

A program owns ROWS whole rows in registers (x read once); the row's amax is taken on h's bf16 bit patterns with the
sign cleared (int16: NaN > Inf > every finite value), the scale is ``div_rn(amax, 448)`` and the quotient
``div_rn(h, scale)`` converted with ``cvt.rn.satfinite`` (nearest even, saturating at 448). w, scale and shift rows
(L2 hits) are loaded ``evict_last`` after the reduction. STREAM = 1 loads x with ``.cg`` and stores h8 with ``.cs``.
QUOT 1 replaces the per-element ``div_rn`` of the quantiser by the row reciprocal and one Markstein correction
(``tl.fma``, explicit, so it survives ``enable_fp_fusion=False``; rsi/refs/fp8_quotient.py: the same byte for every
bf16 value and row scale, checked exhaustively).
Config: SPLIT, ROWS, num_warps, EVICT (policy of the x load), STREAM, QUOT.
"""

import triton
import triton.language as tl

from rsi import kernel as K

EPS = 1e-5
LOG2_MAX = 16                            # rows up to 2**16 columns
E4M3_MAX = tl.constexpr(448.0)
NONFINITE_BITS = tl.constexpr(0x7F80)    # bf16 bits of +Inf: |h| bits at or above it are Inf or NaN
NAN_BITS = tl.constexpr(0x7FC00000)      # the fp32 NaN of a non-finite row's scale
TINY_SCALE = tl.constexpr(2.0**-64)      # below it the row is lifted by 2**64 so that its reciprocal stays finite
LIFT = tl.constexpr(2.0**64)


@triton.jit
def _row_scale(abits):
    """(scale, bad) per row from the largest |h| bit pattern of each row (int32)."""
    bad = abits >= NONFINITE_BITS
    amax = tl.where(bad, 0, abits).to(tl.int16).to(tl.bfloat16, bitcast=True).to(tl.float32)
    nan = tl.full(amax.shape, NAN_BITS, tl.int32).to(tl.float32, bitcast=True)
    scale = tl.where(bad, nan, tl.where(amax == 0.0, 1.0, tl.div_rn(amax, E4M3_MAX)))
    return scale, bad


@triton.jit
def _quantise(hf, scale, bad, QUOT: tl.constexpr):
    """e4m3 bytes of hf / scale (IEEE quotient, RNE saturating), NaN (0x7F) where bad (all broadcast to hf)."""
    if QUOT:   # the row reciprocal and a Markstein correction (module docstring)
        nk = tl.where(scale < TINY_SCALE, -LIFT, -1.0)         # negated: Triton's -x is 0 - x (loses -0)
        sk = scale * -nk
        nr = tl.div_rn(tl.full(sk.shape, -1.0, tl.float32), sk)
        nhk = hf * nk
        q0 = nhk * nr
        q = tl.fma(tl.fma(q0, sk, nhk), nr, q0)
    else:
        q = tl.div_rn(hf, scale)
    nan = tl.full(q.shape, NAN_BITS, tl.int32).to(tl.float32, bitcast=True)
    return tl.where(bad, nan, q).to(tl.float8e4nv)   # selected in fp32: +NaN converts to 0x7F, e4m3fn's NaN


@triton.jit
def _fold_sum(v, ROWS: tl.constexpr, N: tl.constexpr, LOG: tl.constexpr):
    """Pairwise tree sum of v [ROWS, N] (N a power of two) folding halves, v[i] + v[i + n/2] per level -> [ROWS]."""
    for i in tl.static_range(LOG):
        if (N >> i) > 1:
            v = tl.sum(tl.reshape(v, [ROWS, 2, (N >> i) // 2]), 1)
    return tl.reshape(v, [ROWS])


@triton.jit
def _load(x_ptr, rows64, rmask, n_cols, stride_xr, stride_xc, OFF: tl.constexpr, BLOCK: tl.constexpr,
          EVICT: tl.constexpr, XMOD: tl.constexpr):
    cols = OFF + tl.arange(0, BLOCK)
    m = rmask[:, None] & (cols[None, :] < n_cols)
    return tl.load(x_ptr + rows64[:, None] * stride_xr + cols[None, :] * stride_xc, mask=m, other=0.0,
                   eviction_policy=EVICT, cache_modifier=XMOD).to(tl.float32)


@triton.jit
def _affine(x, rstd, t64, rmask, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
            stride_scr, stride_scc, OFF: tl.constexpr, BLOCK: tl.constexpr):
    """h (bf16) of columns [OFF, OFF + BLOCK) in modulate's eager roundings, and its largest |h| bits per row."""
    cols = OFF + tl.arange(0, BLOCK)
    m = rmask[:, None] & (cols[None, :] < n_cols)
    w = tl.load(w_ptr + cols * stride_w, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
    sc = tl.load(scale_ptr + t64[:, None] * stride_scr + cols[None, :] * stride_scc, mask=m, other=0.0,
                 eviction_policy="evict_last")
    sh = tl.load(shift_ptr + t64[:, None] * stride_shr + cols[None, :] * stride_shc, mask=m, other=0.0,
                 eviction_policy="evict_last")
    n = (x * rstd[:, None] * w.to(tl.float32)[None, :]).to(tl.bfloat16).to(tl.float32)
    s1 = (1.0 + sc.to(tl.float32)).to(tl.bfloat16).to(tl.float32)
    p = (n * s1).to(tl.bfloat16).to(tl.float32)
    h = (p + sh.to(tl.float32)).to(tl.bfloat16)
    h = tl.where(m, h, 0.0)
    return h, tl.max(h.to(tl.int16, bitcast=True) & 0x7FFF, 1)


@triton.jit
def _put(q_ptr, h, scale, bad, rows64, rmask, n_cols, stride_q, OFF: tl.constexpr, BLOCK: tl.constexpr,
         SMOD: tl.constexpr, QUOT: tl.constexpr):
    cols = OFF + tl.arange(0, BLOCK)
    m = rmask[:, None] & (cols[None, :] < n_cols)
    q = _quantise(h.to(tl.float32), scale[:, None], bad[:, None], QUOT)
    tl.store(q_ptr + rows64[:, None] * stride_q + cols[None, :], q, mask=m, cache_modifier=SMOD)


@triton.jit
def _modulate_fp8_kernel(x_ptr, w_ptr, shift_ptr, scale_ptr, idx_ptr, q_ptr, s_ptr, n_rows, n_cols, n_cols_f,
                         eps, stride_xr, stride_xc, stride_w, stride_shr, stride_shc, stride_scr, stride_scc,
                         stride_idx, stride_q, BLOCK_A: tl.constexpr, BLOCK_B: tl.constexpr, LOG: tl.constexpr,
                         ROWS: tl.constexpr, EVICT: tl.constexpr, XMOD: tl.constexpr, SMOD: tl.constexpr,
                         QUOT: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows < n_rows
    rows64 = rows.to(tl.int64)
    t64 = tl.load(idx_ptr + rows64 * stride_idx, mask=rmask, other=0).to(tl.int64)
    xa = _load(x_ptr, rows64, rmask, n_cols, stride_xr, stride_xc, 0, BLOCK_A, EVICT, XMOD)
    if BLOCK_B > 0:
        xb = _load(x_ptr, rows64, rmask, n_cols, stride_xr, stride_xc, BLOCK_A, BLOCK_B, EVICT, XMOD)
        # the first level over P = 2 BLOCK_A: the main piece plus the tail zero-padded to BLOCK_A
        first = (tl.arange(0, BLOCK_A // BLOCK_B) == 0)[None, :, None]
        sq = tl.reshape(xa * xa, [ROWS, BLOCK_A // BLOCK_B, BLOCK_B]) + tl.where(first, (xb * xb)[:, None, :], 0.0)
        ss = _fold_sum(tl.reshape(sq, [ROWS, BLOCK_A]), ROWS, BLOCK_A, LOG)
    else:
        ss = _fold_sum(xa * xa, ROWS, BLOCK_A, LOG)
    rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.div_rn(ss, n_cols_f) + eps))
    ha, abits = _affine(xa, rstd, t64, rmask, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr,
                        stride_shc, stride_scr, stride_scc, 0, BLOCK_A)
    if BLOCK_B > 0:
        hb, bb = _affine(xb, rstd, t64, rmask, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr,
                         stride_shc, stride_scr, stride_scc, BLOCK_A, BLOCK_B)
        abits = tl.maximum(abits, bb)
    qscale, bad = _row_scale(abits)
    _put(q_ptr, ha, qscale, bad, rows64, rmask, n_cols, stride_q, 0, BLOCK_A, SMOD, QUOT)
    if BLOCK_B > 0:
        _put(q_ptr, hb, qscale, bad, rows64, rmask, n_cols, stride_q, BLOCK_A, BLOCK_B, SMOD, QUOT)
    tl.store(s_ptr + rows64, qscale, mask=rmask)


def launch(x, w, shift, scale, idx, SPLIT=1, ROWS=1, num_warps=4, EVICT="", STREAM=1, QUOT=0):
    n_rows, n_cols = x.shape
    full = triton.next_power_of_2(n_cols)
    block_a = full // 2 if SPLIT and full > 1 else full
    block_b = triton.next_power_of_2(n_cols - block_a) if n_cols > block_a else 0
    h8 = K.empty((n_rows, n_cols), dtype=K.float8_e4m3fn, device=x.device)
    h_scale = K.empty((n_rows,), dtype=K.float32, device=x.device)
    _modulate_fp8_kernel[(triton.cdiv(n_rows, ROWS),)](
        x, w, shift, scale, idx, h8, h_scale, n_rows, n_cols, float(n_cols), EPS, x.stride(0), x.stride(1),
        w.stride(0), shift.stride(0), shift.stride(1), scale.stride(0), scale.stride(1), idx.stride(0),
        h8.stride(0), BLOCK_A=block_a, BLOCK_B=block_b, LOG=LOG2_MAX, ROWS=ROWS, EVICT=EVICT,
        XMOD=".cg" if STREAM else "", SMOD=".cs" if STREAM else "", QUOT=QUOT, num_warps=num_warps,
        enable_fp_fusion=False)  # no fma(x, x, y * y) in the sum of squares: the reference rounds x * x first
    return h8, h_scale

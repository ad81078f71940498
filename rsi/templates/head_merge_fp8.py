"""Parametric Triton template for ``head_merge_fp8`` (searched by the offline proposer).

h8[s, (w*h + j)*D + d] = e4m3(x[w, s, j, d] / h_scale[s]), h_scale[s] = max |row s| / 448 (rsi/refs/
head_merge_fp8.py, rsi/refs/fp8_common.py: 1 for a zero row; NaN and bytes 0x7F for a row holding NaN/Inf).
A program owns ROWS destination rows and holds each whole (W*h head rows of D, a [BLOCK_P, BLOCK_D] tile per row,
BLOCK_P = next_power_of_2(W*h)) in registers: the row's amax runs on the bf16 bit patterns with the sign cleared
(int16: NaN > Inf > every finite value; exact), the scale is ``div_rn(amax, 448)`` and the quotient ``div_rn(x,
scale)`` (IEEE: ``/`` would be ``div.full.f32``), converted with ``cvt.rn.satfinite`` (nearest even, saturating at
448). x is read through its four strides once; h8 and the scales are written once.
QUOT 1 replaces the per-element ``div_rn`` by the row's reciprocal and one Markstein correction (a multiplication and
two fmas; rsi/refs/fp8_quotient.py: the same byte for every bf16 value and every row scale, checked exhaustively).
Config: ROWS (destination rows per program), num_warps, EVICT (policy of the x loads), QUOT.
"""

import triton
import triton.language as tl

from rsi import kernel as K

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
def _merge_fp8_kernel(x_ptr, q_ptr, s_ptr, n_rows, heads_per_rank, n_heads, s_w, s_s, s_h, s_d,
                      D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_P: tl.constexpr, ROWS: tl.constexpr,
                      EVICT: tl.constexpr, QUOT: tl.constexpr):
    s = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)            # destination rows
    p = tl.arange(0, BLOCK_P)                                                 # head row (w, j) within a row
    d = tl.arange(0, BLOCK_D)
    w = (p // heads_per_rank).to(tl.int64)
    j = (p % heads_per_rank).to(tl.int64)
    m = (s < n_rows)[:, None, None] & (p < n_heads)[None, :, None] & (d < D)[None, None, :]
    src = (w * s_w + j * s_h)[None, :, None] + (s * s_s)[:, None, None] + (d * s_d)[None, None, :]
    x = tl.load(x_ptr + src, mask=m, other=0.0, eviction_policy=EVICT)       # [ROWS, BLOCK_P, BLOCK_D] bf16
    bits = x.to(tl.int16, bitcast=True) & 0x7FFF
    abits = tl.max(tl.max(bits, 2), 1)                                        # [ROWS]
    scale, bad = _row_scale(abits)
    q = _quantise(x.to(tl.float32), scale[:, None, None], bad[:, None, None], QUOT)
    dst = (s * (n_heads * D))[:, None, None] + (p * D)[None, :, None] + d[None, None, :]
    tl.store(q_ptr + dst, q, mask=m)
    tl.store(s_ptr + s, scale, mask=s < n_rows)


def launch(x, ROWS=1, num_warps=8, EVICT="", QUOT=0):
    world, n_rows, heads_per_rank, head_dim = x.shape
    n_heads = world * heads_per_rank
    h8 = K.empty((n_rows, n_heads * head_dim), dtype=K.float8_e4m3fn, device=x.device)
    h_scale = K.empty((n_rows,), dtype=K.float32, device=x.device)
    grid = (triton.cdiv(n_rows, ROWS),)
    _merge_fp8_kernel[grid](x, h8, h_scale, n_rows, heads_per_rank, n_heads, x.stride(0), x.stride(1),
                            x.stride(2), x.stride(3), D=head_dim, BLOCK_D=triton.next_power_of_2(head_dim),
                            BLOCK_P=triton.next_power_of_2(n_heads), ROWS=ROWS, EVICT=EVICT, QUOT=QUOT,
                            num_warps=num_warps)
    return h8, h_scale

"""Triton template for ``gate_residual_modulate_fp8``: a row as eight pieces, its canonical sum of squares inside the
warp.

r = bf16(res + bf16(gate[idx] * branch)) (stored), then modulate_fp8 of r: rsi/templates/modulate_fp8_warp.py, whose
docstring this repeats (a candidate is one module, so its helpers are repeated here too). Each piece of r is made
from its res, branch and gate columns in the eager roundings (two fp32 operations, each rounded to bf16), stored,
and kept in bf16 as the piece of x that modulate normalises. STREAM = 1 loads res and branch with ``.cg`` and stores
r and h8 with ``.cs``.

The same computation as rsi/templates/modulate_fp8.py (rsi/refs/modulate_fp8.py: the canonical pairwise tree of
the squares over the row zero-padded to a power of two, folding halves; ``rstd = div_rn(1, sqrt_rn(div_rn(ss, H) +
eps))``; modulate's eager roundings; the per-row e4m3 quantiser), laid out for the tree. A program owns one row,
held as eight 1-D pieces of PIECE = P / 8 columns (P = next_power_of_2(H), at least 8 x 256: padding the row with
more zeros adds only exact ``v + 0`` levels, so any power of two at or above H gives the same tree), piece k being
columns [k PIECE, (k + 1) PIECE). The piece index is the top three bits of a column's index, so the tree's first
three levels add whole pieces (k and k + 4, then k and k + 2, then k and k + 1; a piece wholly past H is zeros and
is left out, which is exact); the rest folds one piece, level by level, as ``tl.sum`` over an axis of size 2
(exact: a sum of two values does not depend on their order). With one warp a program (num_warps 1) a piece's
1024 columns at H3's 5376 are 8 bf16 a lane (one 16-byte load) times 4, so the first two in-piece levels are
register adds, the next five lane shuffles and the last three register adds again: no shared memory, no
barrier between warps. Pieces keep x in bf16; the squares and h are made from it piece by piece.
Then ``h = bf16(bf16(bf16(x * rstd * w) * bf16(1 + scale)) + shift)`` per piece, the row's amax on h's bf16 bit
patterns with the sign cleared (int16: NaN > Inf > every finite value), ``div_rn(amax, 448)``, and per piece the
quotient (QUOT 1: the row reciprocal and a Markstein correction, rsi/refs/fp8_quotient.py; 0: ``div_rn``)
converted with ``cvt.rn.satfinite``. Launched with ``enable_fp_fusion=False`` (no fma in the squares' sums or in
modulate's roundings). RELOAD 1 does not hold the row between its sum of squares and h: each piece of r is read again (an L2 hit) for
h, which frees the registers the pieces take (more rows in flight, more L2 traffic).
RELOAD 2 holds nothing across pieces: each piece of r is read again to make h for the row's amax, and a third
time to make h again for the bytes: fewer registers (more rows in flight), more instructions
(tests/unit/test_fp8_compile.py, docs/kernels.md).
The NFULL pieces wholly inside the row (n_cols // PIECE, set at launch) are read, made and stored without a mask.
RELOAD 4 (thirtieth session; meant for the row loop) makes r piece by piece in the order of the tree's top levels
(pieces 0 and 4, 2 and 6, 1 and 5, 3 and 7), so that only the partial sums of squares are held, then reads r back
for h once (as RELOAD 2), stores each piece of h to the program's row of a scratch buffer (``K.scratch``, bf16; the
PERSIST programs keep re-writing their rows, so that it stays in L2) and reads it back for the bytes once the amax
is known, after a barrier. The one-warp sm_90a build: 162 registers (12 programs an SM against RELOAD 1's 8), no
stack, 5,752 SASS instructions against RELOAD 1's 5,376 (TAIL 1). On an H100 (run 87 h) it is slower than RELOAD 1
at every bucket (0.67-0.75x the bf16 op against 0.90-0.96x): modulate_fp8_warp's RELOAD 4 shows why (run 87 n: the
scratch rows go back to DRAM).
MAXNREG n > 0 caps a thread's registers at n (the launch's maxnreg): at one warp and RELOAD 1 the sm_90 build holds
255 (8 programs an SM); 168 fits 12 programs and 128 16, the rest spilled to local memory (56 stack bytes
uncapped, 320 at 168, 568 at 128). Ncu (run 77) found modulate_fp8_warp's one-warp kernel waiting on its loads with
1.94 warps a scheduler: the cap trades spills for warps, and lost on an H100 (run 79 h3: 0.30-0.59x the bf16
op against 0.76-0.82x uncapped; the spills sit on the same chain).
PERSIST n > 0: min(rows, n) programs walk the rows (pid, pid + n, ...) in a loop that Triton software-pipelines over
STAGES (its num_stages), as modulate_fp8_warp's (whose unpipelined loop, STAGES 1 with 1,056 programs and RELOAD 0,
was modulate_fp8's fastest realization on the H100 and the H200: runs 79 h3 and 79). Each row's r is stored before
it is read back (RELOAD 1 and 2, behind a barrier), within the row's own iteration.
TAIL 1 makes the last piece only as wide as the row needs (TW columns: the power of two, at least 256, at or above
what is left; 256 of 1,024 at H3's 5,376, where six full pieces carry 768 zero columns); its squares are widened
with zeros before the piece-level adds, which keeps the tree. UNPACK 1 makes the squares' fp32 x from x's bits
(``bits << 16``), so that the compiler does not share it with h's conversion and hold the row's fp32 x between them.
PREFETCH 1 (with PERSIST, RELOAD 0, STAGES 1): modulate_fp8_warp's, for res and branch: the loop carries the row's
res and branch pieces, and each piece of the program's next row (the last row's own again) is loaded once the same
piece's bytes are stored, into the registers that piece's h held, so the loads are in flight while the rest of the
row is quantised.
Config: num_warps, STREAM, QUOT, RELOAD, MAXNREG, PERSIST, STAGES, TAIL, UNPACK, PREFETCH.
"""

import triton
import triton.language as tl

from rsi import kernel as K

EPS = 1e-5
LOG2_MAX = 16                            # pieces up to 2**16 columns
PIECES = 8                               # pieces a row (the tree's top three levels)
MIN_PIECE = 256                          # columns a piece at least: 32 lanes x one 16-byte bf16 vector
E4M3_MAX = tl.constexpr(448.0)
NONFINITE_BITS = tl.constexpr(0x7F80)    # bf16 bits of +Inf: |h| bits at or above it are Inf or NaN
NAN_BITS = tl.constexpr(0x7FC00000)      # the fp32 NaN of a non-finite row's scale
TINY_SCALE = tl.constexpr(2.0**-64)      # below it the row is lifted by 2**64 so that its reciprocal stays finite
LIFT = tl.constexpr(2.0**64)


@triton.jit
def _row_scale(abits):
    """(scale, bad) of the row from its largest |h| bit pattern (int32)."""
    bad = abits >= NONFINITE_BITS
    amax = tl.where(bad, 0, abits).to(tl.int16).to(tl.bfloat16, bitcast=True).to(tl.float32)
    nan = tl.full(amax.shape, NAN_BITS, tl.int32).to(tl.float32, bitcast=True)
    scale = tl.where(bad, nan, tl.where(amax == 0.0, 1.0, tl.div_rn(amax, E4M3_MAX)))
    return scale, bad


@triton.jit
def _quantise(hf, scale, nk, QUOT: tl.constexpr):
    """e4m3 bytes of hf / scale (IEEE quotient, RNE saturating) with the factor nk (QUOT 1: -1, or -2**64 for a scale
    below 2**-64, which keeps the row's reciprocal finite; negated: Triton's -x is 0 - x, which loses -0)."""
    if QUOT:   # the row reciprocal and a Markstein correction (module docstring)
        sk = scale * -nk
        nr = tl.div_rn(tl.full(sk.shape, -1.0, tl.float32), sk)
        nhk = hf * nk
        q0 = nhk * nr
        q = tl.fma(tl.fma(q0, sk, nhk), nr, q0)
    else:
        q = tl.div_rn(hf, scale)
    return q.to(tl.float8e4nv)


@triton.jit
def _sq(x, UNPACK: tl.constexpr):
    """fp32 squares of bf16 x (exact). UNPACK 1 widens x by its bits (``bits << 16``, the same value) instead of a
    conversion, which keeps the compiler from sharing it with h's ``x.to(fp32)`` (the row's fp32 x then stays live
    from the sum of squares to h, and spills)."""
    if UNPACK:
        xf = (x.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)
    else:
        xf = x.to(tl.float32)
    return xf * xf


@triton.jit
def _sqw(x, UNPACK: tl.constexpr, PIECE: tl.constexpr):
    """_sq of a piece widened to PIECE with zeros where it is narrower (the tail piece: adding a zero square is exact,
    so the tree is the one over the full-width zero-padded piece)."""
    s = _sq(x, UNPACK)
    if x.shape[0] < PIECE:
        s = tl.reshape(tl.where(tl.arange(0, PIECE // x.shape[0])[:, None] == 0, s[None, :], 0.0), [PIECE])
    return s


@triton.jit
def _fold(v, N: tl.constexpr, LOG: tl.constexpr):
    """Pairwise tree sum of v [N] (N a power of two, at most 2**LOG) folding halves, v[i] + v[i + n/2] per level
    -> a scalar."""
    for i in tl.static_range(LOG):
        if (N >> i) > 1:
            v = tl.sum(tl.reshape(v, [2, (N >> i) // 2]), 0)
    return tl.sum(v, 0)


@triton.jit
def _sum_squares(x0, x1, x2, x3, x4, x5, x6, x7, PIECE: tl.constexpr, LOG: tl.constexpr, NP: tl.constexpr,
                 UNPACK: tl.constexpr):
    """The canonical sum of squares of a row given as its eight pieces (pieces NP and on are zeros and not read;
    piece NP - 1 may be narrower): the top three levels over whole pieces, then the in-piece levels (module
    docstring)."""
    a = _sq(x0, UNPACK) + _sqw(x4, UNPACK, PIECE)   # pieces 0 + 4, then (0 + 4) + (2 + 6)
    if NP > 6:
        a = a + (_sq(x2, UNPACK) + _sqw(x6, UNPACK, PIECE))
    else:
        a = a + _sq(x2, UNPACK)
    b = _sq(x1, UNPACK)                                   # pieces 1 + 5, then (1 + 5) + (3 + 7)
    if NP > 5:
        b = b + _sqw(x5, UNPACK, PIECE)
    if NP > 7:
        b = b + (_sq(x3, UNPACK) + _sqw(x7, UNPACK, PIECE))
    else:
        b = b + _sq(x3, UNPACK)
    return _fold(a + b, PIECE, LOG)


@triton.jit
def _ss_streamed(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr, stride_gc,
                 stride_br, stride_bc, stride_rr, PIECE: tl.constexpr, LOG: tl.constexpr, NP: tl.constexpr,
                 TW: tl.constexpr, XMOD: tl.constexpr, SMOD: tl.constexpr, NFULL: tl.constexpr, UNPACK: tl.constexpr):
    """RELOAD 4: _sum_squares of the row's r made and stored piece by piece in the tree's order (0 and 4, 2 and 6,
    1 and 5, 3 and 7), so that only the partial sums are held, not the row."""
    a = _sq(_x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr, stride_gc,
               stride_br, stride_bc, stride_rr, 0, PIECE, NP, TW, XMOD, SMOD, NFULL), UNPACK)
    a = a + _sqw(_x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr,
                    stride_gc, stride_br, stride_bc, stride_rr, 4, PIECE, NP, TW, XMOD, SMOD, NFULL), UNPACK, PIECE)
    a2 = _sq(_x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr, stride_gc,
                stride_br, stride_bc, stride_rr, 2, PIECE, NP, TW, XMOD, SMOD, NFULL), UNPACK)
    if NP > 6:
        a2 = a2 + _sqw(_x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr,
                          stride_gc, stride_br, stride_bc, stride_rr, 6, PIECE, NP, TW, XMOD, SMOD, NFULL), UNPACK,
                       PIECE)
    a = a + a2
    b = _sq(_x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr, stride_gc,
               stride_br, stride_bc, stride_rr, 1, PIECE, NP, TW, XMOD, SMOD, NFULL), UNPACK)
    if NP > 5:
        b = b + _sqw(_x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr,
                        stride_gc, stride_br, stride_bc, stride_rr, 5, PIECE, NP, TW, XMOD, SMOD, NFULL), UNPACK,
                     PIECE)
    b3 = _sq(_x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr, stride_gc,
                stride_br, stride_bc, stride_rr, 3, PIECE, NP, TW, XMOD, SMOD, NFULL), UNPACK)
    if NP > 7:
        b3 = b3 + _sqw(_x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr,
                          stride_gc, stride_br, stride_bc, stride_rr, 7, PIECE, NP, TW, XMOD, SMOD, NFULL), UNPACK,
                       PIECE)
    return _fold(a + (b + b3), PIECE, LOG)


@triton.jit
def _cols(K_: tl.constexpr, PIECE: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr):
    """Column indices of piece K_: PIECE of them, TW for the last piece (NP - 1)."""
    return K_ * PIECE + tl.arange(0, TW if K_ == NP - 1 else PIECE)


@triton.jit
def _in(cols, n_cols, K_: tl.constexpr, NFULL: tl.constexpr):
    """The columns of piece K_ inside the row: all of them (a constant, no mask) for the NFULL pieces before H."""
    if K_ < NFULL:
        return tl.full(cols.shape, True, tl.int1)
    return cols < n_cols


@triton.jit
def _raw(res_ptr, branch_ptr, row, n_cols, stride_er, stride_ec, stride_br, stride_bc, K_: tl.constexpr,
         PIECE: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr, XMOD: tl.constexpr, NFULL: tl.constexpr):
    """Piece K_ of res and of branch (bf16, zeros past H)."""
    cols = _cols(K_, PIECE, NP, TW)
    m = _in(cols, n_cols, K_, NFULL)
    x = tl.load(res_ptr + row * stride_er + cols * stride_ec, mask=m, other=0.0, cache_modifier=XMOD)
    br = tl.load(branch_ptr + row * stride_br + cols * stride_bc, mask=m, other=0.0, cache_modifier=XMOD)
    return x, br


@triton.jit
def _mk(x, br, gate_ptr, r_ptr, row, t64, n_cols, stride_gr, stride_gc, stride_rr, K_: tl.constexpr,
        PIECE: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr, SMOD: tl.constexpr, NFULL: tl.constexpr):
    """Piece K_ of r = res + gate[idx] * branch in the eager roundings from its res and branch, stored to r_ptr."""
    cols = _cols(K_, PIECE, NP, TW)
    m = _in(cols, n_cols, K_, NFULL)
    g = tl.load(gate_ptr + t64 * stride_gr + cols * stride_gc, mask=m, other=0.0, eviction_policy="evict_last")
    gb = (g.to(tl.float32) * br.to(tl.float32)).to(tl.bfloat16).to(tl.float32)
    r = (x.to(tl.float32) + gb).to(tl.bfloat16)
    tl.store(r_ptr + row * stride_rr + cols, r, mask=m, cache_modifier=SMOD)
    return r


@triton.jit
def _x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr, stride_gc, stride_br,
       stride_bc, stride_rr, K_: tl.constexpr, PIECE: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr,
       XMOD: tl.constexpr, SMOD: tl.constexpr,
       NFULL: tl.constexpr):
    """Piece K_ of r = res + gate[idx] * branch in the eager roundings (bf16, zeros past H), stored to r_ptr."""
    x, br = _raw(res_ptr, branch_ptr, row, n_cols, stride_er, stride_ec, stride_br, stride_bc, K_, PIECE, NP, TW,
                 XMOD, NFULL)
    return _mk(x, br, gate_ptr, r_ptr, row, t64, n_cols, stride_gr, stride_gc, stride_rr, K_, PIECE, NP, TW, SMOD,
               NFULL)


@triton.jit
def _r(r_ptr, row, n_cols, stride_rr, K_: tl.constexpr, PIECE: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr,
       NFULL: tl.constexpr):
    """Piece K_ of r as stored (RELOAD)."""
    cols = _cols(K_, PIECE, NP, TW)
    return tl.load(r_ptr + row * stride_rr + cols, mask=_in(cols, n_cols, K_, NFULL), other=0.0)


@triton.jit
def _affine(x, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr,
            stride_scc, K_: tl.constexpr, PIECE: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr, NFULL: tl.constexpr):
    """h (bf16) of piece K_ in modulate's eager roundings, and its largest |h| bit pattern."""
    cols = _cols(K_, PIECE, NP, TW)
    m = _in(cols, n_cols, K_, NFULL)
    w = tl.load(w_ptr + cols * stride_w, mask=m, other=0.0, eviction_policy="evict_last")
    sc = tl.load(scale_ptr + t64 * stride_scr + cols * stride_scc, mask=m, other=0.0, eviction_policy="evict_last")
    sh = tl.load(shift_ptr + t64 * stride_shr + cols * stride_shc, mask=m, other=0.0, eviction_policy="evict_last")
    n = (x.to(tl.float32) * rstd * w.to(tl.float32)).to(tl.bfloat16).to(tl.float32)
    s1 = (1.0 + sc.to(tl.float32)).to(tl.bfloat16).to(tl.float32)
    p = (n * s1).to(tl.bfloat16).to(tl.float32)
    h = tl.where(m, (p + sh.to(tl.float32)).to(tl.bfloat16), 0.0)
    return h, tl.max(h.to(tl.int16, bitcast=True) & 0x7FFF, 0)


@triton.jit
def _put(q_ptr, q_off, h, scale, bad, n_cols, K_: tl.constexpr, PIECE: tl.constexpr, NP: tl.constexpr,
         TW: tl.constexpr, SMOD: tl.constexpr,
         QUOT: tl.constexpr, NFULL: tl.constexpr):
    """Piece K_'s bytes. scale and bad are the row's scalars: a non-finite row and a tiny one are branches of the
    program, not selects per element, and the common row's factor -1 is a constant, folded into the products."""
    cols = _cols(K_, PIECE, NP, TW)
    ptrs = q_ptr + q_off + cols
    m = _in(cols, n_cols, K_, NFULL)
    if bad:   # +NaN converts to 0x7F, e4m3fn's NaN
        nan = tl.full(cols.shape, NAN_BITS, tl.int32).to(tl.float32, bitcast=True)
        tl.store(ptrs, nan.to(tl.float8e4nv), mask=m, cache_modifier=SMOD)
    elif scale < TINY_SCALE:
        tl.store(ptrs, _quantise(h.to(tl.float32), scale, -LIFT, QUOT), mask=m, cache_modifier=SMOD)
    else:
        tl.store(ptrs, _quantise(h.to(tl.float32), scale, -1.0, QUOT), mask=m, cache_modifier=SMOD)


@triton.jit
def _h(x, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr, stride_scc,
       abits, K_: tl.constexpr, PIECE: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr, NFULL: tl.constexpr):
    h, b = _affine(x, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr,
                   stride_scc, K_, PIECE, NP, TW, NFULL)
    return h, tl.maximum(abits, b)


@triton.jit
def _hs(x0, x1, x2, x3, x4, x5, x6, x7, rstd, t64, r_ptr, row, n_cols, stride_rr, w_ptr, shift_ptr, scale_ptr,
        stride_w, stride_shr, stride_shc, stride_scr, stride_scc, PIECE: tl.constexpr, NP: tl.constexpr,
        TW: tl.constexpr, RELOAD: tl.constexpr, NFULL: tl.constexpr):
    """h (bf16) of every piece (RELOAD 1: r read back for it) and the row's largest |h| bit pattern; the absent
    pieces' h are h0 (never stored)."""
    if RELOAD:
        tl.debug_barrier()                      # r stored by this program's threads is read back
        x0 = _r(r_ptr, row, n_cols, stride_rr, 0, PIECE, NP, TW, NFULL)
    h0, abits = _affine(x0, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
                        stride_scr, stride_scc, 0, PIECE, NP, TW, NFULL)
    if RELOAD:
        x1 = _r(r_ptr, row, n_cols, stride_rr, 1, PIECE, NP, TW, NFULL)
    h1, abits = _h(x1, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr,
                   stride_scc, abits, 1, PIECE, NP, TW, NFULL)
    if RELOAD:
        x2 = _r(r_ptr, row, n_cols, stride_rr, 2, PIECE, NP, TW, NFULL)
    h2, abits = _h(x2, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr,
                   stride_scc, abits, 2, PIECE, NP, TW, NFULL)
    if RELOAD:
        x3 = _r(r_ptr, row, n_cols, stride_rr, 3, PIECE, NP, TW, NFULL)
    h3, abits = _h(x3, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr,
                   stride_scc, abits, 3, PIECE, NP, TW, NFULL)
    if RELOAD:
        x4 = _r(r_ptr, row, n_cols, stride_rr, 4, PIECE, NP, TW, NFULL)
    h4, abits = _h(x4, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr,
                   stride_scc, abits, 4, PIECE, NP, TW, NFULL)
    h5 = h0
    h6 = h0
    h7 = h0
    if NP > 5:
        if RELOAD:
            x5 = _r(r_ptr, row, n_cols, stride_rr, 5, PIECE, NP, TW, NFULL)
        h5, abits = _h(x5, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
                       stride_scr, stride_scc, abits, 5, PIECE, NP, TW, NFULL)
    if NP > 6:
        if RELOAD:
            x6 = _r(r_ptr, row, n_cols, stride_rr, 6, PIECE, NP, TW, NFULL)
        h6, abits = _h(x6, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
                       stride_scr, stride_scc, abits, 6, PIECE, NP, TW, NFULL)
    if NP > 7:
        if RELOAD:
            x7 = _r(r_ptr, row, n_cols, stride_rr, 7, PIECE, NP, TW, NFULL)
        h7, abits = _h(x7, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
                       stride_scr, stride_scc, abits, 7, PIECE, NP, TW, NFULL)
    return h0, h1, h2, h3, h4, h5, h6, h7, abits


@triton.jit
def _puts(q_ptr, s_ptr, row, stride_q, h0, h1, h2, h3, h4, h5, h6, h7, abits, n_cols, res_ptr, branch_ptr, nxt,
          stride_er, stride_ec, stride_br, stride_bc, PIECE: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr,
          SMOD: tl.constexpr, QUOT: tl.constexpr, NFULL: tl.constexpr, XMOD: tl.constexpr, NEXT: tl.constexpr):
    """The row's scale from its amax bits, then every piece's bytes and the scale stored. NEXT 1 (PREFETCH): after
    each piece's bytes, that piece of res and branch at row nxt is loaded (the loads stay after the stores before
    them: the pointers may alias), and the pieces are returned as (res, branch) pairs (else the h's, unused)."""
    qscale, bad = _row_scale(abits)
    qo = row * stride_q
    a0, a1, a2, a3, a4, a5, a6, a7 = h0, h1, h2, h3, h4, h5, h6, h7
    b0, b1, b2, b3, b4, b5, b6, b7 = h0, h1, h2, h3, h4, h5, h6, h7
    _put(q_ptr, qo, h0, qscale, bad, n_cols, 0, PIECE, NP, TW, SMOD, QUOT, NFULL)
    if NEXT:
        a0, b0 = _raw(res_ptr, branch_ptr, nxt, n_cols, stride_er, stride_ec, stride_br, stride_bc, 0, PIECE, NP, TW,
                      XMOD, NFULL)
    _put(q_ptr, qo, h1, qscale, bad, n_cols, 1, PIECE, NP, TW, SMOD, QUOT, NFULL)
    if NEXT:
        a1, b1 = _raw(res_ptr, branch_ptr, nxt, n_cols, stride_er, stride_ec, stride_br, stride_bc, 1, PIECE, NP, TW,
                      XMOD, NFULL)
    _put(q_ptr, qo, h2, qscale, bad, n_cols, 2, PIECE, NP, TW, SMOD, QUOT, NFULL)
    if NEXT:
        a2, b2 = _raw(res_ptr, branch_ptr, nxt, n_cols, stride_er, stride_ec, stride_br, stride_bc, 2, PIECE, NP, TW,
                      XMOD, NFULL)
    _put(q_ptr, qo, h3, qscale, bad, n_cols, 3, PIECE, NP, TW, SMOD, QUOT, NFULL)
    if NEXT:
        a3, b3 = _raw(res_ptr, branch_ptr, nxt, n_cols, stride_er, stride_ec, stride_br, stride_bc, 3, PIECE, NP, TW,
                      XMOD, NFULL)
    _put(q_ptr, qo, h4, qscale, bad, n_cols, 4, PIECE, NP, TW, SMOD, QUOT, NFULL)
    if NEXT:
        a4, b4 = _raw(res_ptr, branch_ptr, nxt, n_cols, stride_er, stride_ec, stride_br, stride_bc, 4, PIECE, NP, TW,
                      XMOD, NFULL)
    if NP > 5:
        _put(q_ptr, qo, h5, qscale, bad, n_cols, 5, PIECE, NP, TW, SMOD, QUOT, NFULL)
        if NEXT:
            a5, b5 = _raw(res_ptr, branch_ptr, nxt, n_cols, stride_er, stride_ec, stride_br, stride_bc, 5, PIECE, NP,
                          TW, XMOD, NFULL)
    if NP > 6:
        _put(q_ptr, qo, h6, qscale, bad, n_cols, 6, PIECE, NP, TW, SMOD, QUOT, NFULL)
        if NEXT:
            a6, b6 = _raw(res_ptr, branch_ptr, nxt, n_cols, stride_er, stride_ec, stride_br, stride_bc, 6, PIECE, NP,
                          TW, XMOD, NFULL)
    if NP > 7:
        _put(q_ptr, qo, h7, qscale, bad, n_cols, 7, PIECE, NP, TW, SMOD, QUOT, NFULL)
        if NEXT:
            a7, b7 = _raw(res_ptr, branch_ptr, nxt, n_cols, stride_er, stride_ec, stride_br, stride_bc, 7, PIECE, NP,
                          TW, XMOD, NFULL)
    tl.store(s_ptr + row, qscale)
    return a0, b0, a1, b1, a2, b2, a3, b3, a4, b4, a5, b5, a6, b6, a7, b7


@triton.jit
def _row(row, res_ptr, gate_ptr, branch_ptr, r_ptr, w_ptr, shift_ptr, scale_ptr, idx_ptr, q_ptr, s_ptr, n_cols,
         n_cols_f, eps, stride_er, stride_ec, stride_gr, stride_gc, stride_br, stride_bc, stride_rr, stride_w,
         stride_shr, stride_shc, stride_scr, stride_scc, stride_idx, stride_q, PIECE: tl.constexpr, LOG: tl.constexpr,
         NP: tl.constexpr, XMOD: tl.constexpr, SMOD: tl.constexpr, QUOT: tl.constexpr, RELOAD: tl.constexpr,
         NFULL: tl.constexpr, TW: tl.constexpr, UNPACK: tl.constexpr, hs_ptr, stride_hs):
    t64 = tl.load(idx_ptr + row * stride_idx).to(tl.int64)
    if RELOAD == 4:   # h made once from r read back, kept in the program's scratch row (hs) for the bytes
        ss = _ss_streamed(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr,
                          stride_gc, stride_br, stride_bc, stride_rr, PIECE, LOG, NP, TW, XMOD, SMOD, NFULL, UNPACK)
        rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.div_rn(ss, n_cols_f) + eps))
        tl.debug_barrier()                      # r stored by this program's threads is read back
        abits = tl.zeros((), tl.int32)
        ho = hs_ptr + tl.program_id(0).to(tl.int64) * stride_hs
        for k in tl.static_range(NP):
            hk, abits = _h(_r(r_ptr, row, n_cols, stride_rr, k, PIECE, NP, TW, NFULL), rstd, t64, n_cols, w_ptr,
                           shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr, stride_scc, abits, k,
                           PIECE, NP, TW, NFULL)
            tl.store(ho + _cols(k, PIECE, NP, TW), hk, eviction_policy="evict_last")
        qscale, bad = _row_scale(abits)
        tl.debug_barrier()   # the program's stores of h before its loads of them, whichever thread stored them
        for k in tl.static_range(NP):
            hk = tl.load(ho + _cols(k, PIECE, NP, TW), eviction_policy="evict_last")
            _put(q_ptr, row * stride_q, hk, qscale, bad, n_cols, k, PIECE, NP, TW, SMOD, QUOT, NFULL)
        tl.store(s_ptr + row, qscale)
        return
    # the row as eight pieces (module docstring): NP of them hold columns (NP > 4), the rest are zeros
    x0 = _x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr,
            stride_gc, stride_br, stride_bc, stride_rr, 0, PIECE, NP, TW, XMOD, SMOD, NFULL)
    x1 = _x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr,
            stride_gc, stride_br, stride_bc, stride_rr, 1, PIECE, NP, TW, XMOD, SMOD, NFULL)
    x2 = _x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr,
            stride_gc, stride_br, stride_bc, stride_rr, 2, PIECE, NP, TW, XMOD, SMOD, NFULL)
    x3 = _x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr,
            stride_gc, stride_br, stride_bc, stride_rr, 3, PIECE, NP, TW, XMOD, SMOD, NFULL)
    x4 = _x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr,
            stride_gc, stride_br, stride_bc, stride_rr, 4, PIECE, NP, TW, XMOD, SMOD, NFULL)
    if NP > 5:
        x5 = _x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr,
                stride_gc, stride_br, stride_bc, stride_rr, 5, PIECE, NP, TW, XMOD, SMOD, NFULL)
    else:
        x5 = x0                                  # absent: never read
    if NP > 6:
        x6 = _x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr,
                stride_gc, stride_br, stride_bc, stride_rr, 6, PIECE, NP, TW, XMOD, SMOD, NFULL)
    else:
        x6 = x0                                  # absent: never read
    if NP > 7:
        x7 = _x(res_ptr, gate_ptr, branch_ptr, r_ptr, row, t64, n_cols, stride_er, stride_ec, stride_gr,
                stride_gc, stride_br, stride_bc, stride_rr, 7, PIECE, NP, TW, XMOD, SMOD, NFULL)
    else:
        x7 = x0                                  # absent: never read
    ss = _sum_squares(x0, x1, x2, x3, x4, x5, x6, x7, PIECE, LOG, NP, UNPACK)
    rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.div_rn(ss, n_cols_f) + eps))
    if RELOAD == 2:   # h made twice from r read back, for the amax and for the bytes: nothing held across pieces
        tl.debug_barrier()                      # r stored by this program's threads is read back
        abits = tl.zeros((), tl.int32)
        for k in tl.static_range(NP):
            _, abits = _h(_r(r_ptr, row, n_cols, stride_rr, k, PIECE, NP, TW, NFULL), rstd, t64, n_cols, w_ptr,
                          shift_ptr,
                          scale_ptr, stride_w, stride_shr, stride_shc, stride_scr, stride_scc, abits, k, PIECE, NP,
                          TW, NFULL)
        qscale, bad = _row_scale(abits)
        for k in tl.static_range(NP):
            hk, _ = _affine(_r(r_ptr, row, n_cols, stride_rr, k, PIECE, NP, TW, NFULL), rstd, t64, n_cols, w_ptr,
                            shift_ptr,
                            scale_ptr, stride_w, stride_shr, stride_shc, stride_scr, stride_scc, k, PIECE, NP, TW,
                            NFULL)
            _put(q_ptr, row * stride_q, hk, qscale, bad, n_cols, k, PIECE, NP, TW, SMOD, QUOT, NFULL)
        tl.store(s_ptr + row, qscale)
        return
    h0, h1, h2, h3, h4, h5, h6, h7, abits = _hs(x0, x1, x2, x3, x4, x5, x6, x7, rstd, t64, r_ptr, row, n_cols,
                                                stride_rr, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr,
                                                stride_shc, stride_scr, stride_scc, PIECE, NP, TW, RELOAD, NFULL)
    _puts(q_ptr, s_ptr, row, stride_q, h0, h1, h2, h3, h4, h5, h6, h7, abits, n_cols, res_ptr, branch_ptr, row,
          stride_er, stride_ec, stride_br, stride_bc, PIECE, NP, TW, SMOD, QUOT, NFULL, XMOD, 0)

@triton.jit
def _raws(res_ptr, branch_ptr, row, n_cols, stride_er, stride_ec, stride_br, stride_bc, PIECE: tl.constexpr,
          NP: tl.constexpr, TW: tl.constexpr, XMOD: tl.constexpr, NFULL: tl.constexpr):
    """Every piece of the row's res and branch, (res, branch) pairs; the absent pieces' are piece 0's (never read)."""
    a0, b0 = _raw(res_ptr, branch_ptr, row, n_cols, stride_er, stride_ec, stride_br, stride_bc, 0, PIECE, NP, TW, XMOD,
                  NFULL)
    a1, b1 = _raw(res_ptr, branch_ptr, row, n_cols, stride_er, stride_ec, stride_br, stride_bc, 1, PIECE, NP, TW, XMOD,
                  NFULL)
    a2, b2 = _raw(res_ptr, branch_ptr, row, n_cols, stride_er, stride_ec, stride_br, stride_bc, 2, PIECE, NP, TW, XMOD,
                  NFULL)
    a3, b3 = _raw(res_ptr, branch_ptr, row, n_cols, stride_er, stride_ec, stride_br, stride_bc, 3, PIECE, NP, TW, XMOD,
                  NFULL)
    a4, b4 = _raw(res_ptr, branch_ptr, row, n_cols, stride_er, stride_ec, stride_br, stride_bc, 4, PIECE, NP, TW, XMOD,
                  NFULL)
    a5, b5, a6, b6, a7, b7 = a0, b0, a0, b0, a0, b0
    if NP > 5:
        a5, b5 = _raw(res_ptr, branch_ptr, row, n_cols, stride_er, stride_ec, stride_br, stride_bc, 5, PIECE, NP, TW,
                      XMOD, NFULL)
    if NP > 6:
        a6, b6 = _raw(res_ptr, branch_ptr, row, n_cols, stride_er, stride_ec, stride_br, stride_bc, 6, PIECE, NP, TW,
                      XMOD, NFULL)
    if NP > 7:
        a7, b7 = _raw(res_ptr, branch_ptr, row, n_cols, stride_er, stride_ec, stride_br, stride_bc, 7, PIECE, NP, TW,
                      XMOD, NFULL)
    return a0, b0, a1, b1, a2, b2, a3, b3, a4, b4, a5, b5, a6, b6, a7, b7


@triton.jit
def _row_next(row, nxt, a0, b0, a1, b1, a2, b2, a3, b3, a4, b4, a5, b5, a6, b6, a7, b7, res_ptr, gate_ptr, branch_ptr, r_ptr,
              w_ptr, shift_ptr, scale_ptr, idx_ptr, q_ptr, s_ptr, n_cols, n_cols_f, eps, stride_er, stride_ec,
              stride_gr, stride_gc, stride_br, stride_bc, stride_rr, stride_w, stride_shr, stride_shc, stride_scr,
              stride_scc, stride_idx, stride_q, PIECE: tl.constexpr, LOG: tl.constexpr, NP: tl.constexpr,
              XMOD: tl.constexpr, SMOD: tl.constexpr, QUOT: tl.constexpr, NFULL: tl.constexpr, TW: tl.constexpr,
              UNPACK: tl.constexpr):
    """PREFETCH 1: row ``row`` from its res and branch pieces (loaded by the iteration before), RELOAD 0; each piece
    of row ``nxt``'s res and branch is loaded once this row's bytes of that piece are stored (_puts), so that the
    loads are in flight while the rest of the row is quantised. Returns them."""
    t64 = tl.load(idx_ptr + row * stride_idx).to(tl.int64)
    x0 = _mk(a0, b0, gate_ptr, r_ptr, row, t64, n_cols, stride_gr, stride_gc, stride_rr, 0, PIECE, NP, TW, SMOD, NFULL)
    x1 = _mk(a1, b1, gate_ptr, r_ptr, row, t64, n_cols, stride_gr, stride_gc, stride_rr, 1, PIECE, NP, TW, SMOD, NFULL)
    x2 = _mk(a2, b2, gate_ptr, r_ptr, row, t64, n_cols, stride_gr, stride_gc, stride_rr, 2, PIECE, NP, TW, SMOD, NFULL)
    x3 = _mk(a3, b3, gate_ptr, r_ptr, row, t64, n_cols, stride_gr, stride_gc, stride_rr, 3, PIECE, NP, TW, SMOD, NFULL)
    x4 = _mk(a4, b4, gate_ptr, r_ptr, row, t64, n_cols, stride_gr, stride_gc, stride_rr, 4, PIECE, NP, TW, SMOD, NFULL)
    x5, x6, x7 = x0, x0, x0
    if NP > 5:
        x5 = _mk(a5, b5, gate_ptr, r_ptr, row, t64, n_cols, stride_gr, stride_gc, stride_rr, 5, PIECE, NP, TW, SMOD,
                 NFULL)
    if NP > 6:
        x6 = _mk(a6, b6, gate_ptr, r_ptr, row, t64, n_cols, stride_gr, stride_gc, stride_rr, 6, PIECE, NP, TW, SMOD,
                 NFULL)
    if NP > 7:
        x7 = _mk(a7, b7, gate_ptr, r_ptr, row, t64, n_cols, stride_gr, stride_gc, stride_rr, 7, PIECE, NP, TW, SMOD,
                 NFULL)
    ss = _sum_squares(x0, x1, x2, x3, x4, x5, x6, x7, PIECE, LOG, NP, UNPACK)
    rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.div_rn(ss, n_cols_f) + eps))
    h0, h1, h2, h3, h4, h5, h6, h7, abits = _hs(x0, x1, x2, x3, x4, x5, x6, x7, rstd, t64, r_ptr, row, n_cols,
                                                stride_rr, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr,
                                                stride_shc, stride_scr, stride_scc, PIECE, NP, TW, 0, NFULL)
    return _puts(q_ptr, s_ptr, row, stride_q, h0, h1, h2, h3, h4, h5, h6, h7, abits, n_cols, res_ptr, branch_ptr, nxt,
                 stride_er, stride_ec, stride_br, stride_bc, PIECE, NP, TW, SMOD, QUOT, NFULL, XMOD, 1)


@triton.jit
def _gate_residual_modulate_fp8_warp_kernel(res_ptr, gate_ptr, branch_ptr, r_ptr, w_ptr, shift_ptr, scale_ptr,
                                            idx_ptr, q_ptr, s_ptr, n_rows, n_cols, n_cols_f, eps, stride_er,
                                            stride_ec, stride_gr, stride_gc, stride_br, stride_bc, stride_rr, stride_w,
                                            stride_shr, stride_shc, stride_scr, stride_scc, stride_idx, stride_q,
                                            hs_ptr, stride_hs, PIECE: tl.constexpr, LOG: tl.constexpr, NP: tl.constexpr,
                                            XMOD: tl.constexpr, SMOD: tl.constexpr, QUOT: tl.constexpr,
                                            RELOAD: tl.constexpr, NFULL: tl.constexpr, TW: tl.constexpr,
                                            UNPACK: tl.constexpr, PERSIST: tl.constexpr, STAGES: tl.constexpr,
                                            PREFETCH: tl.constexpr):
    if PERSIST and PREFETCH and RELOAD == 0 and STAGES == 1:   # the loop carries the next row's res and branch
        pid = tl.program_id(0)
        a0, b0, a1, b1, a2, b2, a3, b3, a4, b4, a5, b5, a6, b6, a7, b7 = _raws(
            res_ptr, branch_ptr, pid.to(tl.int64), n_cols, stride_er, stride_ec, stride_br, stride_bc, PIECE, NP, TW,
            XMOD, NFULL)
        for row in tl.range(pid, n_rows, tl.num_programs(0), num_stages=1):
            r64 = tl.cast(row, tl.int64)
            nxt = tl.minimum(r64 + tl.num_programs(0), n_rows - 1)
            a0, b0, a1, b1, a2, b2, a3, b3, a4, b4, a5, b5, a6, b6, a7, b7 = _row_next(
                r64, nxt, a0, b0, a1, b1, a2, b2, a3, b3, a4, b4, a5, b5, a6, b6, a7, b7, res_ptr, gate_ptr, branch_ptr, r_ptr, w_ptr, shift_ptr,
                scale_ptr, idx_ptr, q_ptr, s_ptr, n_cols, n_cols_f, eps, stride_er, stride_ec, stride_gr, stride_gc,
                stride_br, stride_bc, stride_rr, stride_w, stride_shr, stride_shc, stride_scr, stride_scc, stride_idx,
                stride_q, PIECE, LOG, NP, XMOD, SMOD, QUOT, NFULL, TW, UNPACK)
    elif PERSIST:
        for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
            _row(tl.cast(row, tl.int64), res_ptr, gate_ptr, branch_ptr, r_ptr, w_ptr, shift_ptr, scale_ptr, idx_ptr,
                 q_ptr, s_ptr, n_cols, n_cols_f, eps, stride_er, stride_ec, stride_gr, stride_gc, stride_br,
                 stride_bc, stride_rr, stride_w, stride_shr, stride_shc, stride_scr, stride_scc, stride_idx,
                 stride_q, PIECE, LOG, NP, XMOD, SMOD, QUOT, RELOAD, NFULL, TW, UNPACK, hs_ptr, stride_hs)
    else:
        _row(tl.program_id(0).to(tl.int64), res_ptr, gate_ptr, branch_ptr, r_ptr, w_ptr, shift_ptr, scale_ptr,
             idx_ptr, q_ptr, s_ptr, n_cols, n_cols_f, eps, stride_er, stride_ec, stride_gr, stride_gc, stride_br,
             stride_bc, stride_rr, stride_w, stride_shr, stride_shc, stride_scr, stride_scc, stride_idx, stride_q,
             PIECE, LOG, NP, XMOD, SMOD, QUOT, RELOAD, NFULL, TW, UNPACK, hs_ptr, stride_hs)


def _tail_width(n_cols, piece, n_pieces):
    """Columns of the last piece with TAIL 1: the power of two (at least MIN_PIECE, at most the piece) that holds the
    row's columns in it (MIN_PIECE where it holds none: its columns are all zeros)."""
    left = n_cols - (n_pieces - 1) * piece
    return min(piece, max(triton.next_power_of_2(max(left, 1)), MIN_PIECE))


def launch(res, gate, branch, w, shift, scale, idx, num_warps=1, STREAM=1, QUOT=1, RELOAD=0, MAXNREG=0, PERSIST=0,
           STAGES=1, TAIL=0, UNPACK=0, PREFETCH=0):
    n_rows, n_cols = res.shape
    piece = max(triton.next_power_of_2(n_cols) // PIECES, MIN_PIECE)
    n_pieces = max(triton.cdiv(n_cols, piece), PIECES // 2 + 1)
    r = K.empty((n_rows, n_cols), dtype=res.dtype, device=res.device)
    h8 = K.empty((n_rows, n_cols), dtype=K.float8_e4m3fn, device=res.device)
    h_scale = K.empty((n_rows,), dtype=K.float32, device=res.device)
    if n_rows > 0:
        grid = min(n_rows, PERSIST) if PERSIST else n_rows
        # RELOAD 4: a row of h a program (bf16, the pieces' columns); otherwise res stands in, never read through it
        hs = K.scratch((grid, n_pieces * piece), dtype=K.bfloat16, device=res.device) if RELOAD == 4 else res
        _gate_residual_modulate_fp8_warp_kernel[(grid,)](
            res, gate, branch, r, w, shift, scale, idx, h8, h_scale, n_rows, n_cols, float(n_cols), EPS,
            res.stride(0), res.stride(1), gate.stride(0), gate.stride(1), branch.stride(0), branch.stride(1),
            r.stride(0), w.stride(0), shift.stride(0), shift.stride(1), scale.stride(0), scale.stride(1),
            idx.stride(0), h8.stride(0), hs, hs.stride(0), PIECE=piece, LOG=LOG2_MAX, NP=n_pieces,
            TW=_tail_width(n_cols, piece, n_pieces) if TAIL else piece, UNPACK=UNPACK, XMOD=".cg" if STREAM else "",
            SMOD=".cs" if STREAM else "", QUOT=QUOT, RELOAD=RELOAD,
            NFULL=n_cols // piece, PERSIST=PERSIST, STAGES=STAGES, PREFETCH=PREFETCH,
            num_warps=num_warps, maxnreg=MAXNREG or None,
            enable_fp_fusion=False)  # no fma in the squares' sums, in r or in modulate's roundings (docstring)
    return r, h8, h_scale

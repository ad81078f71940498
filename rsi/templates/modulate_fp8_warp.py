"""Triton template for ``modulate_fp8``: a row as eight pieces, its canonical sum of squares inside the warp.

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
modulate's roundings). STREAM = 1 loads x with ``.cg`` and stores h8 with ``.cs``.
RELOAD 1 does not hold the row between its sum of squares and h: each piece of x is read again (an L2 hit) for
h, which frees the registers the pieces take (more rows in flight, more L2 traffic).
RELOAD 2 holds nothing across pieces: each piece of x is read again to make h for the row's amax, and a third
time to make h again for the bytes: fewer registers (more rows in flight), more instructions
(tests/unit/test_fp8_compile.py, docs/kernels.md).
The NFULL pieces wholly inside the row (n_cols // PIECE, set at launch) are read, made and stored without a mask.
RELOAD 3 is RELOAD 2 with each piece's operands (x, w, the scale and shift rows) loaded while the piece before it
is made, the first piece's before the sum of squares (which they do not need): the loads' latency off the chain.
RELOAD 4 (thirtieth session) is RELOAD 2 with h made once: each piece of h goes to the program's row of a scratch
buffer (``K.scratch``, bf16, one row a program: meant for the row loop, whose PERSIST programs keep re-writing their
rows, so that the scratch stays in L2) and is read back for the bytes once the amax is known. Nothing is held across
pieces: the one-warp sm_90a build holds 106 registers (18 programs an SM against the 8 of 255), no stack, 4,904
SASS instructions against RELOAD 2's 124 / 5,856 (PERSIST 1056, TAIL 1). A barrier between the stores and the
loads makes them visible across the program's threads (the layouts are the same, so each thread reads back what it
stored, but the barrier does not rely on that). On an H100 (run 87 h) it is slower than PREFETCH at every bucket
(0.51-0.64x the bf16 op against 0.87-1.05x): the scratch rows are written back to DRAM under the streaming loads
(run 87 n: about 280 MB moved at stage1 against 151 MB) and the warps wait on reading them back.
MAXNREG n > 0 caps a thread's registers at n (the launch's maxnreg): at one warp and RELOAD 1 the sm_90 build holds
255 (8 programs an SM); 168 fits 12 programs and 128 16, the rest spilled to local memory (modulate_fp8_warp: 56
stack bytes uncapped, 280 at 168, 632 at 128). Ncu (run 77) found the one-warp kernel waiting on its loads with
1.94 warps a scheduler: the cap trades spills for warps, and lost on an H100 (run 79 h3: 0.30-0.59x the bf16
op against 0.76-0.82x uncapped; the spills sit on the same chain).
PERSIST n > 0: min(rows, n) programs walk the rows (pid, pid + n, ...) in a loop that Triton software-pipelines
over STAGES (its num_stages): the next rows' loads (x and the operand pieces) go to shared memory by cp.async while
the current row is made (one-warp sm_90 build, RELOAD 0, STAGES 2: 48 KiB of shared memory a program, no stack;
RELOAD 1: 60 KiB), which limits programs an SM to 4 (RELOAD 0) or 3, against the 8 the registers allow. On an H100
(run 79 h3) the pipelined loop lost (0.39-0.52x the bf16 op) and the unpipelined one (STAGES 1, 1,056 programs,
RELOAD 0) was the fastest modulate_fp8 realization measured, 0.793x at stage1 against RELOAD 1's 0.760x (the H200,
run 79: 0.705x against 0.665x); it is the heuristic (rsi/spaces.py) since the twenty-fifth session.
TAIL 1 makes the last piece only as wide as the row needs (TW columns: the power of two, at least 256, at or above
what is left; 256 of 1,024 at H3's 5,376, where six full pieces carry 768 zero columns); its squares are widened
with zeros before the piece-level adds, which keeps the tree. UNPACK 1 makes the squares' fp32 x from x's bits
(``bits << 16``), so that the compiler does not share it with h's conversion and hold the row's fp32 x between them.
PREFETCH 1 (with PERSIST, RELOAD 0, STAGES 1): the loop carries the row's pieces, and each iteration loads the next
row's (its program's next row; the last row's own again) piece by piece, each once the same piece's bytes are stored,
into the registers that piece's h held: the loads are in flight while the rest of the row is quantised and stored.
Without it a program's loads wait for its previous row's stores (the unpipelined loop), and only the SM's other
programs hide them. Loading the whole next row once h is made spilled (a 360-byte stack in the one-warp sm_90a
build); piece by piece it holds 255 registers, no stack, 4,448 SASS instructions (TAIL 1; without PREFETCH 4,368 and
a 96-byte stack).
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
def _x(x_ptr, row_off, n_cols, stride_xc, K_: tl.constexpr, PIECE: tl.constexpr,
       NP: tl.constexpr, TW: tl.constexpr, XMOD: tl.constexpr,
       NFULL: tl.constexpr):
    """Piece K_ of the row (bf16, zeros past H)."""
    cols = _cols(K_, PIECE, NP, TW)
    return tl.load(x_ptr + row_off + cols * stride_xc, mask=_in(cols, n_cols, K_, NFULL), other=0.0,
                   cache_modifier=XMOD)


@triton.jit
def _pieces(x_ptr, row_off, n_cols, stride_xc, PIECE: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr,
            XMOD: tl.constexpr, NFULL: tl.constexpr):
    """The row as eight pieces (module docstring): NP of them hold columns (NP > 4), the rest are x0 (never read)."""
    x0 = _x(x_ptr, row_off, n_cols, stride_xc, 0, PIECE, NP, TW, XMOD, NFULL)
    x1 = _x(x_ptr, row_off, n_cols, stride_xc, 1, PIECE, NP, TW, XMOD, NFULL)
    x2 = _x(x_ptr, row_off, n_cols, stride_xc, 2, PIECE, NP, TW, XMOD, NFULL)
    x3 = _x(x_ptr, row_off, n_cols, stride_xc, 3, PIECE, NP, TW, XMOD, NFULL)
    x4 = _x(x_ptr, row_off, n_cols, stride_xc, 4, PIECE, NP, TW, XMOD, NFULL)
    x5 = x0
    x6 = x0
    x7 = x0
    if NP > 5:
        x5 = _x(x_ptr, row_off, n_cols, stride_xc, 5, PIECE, NP, TW, XMOD, NFULL)
    if NP > 6:
        x6 = _x(x_ptr, row_off, n_cols, stride_xc, 6, PIECE, NP, TW, XMOD, NFULL)
    if NP > 7:
        x7 = _x(x_ptr, row_off, n_cols, stride_xc, 7, PIECE, NP, TW, XMOD, NFULL)
    return x0, x1, x2, x3, x4, x5, x6, x7


@triton.jit
def _wss(t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr, stride_scc,
         K_: tl.constexpr, PIECE: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr, NFULL: tl.constexpr):
    """Piece K_ of w and of the row's AdaLN scale and shift rows (bf16, zeros past H)."""
    cols = _cols(K_, PIECE, NP, TW)
    m = _in(cols, n_cols, K_, NFULL)
    w = tl.load(w_ptr + cols * stride_w, mask=m, other=0.0, eviction_policy="evict_last")
    sc = tl.load(scale_ptr + t64 * stride_scr + cols * stride_scc, mask=m, other=0.0, eviction_policy="evict_last")
    sh = tl.load(shift_ptr + t64 * stride_shr + cols * stride_shc, mask=m, other=0.0, eviction_policy="evict_last")
    return w, sc, sh


@triton.jit
def _made(x, w, sc, sh, rstd, n_cols, K_: tl.constexpr, PIECE: tl.constexpr,
          NP: tl.constexpr, TW: tl.constexpr, NFULL: tl.constexpr):
    """h (bf16) of piece K_ from its loaded operands in modulate's eager roundings, and its largest |h| bit pattern."""
    m = _in(_cols(K_, PIECE, NP, TW), n_cols, K_, NFULL)
    n = (x.to(tl.float32) * rstd * w.to(tl.float32)).to(tl.bfloat16).to(tl.float32)
    s1 = (1.0 + sc.to(tl.float32)).to(tl.bfloat16).to(tl.float32)
    p = (n * s1).to(tl.bfloat16).to(tl.float32)
    h = tl.where(m, (p + sh.to(tl.float32)).to(tl.bfloat16), 0.0)
    return h, tl.max(h.to(tl.int16, bitcast=True) & 0x7FFF, 0)


@triton.jit
def _affine(x, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr,
            stride_scc, K_: tl.constexpr, PIECE: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr, NFULL: tl.constexpr):
    """h (bf16) of piece K_ in modulate's eager roundings, and its largest |h| bit pattern."""
    w, sc, sh = _wss(t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr,
                     stride_scc, K_, PIECE, NP, TW, NFULL)
    return _made(x, w, sc, sh, rstd, n_cols, K_, PIECE, NP, TW, NFULL)


@triton.jit
def _put(q_ptr, q_off, h, scale, bad, n_cols, K_: tl.constexpr, PIECE: tl.constexpr,
         NP: tl.constexpr, TW: tl.constexpr, SMOD: tl.constexpr,
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
def _hs(x0, x1, x2, x3, x4, x5, x6, x7, rstd, t64, x_ptr, xo, n_cols, stride_xc, w_ptr, shift_ptr, scale_ptr,
        stride_w, stride_shr, stride_shc, stride_scr, stride_scc, PIECE: tl.constexpr, NP: tl.constexpr,
        TW: tl.constexpr, RELOAD: tl.constexpr, NFULL: tl.constexpr):
    """h (bf16) of every piece (RELOAD 1: x read again for it) and the row's largest |h| bit pattern; the absent
    pieces' h are h0 (never stored)."""
    if RELOAD:
        x0 = _x(x_ptr, xo, n_cols, stride_xc, 0, PIECE, NP, TW, "", NFULL)
    h0, abits = _affine(x0, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
                        stride_scr, stride_scc, 0, PIECE, NP, TW, NFULL)
    if RELOAD:
        x1 = _x(x_ptr, xo, n_cols, stride_xc, 1, PIECE, NP, TW, "", NFULL)
    h1, abits = _h(x1, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr,
                   stride_scc, abits, 1, PIECE, NP, TW, NFULL)
    if RELOAD:
        x2 = _x(x_ptr, xo, n_cols, stride_xc, 2, PIECE, NP, TW, "", NFULL)
    h2, abits = _h(x2, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr,
                   stride_scc, abits, 2, PIECE, NP, TW, NFULL)
    if RELOAD:
        x3 = _x(x_ptr, xo, n_cols, stride_xc, 3, PIECE, NP, TW, "", NFULL)
    h3, abits = _h(x3, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr,
                   stride_scc, abits, 3, PIECE, NP, TW, NFULL)
    if RELOAD:
        x4 = _x(x_ptr, xo, n_cols, stride_xc, 4, PIECE, NP, TW, "", NFULL)
    h4, abits = _h(x4, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr,
                   stride_scc, abits, 4, PIECE, NP, TW, NFULL)
    h5 = h0
    h6 = h0
    h7 = h0
    if NP > 5:
        if RELOAD:
            x5 = _x(x_ptr, xo, n_cols, stride_xc, 5, PIECE, NP, TW, "", NFULL)
        h5, abits = _h(x5, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
                       stride_scr, stride_scc, abits, 5, PIECE, NP, TW, NFULL)
    if NP > 6:
        if RELOAD:
            x6 = _x(x_ptr, xo, n_cols, stride_xc, 6, PIECE, NP, TW, "", NFULL)
        h6, abits = _h(x6, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
                       stride_scr, stride_scc, abits, 6, PIECE, NP, TW, NFULL)
    if NP > 7:
        if RELOAD:
            x7 = _x(x_ptr, xo, n_cols, stride_xc, 7, PIECE, NP, TW, "", NFULL)
        h7, abits = _h(x7, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
                       stride_scr, stride_scc, abits, 7, PIECE, NP, TW, NFULL)
    return h0, h1, h2, h3, h4, h5, h6, h7, abits


@triton.jit
def _puts(q_ptr, s_ptr, row, stride_q, h0, h1, h2, h3, h4, h5, h6, h7, abits, n_cols, x_ptr, nxt_off, stride_xc,
          PIECE: tl.constexpr, NP: tl.constexpr, TW: tl.constexpr, SMOD: tl.constexpr, QUOT: tl.constexpr,
          NFULL: tl.constexpr, XMOD: tl.constexpr, NEXT: tl.constexpr):
    """The row's scale from its amax bits, then every piece's bytes and the scale stored. NEXT 1 (PREFETCH): after
    each piece's bytes, that piece of the row at nxt_off is loaded into the registers its h held (the loads stay
    after the stores before them: the pointers may alias), and the pieces are returned (else the h's, unused)."""
    qscale, bad = _row_scale(abits)
    qo = row * stride_q
    _put(q_ptr, qo, h0, qscale, bad, n_cols, 0, PIECE, NP, TW, SMOD, QUOT, NFULL)
    if NEXT:
        h0 = _x(x_ptr, nxt_off, n_cols, stride_xc, 0, PIECE, NP, TW, XMOD, NFULL)
    _put(q_ptr, qo, h1, qscale, bad, n_cols, 1, PIECE, NP, TW, SMOD, QUOT, NFULL)
    if NEXT:
        h1 = _x(x_ptr, nxt_off, n_cols, stride_xc, 1, PIECE, NP, TW, XMOD, NFULL)
    _put(q_ptr, qo, h2, qscale, bad, n_cols, 2, PIECE, NP, TW, SMOD, QUOT, NFULL)
    if NEXT:
        h2 = _x(x_ptr, nxt_off, n_cols, stride_xc, 2, PIECE, NP, TW, XMOD, NFULL)
    _put(q_ptr, qo, h3, qscale, bad, n_cols, 3, PIECE, NP, TW, SMOD, QUOT, NFULL)
    if NEXT:
        h3 = _x(x_ptr, nxt_off, n_cols, stride_xc, 3, PIECE, NP, TW, XMOD, NFULL)
    _put(q_ptr, qo, h4, qscale, bad, n_cols, 4, PIECE, NP, TW, SMOD, QUOT, NFULL)
    if NEXT:
        h4 = _x(x_ptr, nxt_off, n_cols, stride_xc, 4, PIECE, NP, TW, XMOD, NFULL)
    if NP > 5:
        _put(q_ptr, qo, h5, qscale, bad, n_cols, 5, PIECE, NP, TW, SMOD, QUOT, NFULL)
        if NEXT:
            h5 = _x(x_ptr, nxt_off, n_cols, stride_xc, 5, PIECE, NP, TW, XMOD, NFULL)
    if NP > 6:
        _put(q_ptr, qo, h6, qscale, bad, n_cols, 6, PIECE, NP, TW, SMOD, QUOT, NFULL)
        if NEXT:
            h6 = _x(x_ptr, nxt_off, n_cols, stride_xc, 6, PIECE, NP, TW, XMOD, NFULL)
    if NP > 7:
        _put(q_ptr, qo, h7, qscale, bad, n_cols, 7, PIECE, NP, TW, SMOD, QUOT, NFULL)
        if NEXT:
            h7 = _x(x_ptr, nxt_off, n_cols, stride_xc, 7, PIECE, NP, TW, XMOD, NFULL)
    tl.store(s_ptr + row, qscale)
    return h0, h1, h2, h3, h4, h5, h6, h7


@triton.jit
def _row(row, x_ptr, w_ptr, shift_ptr, scale_ptr, idx_ptr, q_ptr, s_ptr, n_cols, n_cols_f, eps,
         stride_xr, stride_xc, stride_w, stride_shr, stride_shc, stride_scr, stride_scc,
         stride_idx, stride_q, PIECE: tl.constexpr, LOG: tl.constexpr, NP: tl.constexpr,
         XMOD: tl.constexpr, SMOD: tl.constexpr, QUOT: tl.constexpr, RELOAD: tl.constexpr,
         NFULL: tl.constexpr, TW: tl.constexpr, UNPACK: tl.constexpr, hs_ptr, stride_hs):
    t64 = tl.load(idx_ptr + row * stride_idx).to(tl.int64)
    xo = row * stride_xr
    x0, x1, x2, x3, x4, x5, x6, x7 = _pieces(x_ptr, xo, n_cols, stride_xc, PIECE, NP, TW, XMOD, NFULL)
    if RELOAD == 3:   # the first piece's operands again, issued before the sum of squares that they do not need
        xa = _x(x_ptr, xo, n_cols, stride_xc, 0, PIECE, NP, TW, "", NFULL)
        wa, sca, sha = _wss(t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc, stride_scr,
                            stride_scc, 0, PIECE, NP, TW, NFULL)
    ss = _sum_squares(x0, x1, x2, x3, x4, x5, x6, x7, PIECE, LOG, NP, UNPACK)
    rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.div_rn(ss, n_cols_f) + eps))
    if RELOAD == 3:   # RELOAD 2 with each piece's operands loaded while the piece before it is made
        abits = tl.zeros((), tl.int32)
        for k in tl.static_range(NP):
            # the next piece's operands; after the amax pass's last piece, the bytes pass's first
            xb = _x(x_ptr, xo, n_cols, stride_xc, (k + 1) % NP, PIECE, NP, TW, "", NFULL)
            wb, scb, shb = _wss(t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
                                stride_scr, stride_scc, (k + 1) % NP, PIECE, NP, TW, NFULL)
            _, b = _made(xa, wa, sca, sha, rstd, n_cols, k, PIECE, NP, TW, NFULL)
            abits = tl.maximum(abits, b)
            xa, wa, sca, sha = xb, wb, scb, shb
        qscale, bad = _row_scale(abits)
        for k in tl.static_range(NP):
            if k + 1 < NP:
                xb = _x(x_ptr, xo, n_cols, stride_xc, k + 1, PIECE, NP, TW, "", NFULL)
                wb, scb, shb = _wss(t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
                                    stride_scr, stride_scc, k + 1, PIECE, NP, TW, NFULL)
            hk, _ = _made(xa, wa, sca, sha, rstd, n_cols, k, PIECE, NP, TW, NFULL)
            _put(q_ptr, row * stride_q, hk, qscale, bad, n_cols, k, PIECE, NP, TW, SMOD, QUOT, NFULL)
            if k + 1 < NP:
                xa, wa, sca, sha = xb, wb, scb, shb
        tl.store(s_ptr + row, qscale)
        return
    if RELOAD == 4:   # h made once from x read again, kept in the program's scratch row (hs) for the bytes
        abits = tl.zeros((), tl.int32)
        ho = hs_ptr + tl.program_id(0).to(tl.int64) * stride_hs
        for k in tl.static_range(NP):
            xk = _x(x_ptr, xo, n_cols, stride_xc, k, PIECE, NP, TW, "", NFULL)
            hk, abits = _h(xk, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
                           stride_scr, stride_scc, abits, k, PIECE, NP, TW, NFULL)
            tl.store(ho + _cols(k, PIECE, NP, TW), hk, eviction_policy="evict_last")
        qscale, bad = _row_scale(abits)
        tl.debug_barrier()   # the program's stores of h before its loads of them, whichever thread stored them
        for k in tl.static_range(NP):
            hk = tl.load(ho + _cols(k, PIECE, NP, TW), eviction_policy="evict_last")
            _put(q_ptr, row * stride_q, hk, qscale, bad, n_cols, k, PIECE, NP, TW, SMOD, QUOT, NFULL)
        tl.store(s_ptr + row, qscale)
        return
    if RELOAD == 2:   # h made twice from x read again, for the amax and for the bytes: nothing held across pieces
        abits = tl.zeros((), tl.int32)
        for k in tl.static_range(NP):
            xk = _x(x_ptr, xo, n_cols, stride_xc, k, PIECE, NP, TW, "", NFULL)
            _, abits = _h(xk, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
                          stride_scr, stride_scc, abits, k, PIECE, NP, TW, NFULL)
        qscale, bad = _row_scale(abits)
        for k in tl.static_range(NP):
            xk = _x(x_ptr, xo, n_cols, stride_xc, k, PIECE, NP, TW, "", NFULL)
            hk, _ = _affine(xk, rstd, t64, n_cols, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr, stride_shc,
                            stride_scr, stride_scc, k, PIECE, NP, TW, NFULL)
            _put(q_ptr, row * stride_q, hk, qscale, bad, n_cols, k, PIECE, NP, TW, SMOD, QUOT, NFULL)
        tl.store(s_ptr + row, qscale)
        return
    h0, h1, h2, h3, h4, h5, h6, h7, abits = _hs(x0, x1, x2, x3, x4, x5, x6, x7, rstd, t64, x_ptr, xo, n_cols,
                                                stride_xc, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr,
                                                stride_shc, stride_scr, stride_scc, PIECE, NP, TW, RELOAD, NFULL)
    _puts(q_ptr, s_ptr, row, stride_q, h0, h1, h2, h3, h4, h5, h6, h7, abits, n_cols, x_ptr, xo, stride_xc, PIECE,
          NP, TW, SMOD, QUOT, NFULL, XMOD, 0)

@triton.jit
def _row_next(row, nxt, x0, x1, x2, x3, x4, x5, x6, x7, x_ptr, w_ptr, shift_ptr, scale_ptr, idx_ptr, q_ptr, s_ptr,
              n_cols, n_cols_f, eps, stride_xr, stride_xc, stride_w, stride_shr, stride_shc, stride_scr, stride_scc,
              stride_idx, stride_q, PIECE: tl.constexpr, LOG: tl.constexpr, NP: tl.constexpr, XMOD: tl.constexpr,
              SMOD: tl.constexpr, QUOT: tl.constexpr, NFULL: tl.constexpr, TW: tl.constexpr, UNPACK: tl.constexpr):
    """PREFETCH 1: row ``row`` from its pieces x0..x7 (loaded by the iteration before), RELOAD 0; each of row
    ``nxt``'s pieces is loaded once this row's bytes of that piece are stored (_puts), so that the loads are in flight
    while the rest of the row is quantised. Returns them."""
    t64 = tl.load(idx_ptr + row * stride_idx).to(tl.int64)
    ss = _sum_squares(x0, x1, x2, x3, x4, x5, x6, x7, PIECE, LOG, NP, UNPACK)
    rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.div_rn(ss, n_cols_f) + eps))
    h0, h1, h2, h3, h4, h5, h6, h7, abits = _hs(x0, x1, x2, x3, x4, x5, x6, x7, rstd, t64, x_ptr, row * stride_xr,
                                                n_cols, stride_xc, w_ptr, shift_ptr, scale_ptr, stride_w, stride_shr,
                                                stride_shc, stride_scr, stride_scc, PIECE, NP, TW, 0, NFULL)
    return _puts(q_ptr, s_ptr, row, stride_q, h0, h1, h2, h3, h4, h5, h6, h7, abits, n_cols, x_ptr, nxt * stride_xr,
                 stride_xc, PIECE, NP, TW, SMOD, QUOT, NFULL, XMOD, 1)


@triton.jit
def _modulate_fp8_warp_kernel(x_ptr, w_ptr, shift_ptr, scale_ptr, idx_ptr, q_ptr, s_ptr, n_rows, n_cols, n_cols_f, eps,
                              stride_xr, stride_xc, stride_w, stride_shr, stride_shc, stride_scr, stride_scc,
                              stride_idx, stride_q, hs_ptr, stride_hs, PIECE: tl.constexpr, LOG: tl.constexpr, NP: tl.constexpr,
                              XMOD: tl.constexpr, SMOD: tl.constexpr, QUOT: tl.constexpr, RELOAD: tl.constexpr,
                              NFULL: tl.constexpr, TW: tl.constexpr, UNPACK: tl.constexpr,
                              PERSIST: tl.constexpr, STAGES: tl.constexpr, PREFETCH: tl.constexpr):
    if PERSIST and PREFETCH and RELOAD == 0 and STAGES == 1:   # the loop carries the next row's pieces (_row_next)
        pid = tl.program_id(0)
        x0, x1, x2, x3, x4, x5, x6, x7 = _pieces(x_ptr, pid.to(tl.int64) * stride_xr, n_cols, stride_xc, PIECE, NP,
                                                 TW, XMOD, NFULL)
        for row in tl.range(pid, n_rows, tl.num_programs(0), num_stages=1):
            r64 = tl.cast(row, tl.int64)
            nxt = tl.minimum(r64 + tl.num_programs(0), n_rows - 1)
            x0, x1, x2, x3, x4, x5, x6, x7 = _row_next(
                r64, nxt, x0, x1, x2, x3, x4, x5, x6, x7, x_ptr, w_ptr, shift_ptr, scale_ptr, idx_ptr, q_ptr, s_ptr,
                n_cols, n_cols_f, eps, stride_xr, stride_xc, stride_w, stride_shr, stride_shc, stride_scr,
                stride_scc, stride_idx, stride_q, PIECE, LOG, NP, XMOD, SMOD, QUOT, NFULL, TW, UNPACK)
    elif PERSIST:
        for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
            _row(tl.cast(row, tl.int64), x_ptr, w_ptr, shift_ptr, scale_ptr, idx_ptr, q_ptr, s_ptr, n_cols, n_cols_f, eps,
                 stride_xr, stride_xc, stride_w, stride_shr, stride_shc, stride_scr, stride_scc, stride_idx, stride_q,
                 PIECE, LOG, NP, XMOD, SMOD, QUOT, RELOAD, NFULL, TW, UNPACK, hs_ptr, stride_hs)
    else:
        _row(tl.program_id(0).to(tl.int64), x_ptr, w_ptr, shift_ptr, scale_ptr, idx_ptr, q_ptr, s_ptr, n_cols,
             n_cols_f, eps, stride_xr, stride_xc, stride_w, stride_shr, stride_shc, stride_scr, stride_scc, stride_idx,
             stride_q, PIECE, LOG, NP, XMOD, SMOD, QUOT, RELOAD, NFULL, TW, UNPACK, hs_ptr, stride_hs)


def _tail_width(n_cols, piece, n_pieces):
    """Columns of the last piece with TAIL 1: the power of two (at least MIN_PIECE, at most the piece) that holds the
    row's columns in it (MIN_PIECE where it holds none: its columns are all zeros)."""
    left = n_cols - (n_pieces - 1) * piece
    return min(piece, max(triton.next_power_of_2(max(left, 1)), MIN_PIECE))


def launch(x, w, shift, scale, idx, num_warps=1, STREAM=1, QUOT=1, RELOAD=0, MAXNREG=0, PERSIST=0, STAGES=1, TAIL=0,
           UNPACK=0, PREFETCH=0):
    n_rows, n_cols = x.shape
    piece = max(triton.next_power_of_2(n_cols) // PIECES, MIN_PIECE)
    n_pieces = max(triton.cdiv(n_cols, piece), PIECES // 2 + 1)
    h8 = K.empty((n_rows, n_cols), dtype=K.float8_e4m3fn, device=x.device)
    h_scale = K.empty((n_rows,), dtype=K.float32, device=x.device)
    if n_rows > 0:
        grid = min(n_rows, PERSIST) if PERSIST else n_rows
        # RELOAD 4: a row of h a program (bf16, the pieces' columns); otherwise x stands in, never read through it
        hs = K.scratch((grid, n_pieces * piece), dtype=K.bfloat16, device=x.device) if RELOAD == 4 else x
        _modulate_fp8_warp_kernel[(grid,)](
            x, w, shift, scale, idx, h8, h_scale, n_rows, n_cols, float(n_cols), EPS, x.stride(0), x.stride(1), w.stride(0),
            shift.stride(0), shift.stride(1), scale.stride(0), scale.stride(1), idx.stride(0), h8.stride(0),
            hs, hs.stride(0),
            PIECE=piece, LOG=LOG2_MAX, NP=n_pieces, TW=_tail_width(n_cols, piece, n_pieces) if TAIL else piece,
            UNPACK=UNPACK,
            XMOD=".cg" if STREAM else "", SMOD=".cs" if STREAM else "", QUOT=QUOT, RELOAD=RELOAD,
            NFULL=n_cols // piece, PERSIST=PERSIST, STAGES=STAGES, PREFETCH=PREFETCH,
            num_warps=num_warps, maxnreg=MAXNREG or None,
            enable_fp_fusion=False)  # no fma in the squares' sums or in modulate's roundings (module docstring)
    return h8, h_scale

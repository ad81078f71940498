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

FAST 1 (one row a program) evaluates silu in fp32 first (``tl.exp``, the approximate ``/``; H200 run 35 measured
it at most 2.7, 4.0, 6.3, 11.6, 22.2 fp32 ulps from the fp64 value for |g| below 1, 4, 8, 16, 32, every bf16 gate)
and keeps that bf16 rounding wherever the fp32 value is more than |g| + 16 ulps from a bf16 rounding midpoint (its
low 16 bits against 0x8000), since there it equals silu_c's. The other elements (0.35% of N(0, 2) gates; every |g| >=
32 or < 2**-60, NaN and Inf) take the fp64 path: a piece is a [BLOCK / SUB, SUB] tile, the sub-rows holding such an
element are numbered (a cumulative sum; +-0 is exact on the fast path), their gate values re-read (from cache) into a [MAXN, SUB] tile evaluated in
fp64, and gathered back; a piece with more than MAXN such sub-rows is evaluated in fp64 whole. Bitwise on the H200
for every bf16 gate, but slower than the fp64 silu (runs 33-35, docs/results.md: the redo costs ~470 us at stage1,
and at 0.35% most 8192 pieces exceed MAXN 16).
TABLE 3 (delta): silu in fp32 (``tl.exp``, the approximate ``/``: a handful of instructions), rounded to bf16, then
corrected by a 2-bit code per bf16 gate from a 16 KiB table (4,096 int32 words) that a first launch builds with the
same fp32 function and silu_c: 0 keep, 1 add one to the bf16 bits, 3 subtract one, 2 neither suffices (non-finite
gates, and any whose fp32 rounding lands more than one bf16 step away or across the sign), whose silu_c is read
from a full bf16 table the same launch writes (a load masked to those gates: none for normal inputs). Both kernels inline the one ``_silu_fast``, so the table describes the row kernel's own
fp32 values; every bf16 gate is tested under the interpreter and on the GPU. Normal gates (N(0, 2)) touch ~450
bytes of it, against ~3.5 KiB of TABLE 2's 128 KiB (fewer cache lines a warp's gather).
FLAT 1 (ROWS 1, RELOAD 0): a row's pieces as 1-D tensors, so that the table gather takes the layout of the x loads
and the e4m3 stores (the [ROWS, BLOCK] form gathers in a layout of its own, and the sm_90 compile moves x, the
gate bits and the bytes between layouts through shared memory: three conversions an element); the program loads
the next row's x before the current row's amax and quantiser. PERSIST n > 0 (FLAT 1): min(rows, n) programs walk
the rows (132: the SMs of an H100 / H200); 0: one program a row. PART 1 (FLAT): each piece's amax first per warp
(the piece as [num_warps, BLOCK / num_warps]: a warp's own elements), the row's last max the only one across warps
(4 barriers a row instead of 9 at 32 warps in the sm_90 compile). MAXNREG n > 0 (FLAT): the launch's register cap,
so that two programs share an SM (16 warps at 64 registers: 42 bytes of spills in the sm_90 compile).
QUOT 1 replaces the per-element ``div_rn`` of the quantiser by the row reciprocal and one Markstein correction
(rsi/refs/fp8_quotient.py: the same byte for every bf16 value and row scale, checked exhaustively).
Config: BLOCK_A, BLOCK_B, BLOCK_C, ROWS, num_warps, EVICT (policy of the x loads), FAST, SUB, MAXN, QUOT, TABLE,
RELOAD, FLAT, PERSIST, PART, MAXNREG.
"""

import triton
import triton.language as tl

from rsi import kernel as K

E4M3_MAX = tl.constexpr(448.0)
NONFINITE_BITS = tl.constexpr(0x7F80)    # bf16 bits of +Inf: |h| bits at or above it are Inf or NaN
NAN_BITS = tl.constexpr(0x7FC00000)      # the fp32 NaN of a non-finite row's scale
TINY_SCALE = tl.constexpr(2.0**-64)      # below it the row is lifted by 2**64 so that its reciprocal stays finite
LIFT = tl.constexpr(2.0**64)
NEAR_ULPS = tl.constexpr(16.0)           # fp32 ulps (plus |g|) from a bf16 midpoint that send an element to fp64
SAFE_G = tl.constexpr(32.0)              # |g| at or above it (and NaN, Inf) -> fp64 (run 35: 52.6 ulps in [32, 64))
TINY_G = tl.constexpr(2.0**-60)          # |g| below it -> fp64 (no subnormal fp32 temporaries on the fast path)
TAB_E0 = tl.constexpr(119)               # TABLE 1: biased bf16 exponents 119..134 (-8..7) are tabulated,
TAB_NE = tl.constexpr(16)                # 16 binades of 128 mantissas a sign
NEG_ZERO_BITS = tl.constexpr(0x8000)     # bf16 -0
NAN16_BITS = tl.constexpr(0x7FC0)        # a bf16 NaN
TAB_SIZES = (0, 4096, 65536, 4096)       # entries (TABLE 3: int32 words) of the table TABLE 1 / 2 / 3 builds
TAB_BLOCK = 1024                         # table entries (TABLE 3: gates) a program of the table kernel writes
CODES_A_WORD = tl.constexpr(16)          # TABLE 3: 2-bit codes an int32 word
SLOW_CODE = tl.constexpr(2)              # TABLE 3: the gate's piece is evaluated in fp64


@triton.jit
def _row_scale(abits):
    """(scale, bad) per row from the largest |h| bit pattern of each row (int32)."""
    bad = abits >= NONFINITE_BITS
    amax = tl.where(bad, 0, abits).to(tl.int16).to(tl.bfloat16, bitcast=True).to(tl.float32)
    nan = tl.full(amax.shape, NAN_BITS, tl.int32).to(tl.float32, bitcast=True)
    scale = tl.where(bad, nan, tl.where(amax == 0.0, 1.0, tl.div_rn(amax, E4M3_MAX)))
    return scale, bad


@triton.jit
def _quotient(hf, scale, nk, QUOT: tl.constexpr):
    """hf / scale (fp32, the IEEE quotient) with the factor nk (QUOT 1: -1, or -2**64 for a scale below 2**-64, which
    keeps the row's reciprocal finite; negated: Triton's -x is 0 - x, which loses -0)."""
    if QUOT:   # the row reciprocal and a Markstein correction (module docstring)
        sk = scale * -nk
        nr = tl.div_rn(tl.full(sk.shape, -1.0, tl.float32), sk)
        nhk = hf * nk
        q0 = nhk * nr
        return tl.fma(tl.fma(q0, sk, nhk), nr, q0)
    return tl.div_rn(hf, scale)


@triton.jit
def _quantise(hf, scale, bad, QUOT: tl.constexpr):
    """e4m3 bytes of hf / scale (IEEE quotient, RNE saturating), NaN (0x7F) where bad (all broadcast to hf)."""
    q = _quotient(hf, scale, tl.where(scale < TINY_SCALE, -LIFT, -1.0), QUOT)
    nan = tl.full(q.shape, NAN_BITS, tl.int32).to(tl.float32, bitcast=True)
    return tl.where(bad, nan, q).to(tl.float8e4nv)   # selected in fp32: +NaN converts to 0x7F, e4m3fn's NaN


@triton.jit
def _silu_c(g):
    """silu_c of bf16 g, in fp64, rounded to fp32 then bf16, returned as fp32."""
    g64 = g.to(tl.float32).to(tl.float64)
    return (g64 / (1.0 + tl.exp(-g64))).to(tl.float32).to(tl.bfloat16).to(tl.float32)


@triton.jit
def _silu_fast(gf):
    """TABLE 3's fp32 silu of fp32 gf (``tl.exp``: ex2.approx on sm_90; ``/``: the approximate division)."""
    return gf / (1.0 + tl.exp(-gf))


@triton.jit
def _bits16(v):
    """The bf16 rounding of fp32 v as its bit pattern in an int32 (0 .. 65535)."""
    return v.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF


@triton.jit
def _or(a, b):
    return a | b


@triton.jit
def _delta_table_kernel(t_ptr, v_ptr, BLOCK: tl.constexpr):
    """TABLE 3's codes of gates [pid * BLOCK, +BLOCK), packed 16 a word (gate bits & 15 selects the 2-bit field),
    and their silu_c values (bf16, indexed by the gate's bits)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    g = i.to(tl.int16).to(tl.bfloat16, bitcast=True)
    fast = _bits16(_silu_fast(g.to(tl.float32)))
    sc = _silu_c(g)
    tl.store(v_ptr + i, sc.to(tl.bfloat16))
    exact = _bits16(sc)
    d = exact - fast
    keep = (((i >> 7) & 0xFF) != 0xFF) & ((exact >> 15) == (fast >> 15))   # a finite gate, the sign kept
    code = tl.where(keep & (d == 0), 0, tl.where(keep & (d == 1), 1, tl.where(keep & (d == -1), 3, SLOW_CODE)))
    W: tl.constexpr = BLOCK // CODES_A_WORD
    lane = tl.arange(0, CODES_A_WORD)
    words = tl.reduce(tl.reshape(code, (W, CODES_A_WORD)) << (2 * lane[None, :]), 1, _or)
    tl.store(t_ptr + tl.program_id(0) * W + tl.arange(0, W), words)


@triton.jit
def _silu_table_kernel(t_ptr, TABLE: tl.constexpr, BLOCK: tl.constexpr):
    """The silu_c table of TABLE 1 (entry sign * 2048 + (exponent - 119) * 128 + mantissa) or 2 (entry = bits)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if TABLE == 1:
        bits = ((i >> 11) << 15) | (((i >> 7) & (TAB_NE - 1)) + TAB_E0) << 7 | (i & 0x7F)
    else:
        bits = i
    g = bits.to(tl.int16).to(tl.bfloat16, bitcast=True)
    tl.store(t_ptr + i, _silu_c(g).to(tl.bfloat16))


@triton.jit
def _silu_delta(g, t_ptr, v_ptr):
    """TABLE 3: silu_c of bf16 g as fp32, from the fp32 silu and the gate's code, or (code 2) the gate's value in
    the full table (module docstring)."""
    bits = g.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    word = tl.load(t_ptr + (bits >> 4), eviction_policy="evict_last")
    code = (word >> ((bits & (CODES_A_WORD - 1)) * 2)) & 3
    slow = code == SLOW_CODE
    exact = tl.load(v_ptr + bits, mask=slow, other=0.0, eviction_policy="evict_last").to(tl.float32)
    fixed = _bits16(_silu_fast(g.to(tl.float32))) + (code & 1) - (code & 2)
    return tl.where(slow, exact, fixed.to(tl.int16).to(tl.bfloat16, bitcast=True).to(tl.float32))


@triton.jit
def _silu_lookup(g, t_ptr, TABLE: tl.constexpr):
    """silu_c of bf16 g [ROWS, BLOCK] from the table at t_ptr, as fp32 (module docstring)."""
    bits = g.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    if TABLE == 2:
        return tl.load(t_ptr + bits, eviction_policy="evict_last").to(tl.float32)
    else:
        return _silu_compact(g, bits, t_ptr)


@triton.jit
def _silu_compact(g, bits, t_ptr):
    """TABLE 1's lookup of bf16 g [ROWS, BLOCK] (bits: its bit patterns), as fp32."""
    ROWS: tl.constexpr = g.shape[0]
    BLOCK: tl.constexpr = g.shape[1]
    e = (bits >> 7) & 0xFF
    inside = (e >= TAB_E0) & (e < TAB_E0 + TAB_NE)
    at = tl.where(inside, ((bits >> 15) << 11) | ((e - TAB_E0) << 7) | (bits & 0x7F), 0)
    tab = tl.load(t_ptr + tl.arange(0, 2 * TAB_NE * 128), eviction_policy="evict_last").to(tl.int16, bitcast=True)
    s = tl.reshape(tl.gather(tab, tl.reshape(at, (ROWS * BLOCK,)), 0), (ROWS, BLOCK)).to(tl.int32) & 0xFFFF
    half = (g.to(tl.float32) * 0.5).to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    big = tl.where(bits < 0x8000, bits, tl.where(e < 0xFF, NEG_ZERO_BITS, NAN16_BITS))
    out = tl.where(inside, s, tl.where(e < TAB_E0, half, big))
    return out.to(tl.int16).to(tl.bfloat16, bitcast=True).to(tl.float32)


@triton.jit
def _load_gu(x_ptr, rows64, rmask, n_cols, stride_x, OFF: tl.constexpr, BLOCK: tl.constexpr, EVICT: tl.constexpr):
    """gate and up of columns [OFF, OFF + BLOCK) of ROWS rows (0 outside)."""
    cols = OFF + tl.arange(0, BLOCK)
    m = rmask[:, None] & (cols[None, :] < n_cols)
    ptrs = x_ptr + rows64[:, None] * stride_x + cols[None, :]
    g = tl.load(ptrs, mask=m, other=0.0, eviction_policy=EVICT)
    u = tl.load(ptrs + n_cols, mask=m, other=0.0, eviction_policy=EVICT)
    return g, u


@triton.jit
def _h_only(g, u, t_ptr, v_ptr, TABLE: tl.constexpr):
    """h (bf16) of gate and up, any shape."""
    if TABLE == 3:
        s = _silu_delta(g, t_ptr, v_ptr)
    elif TABLE:
        s = _silu_lookup(g, t_ptr, TABLE)
    else:
        s = _silu_c(g)
    return (s * u.to(tl.float32)).to(tl.bfloat16)


@triton.jit
def _h_of(g, u, t_ptr, v_ptr, TABLE: tl.constexpr):
    """h (bf16) of a piece's gate and up, and its largest |h| bit pattern per row."""
    h = _h_only(g, u, t_ptr, v_ptr, TABLE)
    return h, tl.max(h.to(tl.int16, bitcast=True) & 0x7FFF, 1)


@triton.jit
def _piece(x_ptr, t_ptr, v_ptr, rows64, rmask, n_cols, stride_x, OFF: tl.constexpr, BLOCK: tl.constexpr,
           EVICT: tl.constexpr, TABLE: tl.constexpr):
    """h (bf16) of columns [OFF, OFF + BLOCK) of ROWS rows, and their largest |h| bit pattern per row."""
    g, u = _load_gu(x_ptr, rows64, rmask, n_cols, stride_x, OFF, BLOCK, EVICT)
    return _h_of(g, u, t_ptr, v_ptr, TABLE)


@triton.jit
def _put(q_ptr, h, scale, bad, rows64, rmask, n_cols, OFF: tl.constexpr, BLOCK: tl.constexpr, QUOT: tl.constexpr):
    cols = OFF + tl.arange(0, BLOCK)
    m = rmask[:, None] & (cols[None, :] < n_cols)
    q = _quantise(h.to(tl.float32), scale[:, None], bad[:, None], QUOT)
    tl.store(q_ptr + rows64[:, None] * n_cols + cols[None, :], q, mask=m)


@triton.jit
def _piece_fast(x_ptr, row64, n_cols, stride_x, OFF: tl.constexpr, BLOCK: tl.constexpr, SUB: tl.constexpr,
                MAXN: tl.constexpr, EVICT: tl.constexpr):
    """FAST: h (bf16 [BLOCK / SUB, SUB]) of columns [OFF, OFF + BLOCK) of one row and its largest |h| bit pattern
    (module docstring)."""
    NSUB: tl.constexpr = BLOCK // SUB
    sub = tl.arange(0, NSUB)
    lane = tl.arange(0, SUB)
    cols = OFF + sub[:, None] * SUB + lane[None, :]
    m = cols < n_cols
    ptrs = x_ptr + row64 * stride_x + cols
    g = tl.load(ptrs, mask=m, other=0.0, eviction_policy=EVICT)
    u = tl.load(ptrs + n_cols, mask=m, other=0.0, eviction_policy=EVICT)
    gf = g.to(tl.float32)
    sf = gf / (1.0 + tl.exp(-gf))
    dist = tl.abs((sf.to(tl.int32, bitcast=True) & 0xFFFF) - 0x8000).to(tl.float32)
    ag = tl.abs(gf)
    near = m & ((dist <= ag + NEAR_ULPS) | ~(ag < SAFE_G) | ((ag < TINY_G) & (ag != 0.0)))   # ~(<): NaN too
    flag = tl.max(near.to(tl.int32), 1)                                       # [NSUB] sub-rows to redo
    n_near = tl.sum(flag, 0)
    if n_near > MAXN:
        s = _silu_c(g)
    else:
        cs = tl.cumsum(flag, 0)                                               # inclusive: rank + 1 where flagged
        j = tl.arange(0, MAXN)
        which = tl.minimum(tl.sum((cs[None, :] <= j[:, None]).to(tl.int32), 1), NSUB - 1)   # j-th flagged sub-row
        gcols = OFF + which[:, None] * SUB + lane[None, :]
        gc = tl.load(x_ptr + row64 * stride_x + gcols, mask=gcols < n_cols, other=0.0)
        exact = _silu_c(gc)                                                   # [MAXN, SUB]
        rank = tl.maximum(tl.minimum(cs - 1, MAXN - 1), 0)
        at = tl.reshape(rank[:, None] * SUB + lane[None, :], (BLOCK,))
        back = tl.reshape(tl.gather(tl.reshape(exact, (MAXN * SUB,)), at, 0), (NSUB, SUB))   # 1-D: Triton 3.6
        # asserts compiling a 2-D gather at 16 warps
        s = tl.where(near, back, sf.to(tl.bfloat16).to(tl.float32))
    h = (s * u.to(tl.float32)).to(tl.bfloat16)
    return h, tl.max(tl.max(h.to(tl.int16, bitcast=True) & 0x7FFF, 1), 0)


@triton.jit
def _put_fast(q_ptr, h, scale, bad, row64, n_cols, OFF: tl.constexpr, BLOCK: tl.constexpr, SUB: tl.constexpr,
              QUOT: tl.constexpr):
    NSUB: tl.constexpr = BLOCK // SUB
    cols = OFF + tl.arange(0, NSUB)[:, None] * SUB + tl.arange(0, SUB)[None, :]
    q = _quantise(h.to(tl.float32), scale, bad, QUOT)
    tl.store(q_ptr + row64 * n_cols + cols, q, mask=cols < n_cols)


@triton.jit
def _swiglu_fp8_kernel(x_ptr, t_ptr, v_ptr, q_ptr, s_ptr, n_rows, n_cols, stride_x, BLOCK_A: tl.constexpr,
                       BLOCK_B: tl.constexpr, BLOCK_C: tl.constexpr, ROWS: tl.constexpr, EVICT: tl.constexpr,
                       QUOT: tl.constexpr, TABLE: tl.constexpr, RELOAD: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows < n_rows
    rows64 = rows.to(tl.int64)
    OB: tl.constexpr = BLOCK_A
    OC: tl.constexpr = BLOCK_A + BLOCK_B
    ha, abits = _piece(x_ptr, t_ptr, v_ptr, rows64, rmask, n_cols, stride_x, 0, BLOCK_A, EVICT, TABLE)
    if BLOCK_B > 0:
        hb, bb = _piece(x_ptr, t_ptr, v_ptr, rows64, rmask, n_cols, stride_x, OB, BLOCK_B, EVICT, TABLE)
        abits = tl.maximum(abits, bb)
    if BLOCK_C > 0:
        hc, bc = _piece(x_ptr, t_ptr, v_ptr, rows64, rmask, n_cols, stride_x, OC, BLOCK_C, EVICT, TABLE)
        abits = tl.maximum(abits, bc)
    scale, bad = _row_scale(abits)
    if RELOAD:   # h made again from x (cache hits) rather than held across the row's amax (module docstring)
        ha, _ = _piece(x_ptr, t_ptr, v_ptr, rows64, rmask, n_cols, stride_x, 0, BLOCK_A, "", TABLE)
    _put(q_ptr, ha, scale, bad, rows64, rmask, n_cols, 0, BLOCK_A, QUOT)
    if BLOCK_B > 0:
        if RELOAD:
            hb, _ = _piece(x_ptr, t_ptr, v_ptr, rows64, rmask, n_cols, stride_x, OB, BLOCK_B, "", TABLE)
        _put(q_ptr, hb, scale, bad, rows64, rmask, n_cols, OB, BLOCK_B, QUOT)
    if BLOCK_C > 0:
        if RELOAD:
            hc, _ = _piece(x_ptr, t_ptr, v_ptr, rows64, rmask, n_cols, stride_x, OC, BLOCK_C, "", TABLE)
        _put(q_ptr, hc, scale, bad, rows64, rmask, n_cols, OC, BLOCK_C, QUOT)
    tl.store(s_ptr + rows64, scale, mask=rmask)


@triton.jit
def _h_row(g, u, t_ptr, v_ptr, TABLE: tl.constexpr, PART: tl.constexpr):
    """FLAT: h (bf16, 1-D) of a piece of one row and its largest |h| bit pattern: one value (PART 0), or PART values,
    the largest of each of PART runs of the piece (with PART = num_warps a warp's own elements: no shared memory
    until the row's last max)."""
    h = _h_only(g, u, t_ptr, v_ptr, TABLE)
    a = h.to(tl.int16, bitcast=True) & 0x7FFF
    if PART:
        return h, tl.max(tl.reshape(a, (PART, a.shape[0] // PART)), 1)
    else:
        return h, tl.max(a, 0)


@triton.jit
def _load_row(x_ptr, row, ok, n_cols, stride_x, OFF: tl.constexpr, BLOCK: tl.constexpr, EVICT: tl.constexpr):
    """FLAT: gate and up of columns [OFF, OFF + BLOCK) of row (0 where not ok or outside), 1-D."""
    cols = OFF + tl.arange(0, BLOCK)
    m = (cols < n_cols) & ok
    ptrs = x_ptr + tl.cast(row, tl.int64) * stride_x + cols
    g = tl.load(ptrs, mask=m, other=0.0, eviction_policy=EVICT)
    u = tl.load(ptrs + n_cols, mask=m, other=0.0, eviction_policy=EVICT)
    return g, u


@triton.jit
def _put_row(q_ptr, h, scale, bad, row, n_cols, OFF: tl.constexpr, BLOCK: tl.constexpr, QUOT: tl.constexpr):
    """FLAT: a piece's bytes. scale and bad are the row's scalars: a non-finite row and a tiny one are branches of the
    program, not selects per element, and the common row's factor -1 is a constant, folded into the products."""
    cols = OFF + tl.arange(0, BLOCK)
    ptrs = q_ptr + tl.cast(row, tl.int64) * n_cols + cols
    if bad:   # +NaN converts to 0x7F, e4m3fn's NaN
        nan = tl.full([BLOCK], NAN_BITS, tl.int32).to(tl.float32, bitcast=True)
        tl.store(ptrs, nan.to(tl.float8e4nv), mask=cols < n_cols)
    elif scale < TINY_SCALE:
        tl.store(ptrs, _quotient(h.to(tl.float32), scale, -LIFT, QUOT).to(tl.float8e4nv), mask=cols < n_cols)
    else:
        tl.store(ptrs, _quotient(h.to(tl.float32), scale, -1.0, QUOT).to(tl.float8e4nv), mask=cols < n_cols)


@triton.jit
def _swiglu_fp8_row_kernel(x_ptr, t_ptr, v_ptr, q_ptr, s_ptr, n_rows, n_cols, stride_x, BLOCK_A: tl.constexpr,
                           BLOCK_B: tl.constexpr, BLOCK_C: tl.constexpr, EVICT: tl.constexpr, QUOT: tl.constexpr,
                           TABLE: tl.constexpr, PART: tl.constexpr):
    """FLAT: rows pid, pid + nprog, ... as 1-D pieces (the gathers, loads and stores in one layout); the next row's
    x is loaded before the current row's amax and quantiser (module docstring)."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    OB: tl.constexpr = BLOCK_A
    OC: tl.constexpr = BLOCK_A + BLOCK_B
    ga, ua = _load_row(x_ptr, pid, True, n_cols, stride_x, 0, BLOCK_A, EVICT)
    if BLOCK_B > 0:
        gb, ub = _load_row(x_ptr, pid, True, n_cols, stride_x, OB, BLOCK_B, EVICT)
    if BLOCK_C > 0:
        gc, uc = _load_row(x_ptr, pid, True, n_cols, stride_x, OC, BLOCK_C, EVICT)
    for row in range(pid, n_rows, nprog):
        nxt = row + nprog
        more = nxt < n_rows
        ha, abits = _h_row(ga, ua, t_ptr, v_ptr, TABLE, PART)
        ga, ua = _load_row(x_ptr, nxt, more, n_cols, stride_x, 0, BLOCK_A, EVICT)
        if BLOCK_B > 0:
            hb, bb = _h_row(gb, ub, t_ptr, v_ptr, TABLE, PART)
            abits = tl.maximum(abits, bb)
            gb, ub = _load_row(x_ptr, nxt, more, n_cols, stride_x, OB, BLOCK_B, EVICT)
        if BLOCK_C > 0:
            hc, bc = _h_row(gc, uc, t_ptr, v_ptr, TABLE, PART)
            abits = tl.maximum(abits, bc)
            gc, uc = _load_row(x_ptr, nxt, more, n_cols, stride_x, OC, BLOCK_C, EVICT)
        if PART:
            abits = tl.max(abits, 0)
        scale, bad = _row_scale(abits)
        _put_row(q_ptr, ha, scale, bad, row, n_cols, 0, BLOCK_A, QUOT)
        if BLOCK_B > 0:
            _put_row(q_ptr, hb, scale, bad, row, n_cols, OB, BLOCK_B, QUOT)
        if BLOCK_C > 0:
            _put_row(q_ptr, hc, scale, bad, row, n_cols, OC, BLOCK_C, QUOT)
        tl.store(s_ptr + row, scale)


@triton.jit
def _swiglu_fp8_fast_kernel(x_ptr, q_ptr, s_ptr, n_cols, stride_x, BLOCK_A: tl.constexpr, BLOCK_B: tl.constexpr,
                            BLOCK_C: tl.constexpr, SUB: tl.constexpr, MAXN: tl.constexpr, EVICT: tl.constexpr,
                            QUOT: tl.constexpr):
    row64 = tl.program_id(0).to(tl.int64)
    ha, abits = _piece_fast(x_ptr, row64, n_cols, stride_x, 0, BLOCK_A, SUB, MAXN, EVICT)
    if BLOCK_B > 0:
        hb, bb = _piece_fast(x_ptr, row64, n_cols, stride_x, BLOCK_A, BLOCK_B, SUB, MAXN, EVICT)
        abits = tl.maximum(abits, bb)
    if BLOCK_C > 0:
        hc, bc = _piece_fast(x_ptr, row64, n_cols, stride_x, BLOCK_A + BLOCK_B, BLOCK_C, SUB, MAXN, EVICT)
        abits = tl.maximum(abits, bc)
    scale, bad = _row_scale(abits)
    _put_fast(q_ptr, ha, scale, bad, row64, n_cols, 0, BLOCK_A, SUB, QUOT)
    if BLOCK_B > 0:
        _put_fast(q_ptr, hb, scale, bad, row64, n_cols, BLOCK_A, BLOCK_B, SUB, QUOT)
    if BLOCK_C > 0:
        _put_fast(q_ptr, hc, scale, bad, row64, n_cols, BLOCK_A + BLOCK_B, BLOCK_C, SUB, QUOT)
    tl.store(s_ptr + row64, scale)


def silu_table(TABLE, x):
    """TABLE's tables (module docstring), built in K.scratch on x's device by a first launch: (the table, TABLE 3's
    full silu_c table or x); TABLE 0: (x, x), read by no kernel."""
    if not TABLE:
        return x, x
    if TABLE == 3:
        codes = K.scratch((TAB_SIZES[3],), dtype=K.int32, device=x.device)
        values = K.scratch((65536,), dtype=K.bfloat16, device=x.device)
        _delta_table_kernel[(65536 // TAB_BLOCK,)](codes, values, BLOCK=TAB_BLOCK, num_warps=4)
        return codes, values
    table = K.scratch((TAB_SIZES[TABLE],), dtype=K.bfloat16, device=x.device)
    _silu_table_kernel[(TAB_SIZES[TABLE] // TAB_BLOCK,)](table, TABLE=TABLE, BLOCK=TAB_BLOCK, num_warps=4)
    return table, x


def launch(x, BLOCK_A=8192, BLOCK_B=4096, BLOCK_C=2048, ROWS=1, num_warps=16, EVICT="", FAST=0, SUB=16, MAXN=16,
           QUOT=0, TABLE=0, RELOAD=0, FLAT=0, PERSIST=0, PART=0, MAXNREG=0):
    n_rows = x.shape[0]
    n_cols = x.shape[1] // 2
    if n_cols > BLOCK_A + BLOCK_B + BLOCK_C:
        raise ValueError(f"row of {n_cols} columns does not fit BLOCK_A + BLOCK_B + BLOCK_C")
    h8 = K.empty((n_rows, n_cols), dtype=K.float8_e4m3fn, device=x.device)
    h_scale = K.empty((n_rows,), dtype=K.float32, device=x.device)
    if FAST:
        if ROWS != 1:
            raise ValueError("FAST takes one row a program (ROWS = 1)")
        if TABLE or RELOAD or FLAT or PERSIST:
            raise ValueError("TABLE, RELOAD, FLAT and PERSIST take FAST 0 (FAST has its own kernel)")
        if n_rows > 0:
            _swiglu_fp8_fast_kernel[(n_rows,)](x, h8, h_scale, n_cols, x.stride(0), BLOCK_A=BLOCK_A, BLOCK_B=BLOCK_B,
                                               BLOCK_C=BLOCK_C, SUB=SUB, MAXN=MAXN, EVICT=EVICT, QUOT=QUOT,
                                               num_warps=num_warps)
        return h8, h_scale
    if FLAT and (RELOAD or ROWS != 1 or TABLE == 1):
        raise ValueError("FLAT takes one row a step (ROWS 1), holds h across the amax (RELOAD 0) and gathers from "
                         "global memory (TABLE 0, 2 or 3)")
    if (PERSIST or PART or MAXNREG) and not FLAT:
        raise ValueError("PERSIST, PART and MAXNREG take FLAT 1")
    table, values = silu_table(TABLE, x)
    if FLAT:
        if n_rows > 0:
            _swiglu_fp8_row_kernel[(min(n_rows, PERSIST) if PERSIST else n_rows,)](
                x, table, values, h8, h_scale, n_rows, n_cols, x.stride(0), BLOCK_A=BLOCK_A, BLOCK_B=BLOCK_B,
                BLOCK_C=BLOCK_C, EVICT=EVICT, QUOT=QUOT, TABLE=TABLE, PART=num_warps if PART else 0,
                num_warps=num_warps, maxnreg=MAXNREG or None)
        return h8, h_scale
    _swiglu_fp8_kernel[(triton.cdiv(n_rows, ROWS),)](x, table, values, h8, h_scale, n_rows, n_cols, x.stride(0),
                                                     BLOCK_A=BLOCK_A, BLOCK_B=BLOCK_B, BLOCK_C=BLOCK_C, ROWS=ROWS,
                                                     EVICT=EVICT, QUOT=QUOT, TABLE=TABLE, RELOAD=RELOAD,
                                                     num_warps=num_warps)
    return h8, h_scale

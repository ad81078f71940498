"""CuTe DSL template for ``modulate_fp8`` (rsi/refs/modulate_fp8.py): a row a CTA of THREADS threads.

The same computation as rsi/templates/modulate_fp8_warp.py (the canonical pairwise tree of the squares over the row
zero-padded to a power of two, folding halves; ``rstd = 1 / sqrt(ss / H + eps)`` with IEEE divisions and square
root; modulate's eager roundings; the per-row e4m3 quantiser with the Markstein quotient of
rsi/refs/fp8_quotient.py), with the row spread over a CTA instead of one warp: the Triton row templates hold the row
in one warp's registers (255 a thread, 8 programs an SM: issue and load latency bound, docs/kernels.md), and
Triton 3.6 splits a row over warps only with a barrier a tree level. Here the layout is explicit and there are two
barriers a row.

Layout. x is cut into 16-byte vectors of VEC = 8 columns; thread t of the CTA holds vectors t, t + THREADS, ...
(CHUNKS of them, those past the row zeros), so column ``i = c THREADS VEC + t VEC + v`` (chunk c, thread t, element
v). CHUNKS THREADS VEC is a power of two at or above H, and padding with more zeros adds only exact ``v + 0``
levels, so the tree over it is the canonical one. Its levels fold the highest index bits first: the chunk bits in
the thread's registers, then the warp bits (each thread's VEC partial sums through shared memory, one barrier, every
thread folding the WARPS values of its lane in the same order), then the lane bits (butterfly shuffles: each lane
gets ``a + b`` with the same two operands as the tree's ``v[i] + v[i + n/2]``), then the element bits in registers.
Every thread ends with the row's ss. The row's amax is a maximum of h's bf16 bit patterns with the sign cleared (NaN
> Inf > every finite value: a non-finite row is found by its bits), by shuffles and one more barrier. A non-finite
row's scale is NaN and the quotient of every element by it is NaN, which converts to e4m3fn's NaN byte 0x7F; a
zero row's scale is 1. The bytes go out as 8-byte stores, the scale by thread 0.
The squares are exact in fp32 (so a contraction into fma cannot change them), and modulate's products are rounded
to bf16 between the operations (no contraction can form across a rounding).
x keeps its bf16 values in registers from the load to h (CHUNKS x VEC / 2 32-bit registers), h likewise until the
bytes: nothing is read twice. Loads of w and the row's AdaLN scale and shift rows are vectors where their strides
allow it (CuTe emits narrower accesses where a layout is not 16-byte aligned: the op group's layouts 1 and 2).
modulate rounds ``n * (1 + scale)`` to bf16 before the shift is added: LLVM narrows the fp32 form to bf16x2 products
and sums (exact), and ptxas would contract the product with the shift's add into one rounding; the product's one
use is an add of ``z = -(0 H)`` (-0, from the run-time H: nothing the compiler can fold), which keeps them apart
(docs/cute.md; tests/unit/test_cute_compile.py checks the SASS). H comes as a run-time number (``n_cols``, a
cutlass.Float32 parameter: the static shape with eps added would be a shape with a constant folded in).
sm_90a build at 128 threads and H3's width: 86 registers, no stack, two barriers.
Config: THREADS (a multiple of 32), CHUNKS (a power of two: the vectors a thread holds; H must be at most CHUNKS x
THREADS x VEC), VEC 8 (a 16-byte vector; the element levels assume it). H100 run 88 h (probe 88, outside the
judge): bitwise at every layout and special case; 128 threads 1.15x / 1.13x / 1.19x the bf16 modulate kernel at
stage1 / per_rank / full, the Triton template's heuristic 0.93x / 0.90x / 1.04x.
"""

import cutlass
from cutlass import cute

from rsi import kernel as K

EPS = 1e-5
E4M3_MAX = 448.0
NONFINITE_BITS = 0x7F80                  # bf16 bits of +Inf: |h| bits at or above it are Inf or NaN
NAN_BITS = 0x7FC00000                    # fp32 NaN: a non-finite row's scale
TINY_SCALE = 5.421010862427522e-20       # 2^-64: below it the Markstein quotient lifts the scale by 2^64
LIFT = 1.8446744073709552e19             # 2^64


@cute.jit
def _sq(xv: cute.TensorSSA):
    """fp32 squares of a bf16 vector (exact)."""
    xf = xv.to(cutlass.Float32)
    return xf * xf


@cute.jit
def _row_ss(xs: cute.Tensor, red: cute.Tensor, THREADS: cutlass.Constexpr, CHUNKS: cutlass.Constexpr,
            VEC: cutlass.Constexpr):
    """The row's canonical sum of squares (module docstring) from the thread's CHUNKS vectors xs [VEC, CHUNKS]
    (zeros past the row), in every thread; red is shared memory [VEC, THREADS] fp32."""
    tidx, _, _ = cute.arch.thread_idx()
    lane = tidx % 32
    half = CHUNKS // 2
    acc = cute.make_rmem_tensor((VEC, CHUNKS), cutlass.Float32)
    if cutlass.const_expr(CHUNKS == 1):
        acc[(None, 0)].store(_sq(xs[(None, 0)].load()))
    else:   # the first level made from the squares: chunk c + chunk c + CHUNKS / 2
        for c in cutlass.range_constexpr(half):
            acc[(None, c)].store(_sq(xs[(None, c)].load()) + _sq(xs[(None, c + half)].load()))
    for lvl in cutlass.range_constexpr(1, 5):   # the other chunk levels (CHUNKS up to 16)
        for c in cutlass.range_constexpr(CHUNKS >> (lvl + 1)):
            acc[(None, c)].store(acc[(None, c)].load() + acc[(None, c + (CHUNKS >> (lvl + 1)))].load())
    for j in cutlass.range_constexpr(VEC):      # the warp levels: shared memory, then WARPS values a lane
        red[(j, tidx)] = acc[(j, 0)]
    cute.arch.sync_threads()
    part = cute.make_rmem_tensor((VEC, THREADS // 32), cutlass.Float32)
    for j in cutlass.range_constexpr(VEC):
        for k in cutlass.range_constexpr(THREADS // 32):
            part[(j, k)] = red[(j, lane + 32 * k)]
    for lvl in cutlass.range_constexpr(5):      # WARPS up to 32: halves folded, highest warp bit first
        for k in cutlass.range_constexpr((THREADS // 32) >> (lvl + 1)):
            for j in cutlass.range_constexpr(VEC):
                part[(j, k)] = part[(j, k)] + part[(j, k + ((THREADS // 32) >> (lvl + 1)))]
    for i in cutlass.range_constexpr(5):        # the lane levels: 16, 8, 4, 2, 1
        for j in cutlass.range_constexpr(VEC):
            part[(j, 0)] = part[(j, 0)] + cute.arch.shuffle_sync_bfly(part[(j, 0)], offset=16 >> i)
    for lvl in cutlass.range_constexpr(3):      # the element levels: 4, 2, 1
        for j in cutlass.range_constexpr(VEC >> (lvl + 1)):
            part[(j, 0)] = part[(j, 0)] + part[(j + (VEC >> (lvl + 1)), 0)]
    return part[(0, 0)]


@cute.jit
def _row_scale(ab: cute.Tensor, am: cute.Tensor, sc: cute.Tensor, THREADS: cutlass.Constexpr):
    """sc = (scale, nk, sk, nr) of the row from the thread's largest |h| bit pattern ab[0]: the CTA's maximum
    (shuffles, then shared memory am [WARPS]), scale = NaN for a non-finite row, 1 for a zero row, else amax / 448
    (IEEE);
    nk = -2^64 where the scale is below 2^-64 (else -1), sk = scale * -nk, nr = -1 / sk (fp8_quotient)."""
    tidx, _, _ = cute.arch.thread_idx()
    abits = ab[0]
    for i in cutlass.range_constexpr(5):
        abits = cutlass.max(abits, cute.arch.shuffle_sync_bfly(abits, offset=16 >> i))
    if tidx % 32 == 0:
        am[tidx // 32] = abits
    cute.arch.sync_threads()
    for k in cutlass.range_constexpr(THREADS // 32):
        abits = cutlass.max(abits, am[k])
    sc[0] = cutlass.Int32(NAN_BITS).bitcast(cutlass.Float32)
    if abits < NONFINITE_BITS:
        sc[0] = 1.0
        amax = (abits << 16).bitcast(cutlass.Float32)
        if amax > 0.0:
            sc[0] = amax / E4M3_MAX
    sc[1] = -1.0
    if sc[0] < TINY_SCALE:
        sc[1] = -LIFT
    sc[2] = sc[0] * -sc[1]
    sc[3] = -1.0 / sc[2]


@cute.jit
def _put_bytes(xs: cute.Tensor, gq: cute.Tensor, sc: cute.Tensor, row: cutlass.Int32, n_vec,
               THREADS: cutlass.Constexpr, CHUNKS: cutlass.Constexpr, VEC: cutlass.Constexpr,
               LIFTED: cutlass.Constexpr):
    """The row's e4m3 bytes from h (xs) and sc = (scale, nk, sk, nr) (_row_scale), vector by vector. LIFTED (a scale
    below 2^-64): nhk = h nk, q0 = nhk nr, q = fma(fma(q0, sk, nhk), nr, q0); else nk = -1 folded into the products
    (also a NaN scale: every quotient NaN, byte 0x7F): q0 = h r, q = fma(-fma(q0, s, -h), r, q0) with r = -nr."""
    tidx, _, _ = cute.arch.thread_idx()
    q = cute.make_rmem_tensor((VEC,), cutlass.Float32)
    r = -sc[3]
    for c in cutlass.range_constexpr(CHUNKS):
        if c * THREADS + tidx < n_vec:
            hf = xs[(None, c)].load().to(cutlass.Float32)
            for j in cutlass.range_constexpr(VEC):
                if cutlass.const_expr(LIFTED):
                    nhk = hf[j] * sc[1]
                    q0 = nhk * sc[3]
                    q[j] = cute.math.fma(cute.math.fma(q0, sc[2], nhk), sc[3], q0)
                else:
                    q0 = hf[j] * r
                    q[j] = cute.math.fma(-cute.math.fma(q0, sc[0], -hf[j]), r, q0)
            gq[(None, (row, c * THREADS + tidx))].store(q.load().to(cutlass.Float8E4M3FN))


@cute.kernel
def _modulate_fp8_kernel(gx: cute.Tensor, gw: cute.Tensor, gsh: cute.Tensor, gsc: cute.Tensor, idx: cute.Tensor,
                         gq: cute.Tensor, qscale: cute.Tensor, n_cols: cutlass.Float32, THREADS: cutlass.Constexpr,
                         CHUNKS: cutlass.Constexpr, VEC: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    n_vec = gx.shape[1][1]
    t = cutlass.Int32(idx[row])
    smem = cutlass.utils.SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout((VEC, THREADS), stride=(THREADS, 1)), 16)
    am = smem.allocate_tensor(cutlass.Int32, cute.make_layout(THREADS // 32), 16)
    xs = cute.make_rmem_tensor((VEC, CHUNKS), cutlass.BFloat16)
    for c in cutlass.range_constexpr(CHUNKS):
        xs[(None, c)].fill(0.0)
        if c * THREADS + tidx < n_vec:
            xs[(None, c)].store(gx[(None, (row, c * THREADS + tidx))].load())
    ss = _row_ss(xs, red, THREADS, CHUNKS, VEC)
    rstd = 1.0 / cute.math.sqrt(ss / n_cols + EPS)
    # z = -(0 H) is -0 (H is a positive run-time number, which the compiler cannot fold): p = bf16(n s1) + z is
    # bf16(n s1) exactly, whether or not ptxas contracts the two into one fma, and the product's one use is that
    # add, so it is not contracted with the + shift (two roundings, not one)
    z = cute.full((VEC,), -(0.0 * n_cols), cutlass.Float32).to(cutlass.BFloat16)
    acc = cute.make_rmem_tensor((VEC,), cutlass.Uint16)
    acc.fill(0)
    for c in cutlass.range_constexpr(CHUNKS):   # h over x's registers, and the thread's largest |h| bits
        if c * THREADS + tidx < n_vec:
            v = c * THREADS + tidx
            xf = xs[(None, c)].load().to(cutlass.Float32)
            n = ((xf * rstd) * gw[(None, v)].load().reshape((VEC,)).to(cutlass.Float32)).to(cutlass.BFloat16)
            s1 = (1.0 + gsc[(None, (t, v))].load().reshape((VEC,)).to(cutlass.Float32)).to(cutlass.BFloat16)
            p = (n.to(cutlass.Float32) * s1.to(cutlass.Float32)).to(cutlass.BFloat16)
            p = (p.to(cutlass.Float32) + z.to(cutlass.Float32)).to(cutlass.BFloat16)
            h = (p.to(cutlass.Float32) + gsh[(None, (t, v))].load().reshape((VEC,)).to(cutlass.Float32)).to(
                cutlass.BFloat16)
            xs[(None, c)].store(h)
            bits = h.bitcast(cutlass.Uint16)
            bits = bits + bits   # |h|'s bits, doubled: the sign shifted out
            acc.store(cute.where(bits > acc.load(), bits, acc.load()))
    ab = cute.make_rmem_tensor((1,), cutlass.Int32)
    ab[0] = cutlass.Int32(acc[0])
    for j in cutlass.range_constexpr(1, VEC):
        ab[0] = cutlass.max(ab[0], cutlass.Int32(acc[j]))
    ab[0] = ab[0] >> 1
    sc = cute.make_rmem_tensor((4,), cutlass.Float32)
    _row_scale(ab, am, sc, THREADS)
    if sc[0] < TINY_SCALE:   # a row branch: the lifted quotient, or nk = -1 folded into the products
        _put_bytes(xs, gq, sc, row, n_vec, THREADS, CHUNKS, VEC, True)
    else:
        _put_bytes(xs, gq, sc, row, n_vec, THREADS, CHUNKS, VEC, False)
    if tidx == 0:
        qscale[row] = sc[0]


@cute.jit
def _modulate_fp8_host(x: cute.Tensor, w: cute.Tensor, shift: cute.Tensor, scale: cute.Tensor, idx: cute.Tensor,
                       q: cute.Tensor, qscale: cute.Tensor, n_cols: cutlass.Float32, stream,
                       THREADS: cutlass.Constexpr, CHUNKS: cutlass.Constexpr, VEC: cutlass.Constexpr):
    gx = cute.zipped_divide(x, (1, VEC))        # ((1, VEC), (R, H / VEC))
    gw = cute.zipped_divide(w, (VEC,))
    gsh = cute.zipped_divide(shift, (1, VEC))
    gsc = cute.zipped_divide(scale, (1, VEC))
    gq = cute.zipped_divide(q, (1, VEC))
    _modulate_fp8_kernel(gx, gw, gsh, gsc, idx, gq, qscale, n_cols, THREADS, CHUNKS, VEC).launch(
        grid=(x.shape[0], 1, 1), block=(THREADS, 1, 1), stream=stream)


def launch(x, w, shift, scale, idx, THREADS=128, CHUNKS=8, VEC=8):
    n_rows, n_cols = x.shape
    if n_cols == 0 or n_cols % VEC != 0:
        raise ValueError(f"H = {n_cols} is not a positive multiple of the vector width {VEC}")
    if n_cols > CHUNKS * THREADS * VEC:
        raise ValueError(f"H = {n_cols} is over CHUNKS x THREADS x VEC = {CHUNKS * THREADS * VEC} columns")
    h8 = K.empty((n_rows, n_cols), dtype=K.float8_e4m3fn, device=x.device)
    h_scale = K.empty((n_rows,), dtype=K.float32, device=x.device)
    if n_rows > 0:
        K.cute_launch(_modulate_fp8_host, x, w, shift, scale, idx, h8, h_scale, float(n_cols), THREADS=THREADS,
                      CHUNKS=CHUNKS, VEC=VEC)
    return h8, h_scale

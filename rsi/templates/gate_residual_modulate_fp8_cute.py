"""CuTe DSL template for ``gate_residual_modulate_fp8`` (rsi/refs/gate_residual_modulate_fp8.py): a row a CTA.

rsi/templates/modulate_fp8_cute.py with the residual first: ``r = bf16(res + bf16(gate[idx] * branch))`` (the
model's eager roundings), stored, then modulate_fp8 of r (the canonical tree of r's squares, the IEEE divisions
and square root, modulate's roundings, the per-row e4m3 quantiser), bitwise. Thread t of the CTA holds the row's
16-byte vectors t, t + THREADS, ... (CHUNKS of them): r is made from res and branch as they are loaded, stored, and
kept in bf16 for the squares and h; h is kept until the bytes. The tree, the amax, the quotient and the row's
branches are modulate_fp8_cute's (its docstring and docs/cute.md).
Both bf16 products (``gate * branch`` before ``+ res``, ``n * (1 + scale)`` before ``+ shift``) are followed by an
add of ``z = -(0 H)`` (-0, from the run-time H), so that ptxas cannot contract either with the add after it into
one rounding (tests/unit/test_cute_compile.py checks the SASS).
Config: THREADS (a multiple of 32), CHUNKS (a power of two: the vectors a thread holds; H at most CHUNKS x THREADS x
VEC), VEC 8. sm_90a build at 128 threads: 90 registers, no stack. H100 run 89 h (probe 89, outside the judge): bitwise
at every layout and special case; 256 threads 1.009x / 1.008x / 0.903x the bf16 gate_residual_modulate kernel at
stage1 / per_rank / full, 128 threads 0.979x / 0.979x / 0.913x (the Triton heuristic 0.901x / 0.913x / 0.959x).
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
def _residual_fp8_kernel(gres: cute.Tensor, ggate: cute.Tensor, gbr: cute.Tensor, gw: cute.Tensor, gsh: cute.Tensor,
                         gsc: cute.Tensor, idx: cute.Tensor, gr: cute.Tensor, gq: cute.Tensor, qscale: cute.Tensor,
                         n_cols: cutlass.Float32, THREADS: cutlass.Constexpr, CHUNKS: cutlass.Constexpr,
                         VEC: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    n_vec = gres.shape[1][1]
    t = cutlass.Int32(idx[row])
    smem = cutlass.utils.SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout((VEC, THREADS), stride=(THREADS, 1)), 16)
    am = smem.allocate_tensor(cutlass.Int32, cute.make_layout(THREADS // 32), 16)
    # z = -(0 H) is -0 (H is a positive run-time number, which the compiler cannot fold): bf16(a b) + z is bf16(a b)
    # exactly, whether or not ptxas contracts the two into one fma, and the product's one use is that add, so it is
    # not contracted with the add after it (two roundings, not one)
    z = cute.full((VEC,), -(0.0 * n_cols), cutlass.Float32).to(cutlass.BFloat16)
    xs = cute.make_rmem_tensor((VEC, CHUNKS), cutlass.BFloat16)
    for c in cutlass.range_constexpr(CHUNKS):   # r = bf16(res + bf16(gate branch)), stored and kept
        xs[(None, c)].fill(0.0)
        if c * THREADS + tidx < n_vec:
            v = c * THREADS + tidx
            gb = (ggate[(None, (t, v))].load().reshape((VEC,)).to(cutlass.Float32)
                  * gbr[(None, (row, v))].load().reshape((VEC,)).to(cutlass.Float32)).to(cutlass.BFloat16)
            gb = (gb.to(cutlass.Float32) + z.to(cutlass.Float32)).to(cutlass.BFloat16)
            r = (gres[(None, (row, v))].load().reshape((VEC,)).to(cutlass.Float32) + gb.to(cutlass.Float32)).to(
                cutlass.BFloat16)
            gr[(None, (row, v))].store(r)
            xs[(None, c)].store(r)
    ss = _row_ss(xs, red, THREADS, CHUNKS, VEC)
    rstd = 1.0 / cute.math.sqrt(ss / n_cols + EPS)
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
def _residual_fp8_host(res: cute.Tensor, gate: cute.Tensor, branch: cute.Tensor, w: cute.Tensor, shift: cute.Tensor,
                       scale: cute.Tensor, idx: cute.Tensor, r: cute.Tensor, q: cute.Tensor, qscale: cute.Tensor,
                       n_cols: cutlass.Float32, stream, THREADS: cutlass.Constexpr, CHUNKS: cutlass.Constexpr,
                       VEC: cutlass.Constexpr):
    _residual_fp8_kernel(cute.zipped_divide(res, (1, VEC)), cute.zipped_divide(gate, (1, VEC)),
                         cute.zipped_divide(branch, (1, VEC)), cute.zipped_divide(w, (VEC,)),
                         cute.zipped_divide(shift, (1, VEC)), cute.zipped_divide(scale, (1, VEC)), idx,
                         cute.zipped_divide(r, (1, VEC)), cute.zipped_divide(q, (1, VEC)), qscale, n_cols, THREADS,
                         CHUNKS, VEC).launch(grid=(res.shape[0], 1, 1), block=(THREADS, 1, 1), stream=stream)


def launch(res, gate, branch, w, shift, scale, idx, THREADS=128, CHUNKS=8, VEC=8):
    n_rows, n_cols = res.shape
    if n_cols == 0 or n_cols % VEC != 0:
        raise ValueError(f"H = {n_cols} is not a positive multiple of the vector width {VEC}")
    if n_cols > CHUNKS * THREADS * VEC:
        raise ValueError(f"H = {n_cols} is over CHUNKS x THREADS x VEC = {CHUNKS * THREADS * VEC} columns")
    r = K.empty((n_rows, n_cols), dtype=res.dtype, device=res.device)
    h8 = K.empty((n_rows, n_cols), dtype=K.float8_e4m3fn, device=res.device)
    h_scale = K.empty((n_rows,), dtype=K.float32, device=res.device)
    if n_rows > 0:
        K.cute_launch(_residual_fp8_host, res, gate, branch, w, shift, scale, idx, r, h8, h_scale, float(n_cols),
                      THREADS=THREADS, CHUNKS=CHUNKS, VEC=VEC)
    return r, h8, h_scale

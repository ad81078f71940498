"""CuTe DSL template for ``attention_fp8`` (rsi/refs/attention_fp8.py) on Hopper: FP8 FlashAttention forward.

q, k, v [S, H, 128] bf16 are quantised to e4m3 with one scale per (tensor, head), scale = amax / 448 over all S rows
(1 for an all-zero head, NaN for a head holding a NaN or Inf), then attention runs on the e4m3 values with the
scales folded in: s = (q8 . k8) q_scale k_scale / sqrt(128), out = (sum_j p_j v8_j) v_scale / l. Five launches into
workspace (``K.scratch``), in stream order:

1. ``_amax_kernel`` (once per tensor), grid (32, H): CTA (j, h) takes rows j, j + 32, ... of head h, a thread a
   column; the max of |x| runs with ``fmax`` (which skips NaN), and beside it a sum of (|x| - |x|), 0 for finite
   values and NaN once a NaN or Inf is seen; warp shuffles, then shared memory across the 4 warps; the partial
   ``max + sum`` (NaN for a non-finite head) goes to part[t, h, j].
2. ``_quant_rows_kernel`` for q and for k, grid (cdiv(S, 64), H), a thread a column, rows grid-strided: each warp
   reduces its head's 32 partials by shuffles to the scale (IEEE ``/``: ``amax / 448``), and writes
   ``e4m3(x / scale)`` (IEEE quotient, ``cvt.rn.satfinite.e4m3x2.f32``: the reference's bits) to q8 / k8, contiguous
   [S, H, 128]; CTA (0, h) also stores the scale.
3. ``_quant_vt_kernel`` for v, grid (cdiv(S + 63, 128), H, n_docs): V transposed, vt [H, 128, n_pad], keys along the
   fast axis (Hopper's fp8 wgmma takes its B operand K-major only), each document's keys from padded position
   P_d = roundup(k0, 32) + 32 d (a multiple of 32, so a 32-key group of the kernel's blocks starts on one), the
   positions between documents and past the last written as zeros (the kernel's last block of a document reads past
   its keys: p = 0 there, and 0 * NaN from uninitialised workspace would not be 0). Within each 32-key group the
   keys are permuted (below). A CTA transposes a 128-key tile through shared memory (rows padded to 132 bytes: no
   bank conflicts) so that both its loads and stores are coalesced.
4. ``_attention_kernel``: attention_cute's warp-specialised structure (a TMA producer warpgroup, two consumer
   warpgroups of 64 query rows, K and V^T through STAGES-deep mbarrier pipelines, PINGPONG and OVERLAP as there)
   with e4m3 wgmma: S = Q K^T by m64 x BN x k32 (both K-major from shared memory), O += P V by m64 x 128 x k32 with
   P (e4m3) from registers and vt's tile (128 x BN, K-major) from shared memory. Scores are scaled by
   c = max(q_scale k_scale log2(e) / sqrt(128), 2^-126) (the floor keeps -inf * c at -inf when the scales
   underflow: bf16-subnormal inputs give uniform attention, as in the reference); P <= 1 after the running max.
   The e4m3 A operand in registers holds, per thread t of a quad, the keys k = 4 t + (0..3) and 16 + 4 t + (0..3)
   of each 32-key group; the fp32 accumulator holds keys 2 t + (0, 1) + 8 g (g = 0..3). Rather than shuffling P
   between threads (FA3), the accumulator goes over element for element in the order
   ((key pair, group parity), row half, group half) and vt's columns hold the keys in the matching permutation:
   column a of a group holds key 8 (2 (a // 16) + (a % 4) // 2) + 2 ((a % 16) // 4) + a % 2.
   Keys of the last (partial) block past the document's end score -inf, and vt's columns there are zeros or another
   document's finite values (a non-finite head is NaN throughout, as its outputs are); out = acc v_scale / l.
QVEC 1 (eighteenth session) replaces passes 1-3 by vectorised ones with static layouts (``K.cute_launch``: the
compiler emits 16-byte loads where the layout's strides and offset allow them, narrower ones where they do not): a
thread takes one 8-value vector of a head row (16 of them a row, 8 rows a 128-thread step) in the amax and row
passes; the row and V^T passes divide by the head's scale through its reciprocal and one Markstein correction
(``_quotient``: rsi/refs/fp8_quotient.py proves the same e4m3 byte as the IEEE quotient for every bf16 |x| <= amax,
the scale lifted by 2^64 below 2^-64); the V^T pass goes through registers, not shared memory: thread (c, o) of 256
loads dims 8 c .. 8 c + 7 of the 8 keys that vt's columns 8 o .. 8 o + 7 of a 128-key tile hold and stores each dim's
8 columns as one 8-byte word (a warp's store: two 128-byte row pieces). QVEC 2: the same, the V^T pass's 8 loads a
thread issued before its quotients. QVEC 3: QVEC 2 with the amax and row passes loading 8 vectors a thread
(predicated) before using any. QVEC 0: the passes above (dynamic layouts, one compile for every shape). The
vectorised passes index with 32-bit offsets: an input reaching 2**31 - 1 elements or more takes the scalar ones.
EMU (0, 2, 3, 4): of every 8 score columns, EMU exponentiated by _exp2_fma on the FMA / ALU pipes instead of the
MUFU (H200 probe 72: EMU 2 1.4% faster at h3_full, 3 and 4 slower).
SINK 1: the row sums stored to shared memory before OVERLAP's wait for the PV product (_sink_row_sums), which keeps
ptxas from scheduling the softmax after that wait (H100 run 76 b: 1.02-1.06x SINK 0 at h3_full; docs/cute.md).
With two consumer warpgroups the producer keeps 40 registers a thread and the consumers take 232. The output is
contiguous [S, H, 128]; offsets are 32-bit (S H 128 < 2**31 at every shape of the op group). DYNAMIC 0: the
attention kernel compiles per shape (static layouts), 1: once per dtype / alignment pattern
(K.cute_launch_dynamic); the quantisers always compile with dynamic layouts.
Limits: head dim 128 only (the op's shapes); workspace 3 S H 128 bytes + 32 (n_docs + 1) H 128 + 128 H 4.
Written in the seventeenth session from attention_cute (same structure; facts on the e4m3 wgmma register layouts
from CUTLASS's ALayout_64x32 for 8-bit types, checked here against the DSL's tv_layout_A, and FA3's paper for the
FP8 forward; no code copied). Config: BM (128: two consumer warpgroups), BN (key block, a multiple of 64: V^T's
rows take the 128-byte swizzle where BN is a multiple of 128, else the 64-byte one), STAGES, PINGPONG, OVERLAP,
DYNAMIC, QVEC, EMU, SINK.
H200 run 69 (its first GPU run): q8, k8 and vt equal to the reference's quantiser byte for byte at every probed
shape, layout and special case, the scales equal in value; the judge accepted it (rel-L2 0.054 against the exact op where the reference
has 0.047); at h3_full 1.443x SDPA cuDNN with PINGPONG 1 and 1.038x cuDNN's FP8 attention (inside the A/A band: not
promoted); the quantisation passes take 3.74 ms of its 50.56 ms there (probe 69; docs/results.md). H200 run 71:
BN 192 with QVEC 1 promoted (attention_fp8_cute-bd8d60a0d1db, 1.579x SDPA cuDNN at h3_full, 1.129x cuDNN FP8).
"""

import cutlass
from cutlass import cute

from rsi import kernel as K

HEAD_DIM = 128
LOG2E_RSQRT_D = 1.4426950408889634 * 0.08838834764831845   # log2(e) / sqrt(128)
E4M3_MAX = 448.0
SCALE_FLOOR = 1.1754943508222875e-38   # 2^-126, the smallest normal fp32
SMEM_BYTES = 232448       # the H200's shared memory per block (227 KiB)
FLOAT_LOWEST = -3.4028234663852886e38
PARTS = 4                 # independent chains for a row's max and sum (BN / 4 >= 16 values a row)
AMAX_CTAS = 32            # CTAs a (tensor, head) in the amax pass: one partial each, one a lane when reduced
QUANT_ROWS = 64           # rows a CTA of the q / k quantiser (grid-strided)
VT_TILE = 128             # padded key positions a CTA of the V^T quantiser
VT_PITCH = 132            # bytes a shared-memory row of its transposed tile (33 words: conflict-free)
VEC = 8                   # bf16 values a 16-byte access of the vectorised quantisers (QVEC 1)
BATCH_LOADS = 8           # 16-byte loads a thread issues before using any, QVEC 3's amax and row passes
ROW_VECS = HEAD_DIM // VEC    # vectors a head row
VEC_ROWS = HEAD_DIM // ROW_VECS   # rows a 128-thread step of the vectorised amax and row passes
TINY_SCALE = 5.421010862427522e-20   # 2^-64: below it the Markstein quotient lifts the scale by 2^64
LIFT = 1.8446744073709552e19         # 2^64
EXP2_ROUND = 12582912.0   # 1.5 * 2^23: x + it holds round(x) in its low mantissa bits (EMU's exponent)
EXP2_FLOOR = -126.0       # EMU clamps its argument here: 2^-126 and below are zeros of e4m3 either way
# 2^f on [-0.5, 0.5] (fp32 coefficients of a near-minimax fit of the relative error, at most 2.2e-4, against e4m3's
# half-spacing of 6.25% that P is rounded to next)
EXP2_C0 = 0.9999627470970154
EXP2_C1 = 0.6935868263244629
EXP2_C2 = 0.242152139544487
EXP2_C3 = 0.05286731570959091


# ------------------------------------------------------------------------------------------ quantisation passes
@cute.jit
def _amax_store(acc: cute.Tensor, part: cute.Tensor, h, j):
    """part[h, j] = the CTA's max of acc[0] plus its sum of acc[1] (the 128 threads' partials: warp shuffles, then
    shared memory across the 4 warps), NaN where a thread saw a NaN or Inf."""
    tidx, _, _ = cute.arch.thread_idx()
    for i in cutlass.range_constexpr(5):
        acc[0] = cute.arch.fmax(acc[0], cute.arch.shuffle_sync_bfly(acc[0], offset=16 >> i))
        acc[1] = acc[1] + cute.arch.shuffle_sync_bfly(acc[1], offset=16 >> i)
    smem = cutlass.utils.SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout((2, 4)), 16)
    warp = tidx // 32
    if tidx % 32 == 0:
        red[(0, warp)] = acc[0]
        red[(1, warp)] = acc[1]
    cute.arch.sync_threads()
    if tidx == 0:
        for w in cutlass.range_constexpr(1, 4):
            acc[0] = cute.arch.fmax(acc[0], red[(0, w)])
            acc[1] = acc[1] + red[(1, w)]
        part[(h, j)] = acc[0] + acc[1]


@cute.kernel
def _amax_kernel(x: cute.Tensor, part: cute.Tensor):
    """part[h, j] = max |x[r, h, :]| over rows r = j (mod 32), NaN where one of them is a NaN or +-Inf."""
    tidx, _, _ = cute.arch.thread_idx()
    j, h, _ = cute.arch.block_idx()
    n_ctas, _, _ = cute.arch.grid_dim()
    acc = cute.make_rmem_tensor((2,), cutlass.Float32)       # max |x|, sum of (|x| - |x|)
    acc[0] = 0.0
    acc[1] = 0.0
    for r in cutlass.range(j, x.shape[0], n_ctas, unroll=4):
        a = x[(r, h, tidx)].to(cutlass.Float32)
        a = cute.arch.fmax(a, -a)
        acc[0] = cute.arch.fmax(acc[0], a)
        acc[1] = acc[1] + (a - a)
    _amax_store(acc, part, h, j)


@cute.jit
def _amax_host(x: cute.Tensor, part: cute.Tensor, stream):
    _amax_kernel(x, part).launch(grid=(AMAX_CTAS, x.shape[1], 1), block=(HEAD_DIM, 1, 1), stream=stream)


@cute.jit
def _head_scale(part: cute.Tensor, h, sc: cute.Tensor):
    """sc[0] = head h's scale from its 32 partials (one a lane, reduced by the warp's shuffles): amax / 448 (IEEE
    division), 1 for amax = 0, NaN where a partial is NaN."""
    lane = cute.arch.lane_idx()
    sc[0] = part[(h, lane)]
    sc[1] = sc[0] - sc[0]
    for i in cutlass.range_constexpr(5):
        sc[0] = cute.arch.fmax(sc[0], cute.arch.shuffle_sync_bfly(sc[0], offset=16 >> i))
        sc[1] = sc[1] + cute.arch.shuffle_sync_bfly(sc[1], offset=16 >> i)
    sc[2] = 1.0
    if sc[0] > 0.0:
        sc[2] = sc[0] / E4M3_MAX
    sc[0] = sc[2] + sc[1]


@cute.kernel
def _quant_rows_kernel(x: cute.Tensor, part: cute.Tensor, x8: cute.Tensor, scale: cute.Tensor):
    """x8[r, h, :] = e4m3(x[r, h, :] / scale_h) for rows r = blk (mod grid); CTA (0, h) stores scale_h."""
    tidx, _, _ = cute.arch.thread_idx()
    blk, h, _ = cute.arch.block_idx()
    n_ctas, _, _ = cute.arch.grid_dim()
    sc = cute.make_rmem_tensor((3,), cutlass.Float32)
    _head_scale(part, h, sc)
    if blk == 0:  # noqa: SIM102 - two run-time tests, kept apart for the DSL's if-lowering
        if tidx == 0:
            scale[h] = sc[0]
    for r in cutlass.range(blk, x.shape[0], n_ctas, unroll=4):
        x8[(r, h, tidx)] = (x[(r, h, tidx)].to(cutlass.Float32) / sc[0]).to(cutlass.Float8E4M3FN)


@cute.jit
def _quant_rows_host(x: cute.Tensor, part: cute.Tensor, x8: cute.Tensor, scale: cute.Tensor, stream):
    _quant_rows_kernel(x, part, x8, scale).launch(grid=(cute.ceil_div(x.shape[0], QUANT_ROWS), x.shape[1], 1),
                                                  block=(HEAD_DIM, 1, 1), stream=stream)


@cute.kernel
def _quant_vt_kernel(v: cute.Tensor, part: cute.Tensor, cu: cute.Tensor, vt: cute.Tensor, scale: cute.Tensor):
    """vt[h, :, P_d + 128 jt + i] for i < 128 and positions before the next document's P: e4m3(v / scale_h) of key
    jt 128 + key(i) of document d (key(i) the 32-group permutation), or 0 past the document's keys."""
    tidx, _, _ = cute.arch.thread_idx()
    jt, h, doc = cute.arch.block_idx()
    k0 = cu[doc]
    n_keys = cu[doc + 1] - k0
    t0 = ((k0 + 31) // 32) * 32 + 32 * doc + jt * VT_TILE
    end = ((cu[doc + 1] + 31) // 32) * 32 + 32 * (doc + 1)
    if t0 < end:
        sc = cute.make_rmem_tensor((3,), cutlass.Float32)
        _head_scale(part, h, sc)
        if jt + doc == 0:  # noqa: SIM102 - two run-time tests, kept apart for the DSL's if-lowering
            if tidx == 0:
                scale[h] = sc[0]
        smem = cutlass.utils.SmemAllocator()
        tile = smem.allocate_tensor(cutlass.Float8E4M3FN, cute.make_layout((HEAD_DIM, VT_TILE), stride=(VT_PITCH, 1)),
                                    16)
        val = cute.make_rmem_tensor((1,), cutlass.Float32)
        for kk in cutlass.range_constexpr(VT_TILE):
            # the key kk of the tile goes to column pos: its 32-group's permutation (the module docstring)
            pos = (kk // 32) * 32 + 4 * ((kk % 8) // 2) + 2 * ((kk // 8) % 2) + kk % 2 + 16 * ((kk // 16) % 2)
            val[0] = 0.0
            if jt * VT_TILE + kk < n_keys:
                val[0] = v[(k0 + jt * VT_TILE + kk, h, tidx)].to(cutlass.Float32) / sc[0]
            tile[(tidx, pos)] = val[0].to(cutlass.Float8E4M3FN)
        cute.arch.sync_threads()
        if t0 + tidx < end:
            for d in cutlass.range(HEAD_DIM, unroll=8):
                vt[(h, d, t0 + tidx)] = tile[(d, tidx)]


@cute.jit
def _quant_vt_host(v: cute.Tensor, part: cute.Tensor, cu: cute.Tensor, vt: cute.Tensor, scale: cute.Tensor, stream):
    grid = (cute.ceil_div(v.shape[0] + 63, VT_TILE), v.shape[1], cu.shape[0] - 1)
    _quant_vt_kernel(v, part, cu, vt, scale).launch(grid=grid, block=(HEAD_DIM, 1, 1), stream=stream)


# ------------------------------------------------------------------------------------------ vectorised quantisers
@cute.jit
def _markstein(sc: cute.Tensor, mk: cute.Tensor):
    """mk = (nk, sk, nr) of the head scale sc[0] (rsi/refs/fp8_quotient.py): nk = -2^64 where the scale is below
    2^-64 (else -1), sk = scale * -nk, nr = -1 / sk (IEEE); the quotient of h is then _quotient(h, mk)."""
    mk[0] = -1.0
    if sc[0] < TINY_SCALE:
        mk[0] = -LIFT
    mk[1] = sc[0] * -mk[0]
    mk[2] = -1.0 / mk[1]


@cute.jit
def _quotient(h, mk: cute.Tensor):
    """The IEEE quotient h / scale from the row reciprocal and one Markstein correction (fp8_quotient's proof: the
    same e4m3 byte for every bf16 |h| <= amax): nhk = h nk, q0 = nhk nr, q = fma(fma(q0, sk, nhk), nr, q0)."""
    nhk = h * mk[0]
    q0 = nhk * mk[2]
    return cute.math.fma(cute.math.fma(q0, mk[1], nhk), mk[2], q0)


@cute.jit
def _amax_fold(acc: cute.Tensor, a):
    """acc[0] = max(acc[0], |a[i]|) and acc[1] += |a[i]| - |a[i]| over the 8 fp32 values of a."""
    for i in cutlass.range_constexpr(VEC):
        e = cute.arch.fmax(a[i], -a[i])
        acc[0] = cute.arch.fmax(acc[0], e)
        acc[1] = acc[1] + (e - e)


@cute.kernel
def _amax_vec_kernel(gx: cute.Tensor, part: cute.Tensor, BATCH: cutlass.Constexpr):
    """part[h, j] as _amax_kernel's, with 16-byte loads: gx is x cut into (1, 1, 8) vectors; a thread takes vector
    column tidx % 16 of rows 8 j + tidx // 16, stepping 8 x 32 rows. BATCH 1 (QVEC 1, 2): a vector at a time (H200
    run 71: 0.283 ms a tensor at h3_full, 1.9 TB/s: ptxas keeps each load behind the previous vector's maxima);
    BATCH > 1 (QVEC 3): BATCH vectors loaded (predicated; zeros past the last row) before any of them is reduced."""
    tidx, _, _ = cute.arch.thread_idx()
    j, h, _ = cute.arch.block_idx()
    n_ctas, _, _ = cute.arch.grid_dim()
    n_rows = gx.shape[1][0]
    acc = cute.make_rmem_tensor((2,), cutlass.Float32)       # max |x|, sum of (|x| - |x|)
    acc[0] = 0.0
    acc[1] = 0.0
    step = n_ctas * VEC_ROWS
    if cutlass.const_expr(BATCH == 1):
        for r in cutlass.range(j * VEC_ROWS + tidx // ROW_VECS, n_rows, step, unroll=4):
            _amax_fold(acc, gx[(None, (r, h, tidx % ROW_VECS))].load().to(cutlass.Float32))
    else:
        raw = cute.make_rmem_tensor((VEC, BATCH), cutlass.BFloat16)     # (value, vector): the batch's raw vectors
        for r in cutlass.range(j * VEC_ROWS + tidx // ROW_VECS, n_rows, step * BATCH, unroll=1):
            raw.fill(0.0)
            for b in cutlass.range_constexpr(BATCH):
                if r + b * step < n_rows:
                    raw[(None, b)].store(gx[(None, (r + b * step, h, tidx % ROW_VECS))].load())
            for b in cutlass.range_constexpr(BATCH):
                _amax_fold(acc, raw[(None, b)].load().to(cutlass.Float32))
    _amax_store(acc, part, h, j)


@cute.jit
def _amax_vec_host(x: cute.Tensor, part: cute.Tensor, stream, BATCH: cutlass.Constexpr = 1):
    gx = cute.zipped_divide(x, (1, 1, VEC))                   # ((1, 1, 8), (S, H, 16))
    _amax_vec_kernel(gx, part, BATCH).launch(grid=(AMAX_CTAS, x.shape[1], 1), block=(HEAD_DIM, 1, 1), stream=stream)


@cute.kernel
def _quant_rows_vec_kernel(gx: cute.Tensor, part: cute.Tensor, gx8: cute.Tensor, scale: cute.Tensor,
                           BATCH: cutlass.Constexpr):
    """x8 rows as _quant_rows_kernel's, with 16-byte loads and 8-byte stores and the Markstein quotient: a thread
    takes vector column tidx % 16 of rows 8 blk + tidx // 16, stepping 8 x grid rows. BATCH > 1 (QVEC 3): BATCH
    vectors loaded (predicated) before any quotient, as in _amax_vec_kernel."""
    tidx, _, _ = cute.arch.thread_idx()
    blk, h, _ = cute.arch.block_idx()
    n_ctas, _, _ = cute.arch.grid_dim()
    n_rows = gx.shape[1][0]
    sc = cute.make_rmem_tensor((3,), cutlass.Float32)
    _head_scale(part, h, sc)
    if blk == 0:  # noqa: SIM102 - two run-time tests, kept apart for the DSL's if-lowering
        if tidx == 0:
            scale[h] = sc[0]
    mk = cute.make_rmem_tensor((3,), cutlass.Float32)
    _markstein(sc, mk)
    q = cute.make_rmem_tensor((VEC,), cutlass.Float32)
    step = n_ctas * VEC_ROWS
    if cutlass.const_expr(BATCH == 1):
        for r in cutlass.range(blk * VEC_ROWS + tidx // ROW_VECS, n_rows, step, unroll=2):
            a = gx[(None, (r, h, tidx % ROW_VECS))].load().to(cutlass.Float32)
            for i in cutlass.range_constexpr(VEC):
                q[i] = _quotient(a[i], mk)
            gx8[(None, (r, h, tidx % ROW_VECS))].store(q.load().to(cutlass.Float8E4M3FN))
    else:
        raw = cute.make_rmem_tensor((VEC, BATCH), cutlass.BFloat16)
        for r in cutlass.range(blk * VEC_ROWS + tidx // ROW_VECS, n_rows, step * BATCH, unroll=1):
            for b in cutlass.range_constexpr(BATCH):
                if r + b * step < n_rows:
                    raw[(None, b)].store(gx[(None, (r + b * step, h, tidx % ROW_VECS))].load())
            for b in cutlass.range_constexpr(BATCH):
                if r + b * step < n_rows:
                    for i in cutlass.range_constexpr(VEC):
                        q[i] = _quotient(raw[(i, b)].to(cutlass.Float32), mk)
                    gx8[(None, (r + b * step, h, tidx % ROW_VECS))].store(q.load().to(cutlass.Float8E4M3FN))


@cute.jit
def _quant_rows_vec_host(x: cute.Tensor, part: cute.Tensor, x8: cute.Tensor, scale: cute.Tensor, stream,
                         BATCH: cutlass.Constexpr = 1):
    gx = cute.zipped_divide(x, (1, 1, VEC))
    gx8 = cute.zipped_divide(x8, (1, 1, VEC))
    _quant_rows_vec_kernel(gx, part, gx8, scale, BATCH).launch(
        grid=(cute.ceil_div(x.shape[0], QUANT_ROWS), x.shape[1], 1), block=(HEAD_DIM, 1, 1), stream=stream)


@cute.kernel
def _quant_vt_vec_kernel(gv: cute.Tensor, part: cute.Tensor, cu: cute.Tensor, gvt: cute.Tensor, scale: cute.Tensor,
                         LOADS_FIRST: cutlass.Constexpr):
    """vt as _quant_vt_kernel's, through registers instead of shared memory: thread (c, o) = (tidx // 16, tidx % 16)
    of the 256 loads dims 8 c .. 8 c + 7 (16 bytes) of the 8 keys that vt's columns 8 o .. 8 o + 7 of the tile hold
    (key(i) of the permutation: 32 (o // 4) + 16 (o % 4 // 2) + 4 (o % 2) + (0, 1, 8, 9, 2, 3, 10, 11)[i]), then
    stores, for each of its 8 dims, those 8 columns as 8 bytes: a warp's store is two 128-byte row pieces.
    LOADS_FIRST 1 (QVEC 2) issues the 8 loads before any quotient: with 0 (QVEC 1, H200 runs 71-72) ptxas keeps each
    load behind the previous key's arithmetic (one 16-byte load in flight a thread; 1.2 TB/s at h3_full)."""
    tidx, _, _ = cute.arch.thread_idx()
    jt, h, doc = cute.arch.block_idx()
    k0 = cu[doc]
    n_keys = cu[doc + 1] - k0
    t0 = ((k0 + 31) // 32) * 32 + 32 * doc + jt * VT_TILE
    end = ((cu[doc + 1] + 31) // 32) * 32 + 32 * (doc + 1)
    c = tidx // ROW_VECS
    o = tidx % ROW_VECS
    sc = cute.make_rmem_tensor((3,), cutlass.Float32)
    mk = cute.make_rmem_tensor((3,), cutlass.Float32)
    if t0 < end:            # the whole CTA: the scale's shuffles take every lane
        _head_scale(part, h, sc)
        if jt + doc == 0:  # noqa: SIM102 - two run-time tests, kept apart for the DSL's if-lowering
            if tidx == 0:
                scale[h] = sc[0]
        _markstein(sc, mk)
    if t0 + VEC * o < end:
        raw = cute.make_rmem_tensor((VEC,), cutlass.Float32)
        q = cute.make_rmem_tensor((VEC, VEC), cutlass.Float32)         # (key column i, dim d)
        base = jt * VT_TILE + 32 * (o // 4) + 16 * ((o % 4) // 2) + 4 * (o % 2)
        if cutlass.const_expr(LOADS_FIRST == 1):
            rows = cute.make_rmem_tensor((VEC, VEC), cutlass.BFloat16)    # (dim d, key column i): the raw vectors
            for i in cutlass.range_constexpr(VEC):
                key = base + (i % 2) + 8 * ((i // 2) % 2) + 2 * (i // 4)
                if key < n_keys:
                    rows[(None, i)].store(gv[(None, (k0 + key, h, c))].load())
            for i in cutlass.range_constexpr(VEC):
                key = base + (i % 2) + 8 * ((i // 2) % 2) + 2 * (i // 4)
                for d in cutlass.range_constexpr(VEC):
                    q[(i, d)] = 0.0   # past the document's keys: zeros (not 0 / scale, NaN for a non-finite head)
                if key < n_keys:
                    for d in cutlass.range_constexpr(VEC):
                        q[(i, d)] = _quotient(rows[(d, i)].to(cutlass.Float32), mk)
        else:
            for i in cutlass.range_constexpr(VEC):
                key = base + (i % 2) + 8 * ((i // 2) % 2) + 2 * (i // 4)
                for d in cutlass.range_constexpr(VEC):
                    q[(i, d)] = 0.0   # past the document's keys: zeros (not 0 / scale, NaN for a non-finite head)
                if key < n_keys:
                    raw.store(gv[(None, (k0 + key, h, c))].load().to(cutlass.Float32))
                    for d in cutlass.range_constexpr(VEC):
                        q[(i, d)] = _quotient(raw[d], mk)
        col = (t0 + VEC * o) // VEC
        for d in cutlass.range_constexpr(VEC):
            gvt[(None, (h, VEC * c + d, col))].store(q[(None, d)].load().to(cutlass.Float8E4M3FN))


@cute.jit
def _quant_vt_vec_host(v: cute.Tensor, part: cute.Tensor, cu: cute.Tensor, vt: cute.Tensor, scale: cute.Tensor,
                       stream, LOADS_FIRST: cutlass.Constexpr = 0):
    gv = cute.zipped_divide(v, (1, 1, VEC))
    gvt = cute.zipped_divide(vt, (1, 1, VEC))                 # ((1, 1, 8), (H, 128, n_pad / 8))
    grid = (cute.ceil_div(v.shape[0] + 63, VT_TILE), v.shape[1], cu.shape[0] - 1)
    _quant_vt_vec_kernel(gv, part, cu, gvt, scale, LOADS_FIRST).launch(grid=grid, block=(2 * HEAD_DIM, 1, 1),
                                                                       stream=stream)


# ------------------------------------------------------------------------------------------ attention on e4m3
@cute.jit
def _gemm(mma, acc, frag_a, frag_b, stage, K_STEPS: cutlass.Constexpr, ZERO: cutlass.Constexpr):
    """Issue acc (+)= A B over K_STEPS k32 steps and commit the group (not waited): A is the Q descriptors (ZERO 1:
    S starts from 0) or the e4m3 P registers, B the stage's K or V^T descriptors."""
    if cutlass.const_expr(ZERO == 1):
        acc.fill(0.0)
    cute.nvgpu.warpgroup.fence()
    for kb in cutlass.range_constexpr(K_STEPS):
        cute.gemm(mma, acc, frag_a[(None, None, kb)], frag_b[(None, None, kb, stage)], acc)
    cute.nvgpu.warpgroup.commit_group()


@cute.jit
def _mask_keys(acc_s, tScS, n_valid):
    """Scores of the keys at or past n_valid (outside the document) to -inf."""
    for j in cutlass.range_constexpr(cute.size(acc_s)):
        _, n = tScS[j]
        if n >= n_valid:
            acc_s[j] = float("-inf")


@cute.jit
def _exp2_fma(s_mn: cute.Tensor, r, col, c: cute.Tensor, m_scaled: cute.Tensor):
    """s_mn[r, col] = 2^(s_mn[r, col] c[0] - m_scaled[r]) without the MUFU (EMU): x clamped to -126 (a masked
    score's -inf gives 2^-126, 0 in e4m3; so does NaN, where a non-finite head's NaN V makes its outputs NaN anyway),
    n = round(x) from x + 1.5 * 2^23 (its low bits), f = x - n in [-0.5, 0.5], 2^f by a cubic (fmas), and n added
    to the result's exponent field as an integer: (t_bits << 23) keeps n's low 9 bits there, EXP2_ROUND's own bits
    shift out (FlashAttention-4's emulation, with round to nearest instead of down)."""
    x = cute.arch.fmax(s_mn[(r, col)] * c[0] - m_scaled[r], EXP2_FLOOR)
    t = x + EXP2_ROUND
    f = x - (t - EXP2_ROUND)
    p = cute.math.fma(cute.math.fma(cute.math.fma(EXP2_C3, f, EXP2_C2), f, EXP2_C1), f, EXP2_C0)
    s_mn[(r, col)] = (p.bitcast(cutlass.Int32) + (t.bitcast(cutlass.Int32) << 23)).bitcast(cutlass.Float32)


@cute.jit
def _online_softmax(s_mn: cute.Tensor, row_max: cute.Tensor, row_sum: cute.Tensor, alpha: cute.Tensor, m_scaled: cute.Tensor,
                    part: cute.Tensor, c: cute.Tensor, BN: cutlass.Constexpr, EMU: cutlass.Constexpr):
    """attention_cute's online softmax with the head's score scale c[0] (a run-time value) for its constant; EMU of
    every 8 score columns take _exp2_fma instead of the MUFU's ex2 (H200 run 71, Nsight Compute: the MUFU and the
    tensor pipes at 48% and 46% of their peaks, taking turns rather than overlapping)."""
    for r in cutlass.range_constexpr(2):
        alpha[r] = row_max[r]
        for k in cutlass.range_constexpr(PARTS):
            part[k] = s_mn[(r, k)]
        for col in cutlass.range_constexpr(PARTS, BN // 4):
            part[col % PARTS] = cute.arch.fmax(part[col % PARTS], s_mn[(r, col)])
        for k in cutlass.range_constexpr(PARTS):
            row_max[r] = cute.arch.fmax(row_max[r], part[k])
        row_max[r] = cute.arch.fmax(row_max[r], cute.arch.shuffle_sync_bfly(row_max[r], offset=1))
        row_max[r] = cute.arch.fmax(row_max[r], cute.arch.shuffle_sync_bfly(row_max[r], offset=2))
        m_scaled[r] = cute.arch.fmax(row_max[r] * c[0], FLOAT_LOWEST)
        alpha[r] = cute.math.exp2(alpha[r] * c[0] - m_scaled[r], fastmath=True)
        for k in cutlass.range_constexpr(PARTS):
            part[k] = 0.0
        for col in cutlass.range_constexpr(BN // 4):
            if cutlass.const_expr(col % 8 < EMU):
                _exp2_fma(s_mn, r, col, c, m_scaled)
            else:
                s_mn[(r, col)] = cute.math.exp2(s_mn[(r, col)] * c[0] - m_scaled[r], fastmath=True)
            part[col % PARTS] = part[col % PARTS] + s_mn[(r, col)]
        row_sum[r] = row_sum[r] * alpha[r]
        for k in cutlass.range_constexpr(PARTS):
            row_sum[r] = row_sum[r] + part[k]


@cute.jit
def _to_p8(acc_s, r_p, BN: cutlass.Constexpr):
    """P (e4m3, the PV product's A operand) from the exponentiated scores, element for element in the order
    ((key pair, group parity), row half, group half, 32-key group): the accumulator's (2, 2, BN / 8) order read
    with strides ((1, 4), 2, 8, 16); the operand's ((4, 2, 2), 1, BN / 32) is compact (cvt.rn.satfinite.e4m3x2)."""
    src = cute.composition(acc_s, cute.make_layout(((2, 2), 2, 2, BN // 32), stride=((1, 4), 2, 8, 16)))
    dst = cute.composition(r_p, cute.make_layout(((2, 2), 2, 2, BN // 32)))
    dst.store(src.load().to(cutlass.Float8E4M3FN))


@cute.jit
def _rescale(o_mn, alpha: cute.Tensor, D: cutlass.Constexpr):
    for r in cutlass.range_constexpr(2):
        for col in cutlass.range_constexpr(D // 4):
            o_mn[(r, col)] = o_mn[(r, col)] * alpha[r]


@cute.jit
def _turn_wait(my_turn, PINGPONG: cutlass.Constexpr):
    """PINGPONG 1: wait for this warpgroup's GEMM turn (named barrier my_turn, both warpgroups)."""
    if cutlass.const_expr(PINGPONG == 1):
        cute.arch.barrier(barrier_id=my_turn, number_of_threads=256)


@cute.jit
def _turn_pass(their_turn, PINGPONG: cutlass.Constexpr):
    """PINGPONG 1: hand the GEMM turn to the other warpgroup (named barrier their_turn)."""
    if cutlass.const_expr(PINGPONG == 1):
        cute.arch.barrier_arrive(barrier_id=their_turn, number_of_threads=256)


@cute.jit
def _sink_row_sums(ctid, row_sum: cute.Tensor, sink: cute.Tensor, SINK: cutlass.Constexpr):
    """SINK 1: the row sums stored to shared memory (never read) before the wait for the PV product. Without it ptxas
    schedules 82 of the 98 exponentials of a 192-key block, their sums and P's conversion after that wait (its SASS,
    sm_90a, twenty-first session), so the softmax does not overlap the PV product that OVERLAP issued for it; ptxas
    moves register arithmetic past the wait and past named barriers alike, but keeps a store, and with it everything
    the store depends on, before the wait."""
    if cutlass.const_expr(SINK == 1):
        sink[(0, ctid)] = row_sum[0]
        sink[(1, ctid)] = row_sum[1]


@cute.kernel
def _attention_kernel(tma_q: cute.CopyAtom, mQ, tma_k: cute.CopyAtom, mK, tma_v: cute.CopyAtom, mVt,
                      out: cute.Tensor, cu_q: cute.Tensor, cu_k: cute.Tensor, scales: cute.Tensor,
                      mma_qk: cute.TiledMma, mma_pv: cute.TiledMma, q_layout: cute.ComposedLayout,
                      k_layout: cute.ComposedLayout, vt_layout: cute.ComposedLayout,
                      BM: cutlass.Constexpr, BN: cutlass.Constexpr, STAGES: cutlass.Constexpr,
                      PINGPONG: cutlass.Constexpr, OVERLAP: cutlass.Constexpr, D: cutlass.Constexpr,
                      EMU: cutlass.Constexpr, SINK: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    m_blk, h, doc = cute.arch.block_idx()
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    q0 = cu_q[doc]
    n_q = cu_q[doc + 1] - q0
    k0 = cu_k[doc]
    n_k = cu_k[doc + 1] - k0
    if m_blk * BM < n_q:
        if warp_idx == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_q)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_k)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_v)
        n_blocks = (n_k + BN - 1) // BN

        # ---- shared memory: mbarriers (Q: 1 stage; K, V: STAGES each, full + empty), then Q, K, V^T (swizzled)
        smem = cutlass.utils.SmemAllocator()
        bars_q = smem.allocate_array(cutlass.Int64, 2, byte_alignment=8)
        bars_k = smem.allocate_array(cutlass.Int64, 2 * STAGES, byte_alignment=8)
        bars_v = smem.allocate_array(cutlass.Int64, 2 * STAGES, byte_alignment=8)
        f8 = cutlass.Float8E4M3FN
        sQ = smem.allocate_tensor(f8, q_layout.outer, 1024, q_layout.inner)       # (BM, 128)
        sK = smem.allocate_tensor(f8, k_layout.outer, 1024, k_layout.inner)       # (BN, 128, STAGES)
        sVt = smem.allocate_tensor(f8, vt_layout.outer, 1024, vt_layout.inner)    # (128, BN, STAGES)
        sink = None
        if cutlass.const_expr(SINK == 1):   # the row sums' slots, a pair a consumer thread (_sink_row_sums)
            sink = smem.allocate_tensor(cutlass.Float32, cute.make_layout((2, BM * 2)), 16)
        producer = cutlass.pipeline.CooperativeGroup(cutlass.pipeline.Agent.Thread)
        consumers = cutlass.pipeline.CooperativeGroup(cutlass.pipeline.Agent.Thread, 8)   # two warpgroups' warps
        pipe_q = cutlass.pipeline.PipelineTmaAsync.create(
            num_stages=1, barrier_storage=bars_q, producer_group=producer, consumer_group=consumers,
            tx_count=BM * D)
        pipe_k = cutlass.pipeline.PipelineTmaAsync.create(
            num_stages=STAGES, barrier_storage=bars_k, producer_group=producer, consumer_group=consumers,
            tx_count=BN * D)
        pipe_v = cutlass.pipeline.PipelineTmaAsync.create(
            num_stages=STAGES, barrier_storage=bars_v, producer_group=producer,
            consumer_group=consumers, tx_count=BN * D)

        if warp_idx < 4:
            # ================= producer warpgroup: warp 0 loads Q, then K and V^T of blocks n_blocks - 1, ..., 0
            cute.arch.setmaxregister_decrease(40)
            if warp_idx == 0:
                p0 = ((k0 + 31) // 32) * 32 + 32 * doc      # the document's first column of vt
                gQ = cute.local_tile(cute.domain_offset((q0, 0), mQ[None, None, h]), (BM, D), (m_blk, 0))
                gK = cute.local_tile(cute.domain_offset((k0, 0), mK[None, None, h]), (BN, D), (None, 0))
                gV = cute.local_tile(cute.domain_offset((0, p0), mVt[None, None, h]), (D, BN), (0, None))
                tQsQ, tQgQ = cute.nvgpu.cpasync.tma_partition(tma_q, 0, cute.make_layout(1),
                                                              cute.group_modes(sQ, 0, 2), cute.group_modes(gQ, 0, 2))
                tKsK, tKgK = cute.nvgpu.cpasync.tma_partition(tma_k, 0, cute.make_layout(1),
                                                              cute.group_modes(sK, 0, 2), cute.group_modes(gK, 0, 2))
                tVsV, tVgV = cute.nvgpu.cpasync.tma_partition(tma_v, 0, cute.make_layout(1),
                                                              cute.group_modes(sVt, 0, 2), cute.group_modes(gV, 0, 2))
                qstate = cutlass.pipeline.make_pipeline_state(cutlass.pipeline.PipelineUserType.Producer, 1)
                pipe_q.producer_acquire(qstate)
                cute.copy(tma_q, tQgQ, tQsQ, tma_bar_ptr=pipe_q.producer_get_barrier(qstate))
                wstate = cutlass.pipeline.make_pipeline_state(cutlass.pipeline.PipelineUserType.Producer, STAGES)
                for i in cutlass.range(n_blocks, unroll=1):
                    blk = n_blocks - 1 - i
                    pipe_k.producer_acquire(wstate)
                    cute.copy(tma_k, tKgK[(None, blk)], tKsK[(None, wstate.index)],
                              tma_bar_ptr=pipe_k.producer_get_barrier(wstate))
                    pipe_v.producer_acquire(wstate)
                    cute.copy(tma_v, tVgV[(None, blk)], tVsV[(None, wstate.index)],
                              tma_bar_ptr=pipe_v.producer_get_barrier(wstate))
                    wstate.advance()
        else:
            # ================= consumer warpgroups: 64 query rows each
            cute.arch.setmaxregister_increase(232)
            ctid = tidx - 128
            wg = ctid // 128
            # named barriers 3 + wg: this warpgroup's GEMM turn (PINGPONG), 4 - wg the other's
            my_turn = 3 + wg
            their_turn = 4 - wg
            thr_qk = mma_qk.get_slice(ctid)
            thr_pv = mma_pv.get_slice(ctid)
            tSrQ = mma_qk.make_fragment_A(thr_qk.partition_A(sQ))          # smem descriptors
            tSrK = mma_qk.make_fragment_B(thr_qk.partition_B(sK))
            tOrVt = mma_pv.make_fragment_B(thr_pv.partition_B(sVt))
            tScS = thr_qk.partition_C(cute.make_identity_tensor((BM, BN)))          # (row, key) of each score
            tOcO = thr_pv.partition_C(cute.make_identity_tensor((BM, D)))    # (row, dim) of each output
            tOcP = thr_pv.partition_A(cute.make_identity_tensor((BM, BN)))
            acc_s = cute.make_rmem_tensor(tScS.shape, cutlass.Float32)
            acc_o = cute.make_rmem_tensor(tOcO.shape, cutlass.Float32)
            r_p = mma_pv.make_fragment_A(tOcP.shape)                                # e4m3 P, the RS A operand
            # (row, column) views of this thread's scores and outputs: 2 rows (j // 2 % 2), columns j % 2 + 4 (j // 4)
            s_mn = cute.composition(acc_s, cute.make_layout((2, (2, BN // 8)), stride=(2, (1, 4))))
            o_mn = cute.composition(acc_o, cute.make_layout((2, (2, D // 8)), stride=(2, (1, 4))))
            c_mn = cute.composition(tOcO, cute.make_layout((2, (2, D // 8)), stride=(2, (1, 4))))
            row_max = cute.make_rmem_tensor((2,), cutlass.Float32)
            row_sum = cute.make_rmem_tensor((2,), cutlass.Float32)
            alpha = cute.make_rmem_tensor((2,), cutlass.Float32)
            m_scaled = cute.make_rmem_tensor((2,), cutlass.Float32)
            part = cute.make_rmem_tensor((PARTS,), cutlass.Float32)
            c = cute.make_rmem_tensor((1,), cutlass.Float32)
            c[0] = cute.arch.fmax(scales[(0, h)] * scales[(1, h)] * LOG2E_RSQRT_D, SCALE_FLOOR)
            row_max.fill(float("-inf"))
            row_sum.fill(0.0)
            acc_o.fill(0.0)
            mma_qk.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
            mma_pv.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)

            qstate = cutlass.pipeline.make_pipeline_state(cutlass.pipeline.PipelineUserType.Consumer, 1)
            pipe_q.consumer_wait(qstate)
            if cutlass.const_expr(PINGPONG == 1):  # noqa: SIM102 - a compile-time test around a run-time one
                # the GEMM turn (named barriers 3 and 4, both warpgroups): warpgroup 0 holds it first
                if wg == 0:
                    cute.arch.barrier_arrive(barrier_id=3, number_of_threads=256)
            n_valid = n_k - (n_blocks - 1) * BN      # keys of the first (last, partial) block inside the document
            if cutlass.const_expr(OVERLAP == 0):
                rstate = cutlass.pipeline.make_pipeline_state(cutlass.pipeline.PipelineUserType.Consumer, STAGES)
                _turn_wait(my_turn, PINGPONG)
                for i in cutlass.range(n_blocks, unroll=1):
                    pipe_k.consumer_wait(rstate)
                    _gemm(mma_qk, acc_s, tSrQ, tSrK, rstate.index, D // 32, 1)     # S = Q K^T
                    _turn_pass(their_turn, PINGPONG)
                    cute.nvgpu.warpgroup.wait_group(0)
                    pipe_k.consumer_release(rstate)
                    if i == 0:
                        _mask_keys(acc_s, tScS, n_valid)
                    _online_softmax(s_mn, row_max, row_sum, alpha, m_scaled, part, c, BN, EMU)
                    _rescale(o_mn, alpha, D)
                    _to_p8(acc_s, r_p, BN)
                    pipe_v.consumer_wait(rstate)
                    _turn_wait(my_turn, PINGPONG)
                    _gemm(mma_pv, acc_o, r_p, tOrVt, rstate.index, BN // 32, 0)     # O += P V
                    cute.nvgpu.warpgroup.wait_group(0)
                    pipe_v.consumer_release(rstate)
                    rstate.advance()
                _turn_pass(their_turn, PINGPONG)
            else:
                # FA3's intra-warpgroup overlap (attention_cute's OVERLAP 1)
                kstate = cutlass.pipeline.make_pipeline_state(cutlass.pipeline.PipelineUserType.Consumer, STAGES)
                vstate = cutlass.pipeline.make_pipeline_state(cutlass.pipeline.PipelineUserType.Consumer, STAGES)
                if n_blocks > 0:
                    pipe_k.consumer_wait(kstate)
                    _turn_wait(my_turn, PINGPONG)
                    _gemm(mma_qk, acc_s, tSrQ, tSrK, kstate.index, D // 32, 1)
                    _turn_pass(their_turn, PINGPONG)
                    cute.nvgpu.warpgroup.wait_group(0)
                    pipe_k.consumer_release(kstate)
                    kstate.advance()
                    _mask_keys(acc_s, tScS, n_valid)
                    _online_softmax(s_mn, row_max, row_sum, alpha, m_scaled, part, c, BN, EMU)   # O is 0: no rescale
                    _to_p8(acc_s, r_p, BN)
                    for _i in cutlass.range(1, n_blocks, unroll=1):
                        pipe_k.consumer_wait(kstate)
                        _turn_wait(my_turn, PINGPONG)
                        _gemm(mma_qk, acc_s, tSrQ, tSrK, kstate.index, D // 32, 1)
                        pipe_v.consumer_wait(vstate)
                        _gemm(mma_pv, acc_o, r_p, tOrVt, vstate.index, BN // 32, 0)
                        _turn_pass(their_turn, PINGPONG)
                        cute.nvgpu.warpgroup.wait_group(1)       # this block's S is ready; the PV may still run
                        pipe_k.consumer_release(kstate)
                        kstate.advance()
                        _online_softmax(s_mn, row_max, row_sum, alpha, m_scaled, part, c, BN, EMU)
                        _sink_row_sums(ctid, row_sum, sink, SINK)
                        cute.nvgpu.warpgroup.wait_group(0)       # the PV is done: O and P may change
                        pipe_v.consumer_release(vstate)
                        vstate.advance()
                        _rescale(o_mn, alpha, D)
                        _to_p8(acc_s, r_p, BN)
                    pipe_v.consumer_wait(vstate)
                    _turn_wait(my_turn, PINGPONG)
                    _gemm(mma_pv, acc_o, r_p, tOrVt, vstate.index, BN // 32, 0)
                    _turn_pass(their_turn, PINGPONG)
                    cute.nvgpu.warpgroup.wait_group(0)
                    pipe_v.consumer_release(vstate)

            # ---- epilogue: out = acc v_scale / l (no key block: acc = 0 and out 0), bf16, rows inside the document
            for r in cutlass.range_constexpr(2):
                row_sum[r] = row_sum[r] + cute.arch.shuffle_sync_bfly(row_sum[r], offset=1)
                row_sum[r] = row_sum[r] + cute.arch.shuffle_sync_bfly(row_sum[r], offset=2)
                alpha[r] = 0.0
                if n_blocks > 0:
                    alpha[r] = scales[(2, h)] / row_sum[r]
            row0 = m_blk * BM
            for r in cutlass.range_constexpr(2):
                for col in cutlass.range_constexpr(D // 4):
                    m, n = c_mn[(r, col)]
                    if row0 + m < n_q:
                        out[(q0 + row0 + m, h, n)] = (o_mn[(r, col)] * alpha[r]).to(cutlass.BFloat16)


@cute.jit
def _attention_host(q8: cute.Tensor, k8: cute.Tensor, vt: cute.Tensor, out: cute.Tensor, cu_q: cute.Tensor,
                    cu_k: cute.Tensor, scales: cute.Tensor, stream, BM: cutlass.Constexpr, BN: cutlass.Constexpr,
                    STAGES: cutlass.Constexpr, PINGPONG: cutlass.Constexpr, OVERLAP: cutlass.Constexpr,
                    EMU: cutlass.Constexpr = 0, SINK: cutlass.Constexpr = 0):
    f8 = cutlass.Float8E4M3FN
    # S = Q K^T: two warpgroups stacked along M, m64 x BN x k32, both operands K-major in shared memory
    mma_qk = cute.make_tiled_mma(cute.make_mma_atom(cute.nvgpu.warpgroup.MmaF8Op(
        f8, f8, cutlass.Float32, (64, BN, 32), cute.nvgpu.warpgroup.OperandSource.SMEM,
        cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.K)), (BM // 64, 1, 1))
    # O += P V: P from registers, V^T (128 x BN, keys contiguous) K-major from shared memory, m64 x 128 x k32
    mma_pv = cute.make_tiled_mma(cute.make_mma_atom(cute.nvgpu.warpgroup.MmaF8Op(
        f8, f8, cutlass.Float32, (64, HEAD_DIM, 32), cute.nvgpu.warpgroup.OperandSource.RMEM,
        cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.K)), (BM // 64, 1, 1))
    atom = cute.nvgpu.warpgroup.make_smem_layout_atom(cute.nvgpu.warpgroup.SmemLayoutAtomKind.K_SW128, f8)
    q_layout = cute.tile_to_shape(atom, (BM, HEAD_DIM), order=(0, 1))
    k_layout = cute.tile_to_shape(atom, (BN, HEAD_DIM, STAGES), order=(0, 1, 2))
    # V^T's rows are BN bytes: the 128-byte swizzle where BN is a multiple of 128, else the 64-byte one
    atom_v = atom
    if cutlass.const_expr(BN % 128 != 0):
        atom_v = cute.nvgpu.warpgroup.make_smem_layout_atom(cute.nvgpu.warpgroup.SmemLayoutAtomKind.K_SW64, f8)
    vt_layout = cute.tile_to_shape(atom_v, (HEAD_DIM, BN, STAGES), order=(0, 1, 2))
    # TMA over (S, 128, H) views of q8 and k8 and the (128, n_pad, H) view of vt: boxes of one head
    tma_q, mQ = cute.nvgpu.cpasync.make_tiled_tma_atom(
        cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(),
        cute.make_tensor(q8.iterator, cute.select(q8.layout, mode=[0, 2, 1])),
        q_layout, (BM, HEAD_DIM))
    tma_k, mK = cute.nvgpu.cpasync.make_tiled_tma_atom(
        cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(),
        cute.make_tensor(k8.iterator, cute.select(k8.layout, mode=[0, 2, 1])),
        cute.slice_(k_layout, (None, None, 0)), (BN, HEAD_DIM))
    tma_v, mVt = cute.nvgpu.cpasync.make_tiled_tma_atom(
        cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(),
        cute.make_tensor(vt.iterator, cute.select(vt.layout, mode=[1, 2, 0])),
        cute.slice_(vt_layout, (None, None, 0)), (HEAD_DIM, BN))
    grid = (cute.ceil_div(q8.shape[0], BM), q8.shape[1], cu_q.shape[0] - 1)
    _attention_kernel(tma_q, mQ, tma_k, mK, tma_v, mVt, out, cu_q, cu_k, scales, mma_qk, mma_pv, q_layout,
                      k_layout, vt_layout, BM, BN, STAGES, PINGPONG, OVERLAP,
                      HEAD_DIM, EMU, SINK).launch(grid=grid, block=(128 * (1 + BM // 64), 1, 1), stream=stream)


def _amax(x, part, VEC32, BATCH):
    if VEC32:
        K.cute_launch(_amax_vec_host, x, part, BATCH=BATCH)
    else:
        K.cute_launch_dynamic(_amax_host, x, part)


def _quant_rows(x, part, x8, scale, VEC32, BATCH):
    if VEC32:
        K.cute_launch(_quant_rows_vec_host, x, part, x8, scale, BATCH=BATCH)
    else:
        K.cute_launch_dynamic(_quant_rows_host, x, part, x8, scale)


def _quant_vt(v, part, cu_seqlens, vt, scale, VEC32, LOADS_FIRST):
    if VEC32:
        K.cute_launch(_quant_vt_vec_host, v, part, cu_seqlens, vt, scale, LOADS_FIRST=LOADS_FIRST)
    else:
        K.cute_launch_dynamic(_quant_vt_host, v, part, cu_seqlens, vt, scale)


def _quantize(q, k, v, cu_seqlens, part, scales, q8, k8, vt, QVEC=1):
    """The three quantisation passes (module docstring, 1-3) into the given workspace: part [3, H, 32] and scales
    [3, H] fp32, q8 / k8 [S, H, 128] and vt [H, 128, n_pad] e4m3. QVEC 1: the vectorised passes (static layouts,
    16-byte loads where the layout allows them, 32-bit offsets) for each input that spans fewer than 2**31 - 1
    elements, the scalar ones for the others (a view into a larger buffer at the op's huge shape: H200 run 71's
    first judged QVEC 1 candidate read past 2**31 there, wrapped, and made every output NaN); QVEC 2: the same with
    the V^T pass's loads issued first (_quant_vt_vec_kernel's LOADS_FIRST; H100 run 73: that pass 0.434 -> 0.324 ms
    at h3_full); QVEC 3: QVEC 2 with the amax and row passes loading BATCH_LOADS vectors a thread before using any
    (twenty-first session); QVEC 0: the scalar ones (dynamic layouts with 64-bit strides, one compile for all
    shapes)."""
    # each input's reach from its first element (the 32-bit offsets of the vectorised passes)
    q_span = (q.shape[0] - 1) * q.stride(0) + (q.shape[1] - 1) * q.stride(1) + (q.shape[2] - 1) * q.stride(-1)
    k_span = (k.shape[0] - 1) * k.stride(0) + (k.shape[1] - 1) * k.stride(1) + (k.shape[2] - 1) * k.stride(-1)
    v_span = (v.shape[0] - 1) * v.stride(0) + (v.shape[1] - 1) * v.stride(1) + (v.shape[2] - 1) * v.stride(-1)
    vq, vk, vv = (QVEC > 0 and q_span < 2**31 - 1, QVEC > 0 and k_span < 2**31 - 1,
                  QVEC > 0 and v_span < 2**31 - 1)
    batch = BATCH_LOADS if QVEC == 3 else 1
    _amax(q, part.select(0, 0), vq, batch)
    _amax(k, part.select(0, 1), vk, batch)
    _amax(v, part.select(0, 2), vv, batch)
    _quant_rows(q, part.select(0, 0), q8, scales.select(0, 0), vq, batch)
    _quant_rows(k, part.select(0, 1), k8, scales.select(0, 1), vk, batch)
    _quant_vt(v, part.select(0, 2), cu_seqlens, vt, scales.select(0, 2), vv, QVEC >= 2)


def launch(q, k, v, cu_seqlens, BM=128, BN=128, STAGES=2, PINGPONG=0, OVERLAP=1, DYNAMIC=0, QVEC=0, EMU=0, SINK=0):
    n_rows, n_heads, head_dim = q.shape
    if (BM * HEAD_DIM + 2 * STAGES * BN * HEAD_DIM) + 2048 + 16 * BM * SINK > SMEM_BYTES:
        raise ValueError(f"BM={BM}, BN={BN}, STAGES={STAGES} need more shared memory than the H200 has")
    out = K.empty((n_rows, n_heads, head_dim), dtype=q.dtype, device=q.device)
    if n_rows == 0:
        return out
    n_docs = cu_seqlens.shape[0] - 1
    n_pad = (n_rows + 31) // 32 * 32 + 32 * n_docs      # each document's keys from a multiple of 32, 32 apart
    part = K.scratch((3, n_heads, AMAX_CTAS), dtype=K.float32, device=q.device)
    scales = K.scratch((3, n_heads), dtype=K.float32, device=q.device)
    q8 = K.scratch((n_rows, n_heads, head_dim), dtype=K.float8_e4m3fn, device=q.device)
    k8 = K.scratch((n_rows, n_heads, head_dim), dtype=K.float8_e4m3fn, device=q.device)
    vt = K.scratch((n_heads, head_dim, n_pad), dtype=K.float8_e4m3fn, device=q.device)
    _quantize(q, k, v, cu_seqlens, part, scales, q8, k8, vt, QVEC)
    if DYNAMIC:
        K.cute_launch_dynamic(_attention_host, q8, k8, vt, out, cu_seqlens, cu_seqlens, scales, BM=BM, BN=BN,
                              STAGES=STAGES, PINGPONG=PINGPONG, OVERLAP=OVERLAP, EMU=EMU, SINK=SINK)
    else:
        K.cute_launch(_attention_host, q8, k8, vt, out, cu_seqlens, cu_seqlens, scales, BM=BM, BN=BN,
                      STAGES=STAGES, PINGPONG=PINGPONG, OVERLAP=OVERLAP, EMU=EMU, SINK=SINK)
    return out

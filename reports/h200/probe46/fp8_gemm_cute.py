"""Hopper (sm_90a) FP8 GEMM with per-row / per-column scales, in the CuTe DSL (nvidia-cutlass-dsl 4.8.1).

out[r, n] = bf16( x_scale[r] * ( w_scale[n] * sum_k x8[r, k] * w8[n, k] ) )

x8 [R, K] float8_e4m3fn, w8 [N, K] float8_e4m3fn (both K-major, as fp8 WGMMA requires), x_scale [R] fp32,
w_scale [N] fp32, out [R, N] bf16, all contiguous. Accumulation in fp32; the epilogue is fp32 in exactly the order
x_scale * (w_scale * acc), then one cvt.rn.bf16.f32 (round to nearest even).

Structure (warp-specialised, one output tile per CTA, no clusters):
  * warpgroup 0 is the producer: its warp 0 issues TMA loads (cp.async.bulk.tensor) of a BM x 128 tile of x8 and a
    BN x 128 tile of w8 per k-step into 128B-swizzled shared memory, STAGES deep, through a PipelineTmaAsync
    (full / empty mbarrier pairs; the full barrier counts the TMA bytes). Rows past R are zero-filled by TMA.
  * warpgroups 1 .. BM/64 are consumers: each owns 64 rows of the tile and runs wgmma.mma_async
    m64nBNk32 e4m3 x e4m3 -> f32 with both operands as shared-memory descriptors, 4 per k-step, keeping one k-step
    of WGMMAs in flight (wait_group(1)) before releasing the previous stage to the producer.
  * epilogue straight from the accumulator registers: scale, round, predicated (row < R) global stores.
CTAs are rasterised in groups of GROUP_M row-tiles (each group walks all N tiles) for L2 reuse.
Config (cutlass.Constexpr): BM in {64, 128} (1 or 2 consumer warpgroups), BN in {64, 128, 256} (a multiple of 8 up
to 256 works), STAGES (smem = STAGES * (BM + BN) * 128 bytes, at most ~227 KB), GROUP_M.
K and N must be multiples of 128 (launch refuses otherwise); R is arbitrary (>= 1).
"""

import cutlass
from cutlass import cute
from cutlass import pipeline
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.cute.nvgpu import OperandMajorMode

BK = 128  # k-tile: 128 fp8 = 128 bytes, exactly one 128B swizzle atom row; 4 WGMMAs of k=32


@cute.kernel
def _fp8_gemm_kernel(tma_a: cute.CopyAtom, mA: cute.Tensor, tma_b: cute.CopyAtom, mB: cute.Tensor,
                     x_scale: cute.Tensor, w_scale: cute.Tensor, out: cute.Tensor, tiled_mma: cute.TiledMma,
                     a_layout: cute.ComposedLayout, b_layout: cute.ComposedLayout,
                     BM: cutlass.Constexpr, BN: cutlass.Constexpr, STAGES: cutlass.Constexpr,
                     GROUP_M: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    n_rows = out.shape[0]
    n_cols = out.shape[1]
    if warp_idx == 0:
        cpasync.prefetch_descriptor(tma_a)
        cpasync.prefetch_descriptor(tma_b)

    # ---- tile raster: GROUP_M row-tiles walk all column tiles before the next group (Triton's grouped order)
    num_m = (n_rows + BM - 1) // BM
    num_n = n_cols // BN
    per_group = GROUP_M * num_n
    first_m = (bidx // per_group) * GROUP_M
    group_m = cutlass.min(num_m - first_m, GROUP_M)
    pid_m = first_m + (bidx % per_group) % group_m
    pid_n = (bidx % per_group) // group_m

    # ---- shared memory: mbarriers (full + empty per stage), then the swizzled A / B stage buffers
    smem = cutlass.utils.SmemAllocator()
    bars = smem.allocate_array(cutlass.Int64, 2 * STAGES, byte_alignment=8)
    sA = smem.allocate_tensor(cutlass.Float8E4M3FN, a_layout.outer, 1024, a_layout.inner)  # (BM, BK, STAGES)
    sB = smem.allocate_tensor(cutlass.Float8E4M3FN, b_layout.outer, 1024, b_layout.inner)  # (BN, BK, STAGES)
    n_consumer_warps = (BM // 64) * 4
    pipe = pipeline.PipelineTmaAsync.create(
        num_stages=STAGES, barrier_storage=bars,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),  # one elected TMA-issuing thread
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, n_consumer_warps),  # lane 0 of each warp
        tx_count=(BM + BN) * BK)  # bytes landing per stage (fp8: one byte per element); inits + syncs the CTA

    # ---- global tiles (TMA coordinate tensors): (BM, BK, k_tiles) and (BN, BK, k_tiles)
    gA = cute.local_tile(mA, (BM, BK), (pid_m, None))
    gB = cute.local_tile(mB, (BN, BK), (pid_n, None))
    k_tiles = cute.size(gA, mode=[2])
    tAsA, tAgA = cpasync.tma_partition(tma_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2),
                                       cute.group_modes(gA, 0, 2))
    tBsB, tBgB = cpasync.tma_partition(tma_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2),
                                       cute.group_modes(gB, 0, 2))

    if warp_idx < 4:
        # ================= producer warpgroup: warp 0 streams the k-tiles through the stages
        if cutlass.const_expr(BM == 128):  # 384 threads x 168 regs: hand 128 regs/thread to the consumers
            cute.arch.setmaxregister_decrease(40)
        if warp_idx == 0:
            wstate = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
            for k in cutlass.range(k_tiles, unroll=1):
                pipe.producer_acquire(wstate)  # wait for an empty slot, arm its full barrier with tx_count
                cute.copy(tma_a, tAgA[(None, k)], tAsA[(None, wstate.index)],
                          tma_bar_ptr=pipe.producer_get_barrier(wstate))
                cute.copy(tma_b, tBgB[(None, k)], tBsB[(None, wstate.index)],
                          tma_bar_ptr=pipe.producer_get_barrier(wstate))
                pipe.producer_commit(wstate)  # no-op for TMA (the bytes complete the barrier)
                wstate.advance()
    else:
        # ================= consumer warpgroups: WGMMA main loop, then the scale epilogue
        if cutlass.const_expr(BM == 128):  # 128 * 40 + 256 * 232 = 64512 <= 65536 registers
            cute.arch.setmaxregister_increase(232)
        ctid = tidx - 128
        thr_mma = tiled_mma.get_slice(ctid)
        tCsA = thr_mma.partition_A(sA)              # (MMA, MMA_M, MMA_K, STAGES) smem views
        tCsB = thr_mma.partition_B(sB)
        tCrA = tiled_mma.make_fragment_A(tCsA)      # the matching WGMMA smem descriptors
        tCrB = tiled_mma.make_fragment_B(tCsB)
        tCcC = thr_mma.partition_C(cute.make_identity_tensor((BM, BN)))  # (m, n) in the tile of each acc value
        acc = cute.make_rmem_tensor(tCcC.shape, cutlass.Float32)
        acc.fill(0.0)
        tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
        k_blocks = cute.size(tCrA, mode=[2])        # BK / 32

        rstate = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        release = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        for k in cutlass.range(k_tiles, unroll=1):
            pipe.consumer_wait(rstate)              # TMA bytes of this stage have landed
            warpgroup.fence()
            for kb in cutlass.range_constexpr(k_blocks):
                cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, rstate.index)], tCrB[(None, None, kb, rstate.index)],
                          acc)
            warpgroup.commit_group()
            warpgroup.wait_group(1)                 # the previous k-tile's WGMMAs are done reading smem ...
            if k > 0:
                pipe.consumer_release(release)      # ... so its stage goes back to the producer
                release.advance()
            rstate.advance()
        warpgroup.wait_group(0)

        # ---- epilogue: v = x_scale[r] * (w_scale[n] * acc), bf16 (RNE), stored where r < R
        row0 = pid_m * BM
        col0 = pid_n * BN
        res = cute.make_rmem_tensor(tCcC.shape, cutlass.BFloat16)
        for i in cutlass.range_constexpr(cute.size(acc)):   # loads only: repeated scale loads fold together
            m, n = tCcC[i]
            r = cutlass.min(row0 + m, n_rows - 1)            # clamped: the load is in bounds, the store masked
            res[i] = (x_scale[r] * (w_scale[col0 + n] * acc[i])).to(cutlass.BFloat16)
        gOut = cute.local_tile(out, (BM, BN), (pid_m, pid_n))
        tCgOut = thr_mma.partition_C(gOut)
        for i in cutlass.range_constexpr(cute.size(acc)):
            m, n = tCcC[i]
            if row0 + m < n_rows:
                tCgOut[i] = res[i]


@cute.jit
def _fp8_gemm_host(x8: cute.Tensor, x_scale: cute.Tensor, w8: cute.Tensor, w_scale: cute.Tensor, out: cute.Tensor,
                   stream, BM: cutlass.Constexpr, BN: cutlass.Constexpr, STAGES: cutlass.Constexpr,
                   GROUP_M: cutlass.Constexpr):
    f8 = cutlass.Float8E4M3FN
    # WGMMA m64 x BN x k32, e4m3 x e4m3 -> f32, A and B from smem, both K-major; BM/64 warpgroups stacked along M
    mma_op = warpgroup.MmaF8Op(f8, f8, cutlass.Float32, (64, BN, 32), warpgroup.OperandSource.SMEM,
                               OperandMajorMode.K, OperandMajorMode.K)
    tiled_mma = cute.make_tiled_mma(cute.make_mma_atom(mma_op), (BM // 64, 1, 1))
    # K-major 128-byte-swizzled smem layouts (the canonical WGMMA operand layout), STAGES deep
    atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_SW128, f8)
    a_layout = cute.tile_to_shape(atom, (BM, BK, STAGES), order=(0, 1, 2))
    b_layout = cute.tile_to_shape(atom, (BN, BK, STAGES), order=(0, 1, 2))
    # TMA atoms: one (BM, BK) / (BN, BK) box per copy into one stage; they also give the coordinate tensors
    tma_a, mA = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), x8,
                                            cute.slice_(a_layout, (None, None, 0)), (BM, BK))
    tma_b, mB = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), w8,
                                            cute.slice_(b_layout, (None, None, 0)), (BN, BK))
    blocks = cute.ceil_div(out.shape[0], BM) * (out.shape[1] // BN)
    _fp8_gemm_kernel(tma_a, mA, tma_b, mB, x_scale, w_scale, out, tiled_mma, a_layout, b_layout,
                     BM, BN, STAGES, GROUP_M).launch(grid=(blocks, 1, 1), block=(128 * (1 + BM // 64), 1, 1),
                                                     stream=stream)


HEURISTIC = dict(BM=128, BN=256, STAGES=4, GROUP_M=8)


def _check(x8, x_scale, w8, w_scale, BM, BN, STAGES, GROUP_M):
    import torch
    R, K = x8.shape
    N = w8.shape[0]
    if x8.dtype != torch.float8_e4m3fn or w8.dtype != torch.float8_e4m3fn:
        raise ValueError("x8 and w8 must be float8_e4m3fn")
    if x_scale.dtype != torch.float32 or w_scale.dtype != torch.float32:
        raise ValueError("x_scale and w_scale must be float32")
    if w8.shape[1] != K or tuple(x_scale.shape) != (R,) or tuple(w_scale.shape) != (N,):
        raise ValueError("shape mismatch")
    if K % 128 or N % 128 or N % BN:
        raise ValueError(f"K ({K}) and N ({N}) must be multiples of 128 and of BN ({BN})")
    if not all(t.is_contiguous() for t in (x8, w8, x_scale, w_scale)):
        raise ValueError("inputs must be contiguous")
    if any(t.data_ptr() % 16 for t in (x8, w8)):
        raise ValueError("x8 and w8 must be 16-byte aligned (TMA)")
    # smem: STAGES * (BM + BN) * BK bytes of operands + 1 KB (mbarriers, padded to the 1024-byte swizzle alignment)
    if BM not in (64, 128) or BN % 8 or not 8 <= BN <= 256 or STAGES < 2 or GROUP_M < 1 or \
            (BM + BN) * BK * STAGES + 1024 > 232448:
        raise ValueError(f"bad config BM={BM} BN={BN} STAGES={STAGES} GROUP_M={GROUP_M}")
    if R * N >= 2 ** 31 or R * K >= 2 ** 31:
        raise ValueError("tensors of 2**31 elements or more are not supported (32-bit offsets)")


# ======================================================================================================
# Prototype host side: the project's K.cute_launch(fn, *tensors, **consts) does this (rsi/kernel.py).
# ======================================================================================================
_compiled = {}


def _alignment(t):
    ptr, align = t.data_ptr(), 16
    while ptr % align:
        align //= 2
    return align


def cute_launch(fn, *tensors, **consts):
    """fn(*tensors, stream, **consts) on torch's current stream, compiled once per shapes / strides / alignment."""
    import torch
    import cuda.bindings.driver as cuda
    from cutlass.cute.runtime import from_dlpack
    stream = cuda.CUstream(torch.cuda.current_stream(tensors[0].device).cuda_stream)
    args = [from_dlpack(t, assumed_align=_alignment(t)) for t in tensors]
    key = (fn, tuple(sorted(consts.items())),
           tuple((t.dtype, tuple(t.shape), t.stride(), _alignment(t), t.device) for t in tensors))
    if key not in _compiled:
        _compiled[key] = cute.compile(fn, *args, stream, **consts)
    _compiled[key](*args, stream)


def launch(x8, x_scale, w8, w_scale, BM=128, BN=256, STAGES=4, GROUP_M=8):
    import torch
    _check(x8, x_scale, w8, w_scale, BM, BN, STAGES, GROUP_M)
    out = torch.empty((x8.shape[0], w8.shape[0]), dtype=torch.bfloat16, device=x8.device)
    if out.numel() == 0:
        return out
    if x8.shape[1] == 0:
        return out.zero_()
    cute_launch(_fp8_gemm_host, x8, x_scale, w8, w_scale, out, BM=BM, BN=BN, STAGES=STAGES, GROUP_M=GROUP_M)
    return out

"""CuTe DSL template for ``fp8_gemm`` (rsi/refs/fp8_gemm.py): the GEMM after a fused FP8 producer, on Hopper.

out[r, n] = bf16(x_scale[r] * (w_scale[n] * sum_k x8[r, k] w8[n, k])), x8 [R, K] and w8 [N, K] e4m3 (both K-major,
as Hopper's fp8 WGMMA takes them), x_scale [R] and w_scale [N] fp32, out [R, N] bf16 contiguous.

Warp-specialised, one output tile per CTA, no clusters:
  * warpgroup 0 produces: its warp 0 issues TMA loads (``cp.async.bulk.tensor``) of a BM x 128 tile of x8 and a
    BN x 128 tile of w8 per k-step into 128-byte-swizzled shared memory, STAGES deep, through a PipelineTmaAsync
    (a full and an empty mbarrier per stage; the full one counts the TMA's bytes). TMA zero-fills what lies past R,
    N or K, so tails need no code in the main loop.
  * warpgroups 1 .. BM / 64 consume: each owns 64 rows of the tile and runs ``wgmma.mma_async`` m64 x BN x k32,
    e4m3 x e4m3 -> fp32, both operands as shared-memory descriptors, four per k-step, keeping one k-step in flight
    (``wait_group(1)``) before it hands the previous stage back. The fp32 accumulator is the tensor core's for all
    of K (no periodic promotion: what cuBLAS calls fast accumulation; Triton's fp8_linear template's PREC 0).
  * the epilogue works from the accumulator registers: ``x_scale[r] * (w_scale[n] * acc)`` in fp32 in that order,
    one ``cvt.rn.bf16.f32``, stores predicated on r < R and n < N.
  * with BM = 128 the producer gives up registers (``setmaxnreg`` 40) and the consumers take them (232).
Tiles are rasterised in groups of GROUP_M row tiles that walk every column tile (L2 reuse of the w8 tiles).
PERSIST 0 launches one CTA a tile; PERSIST > 0 launches min(tiles, PERSIST) CTAs (132: the H200's SMs) that walk
their tiles with the pipeline state carried over, so the producer loads the next tile's stages during the epilogue.
Shared memory: STAGES (BM + BN) 128 bytes plus the barriers, at most 227 KiB on the H200.
Host rules: x8 and w8 with unit column stride, row strides and base addresses multiples of 16 bytes (TMA: not checked
here, where the host may not read addresses; building the TMA descriptor fails on a misaligned tensor), the scales
with unit stride; offsets are 32-bit, so launch runs the rows in chunks whose x8 and out hold fewer than
2**31 elements (the huge shape: two chunks), and refuses a w8 of 2**31 elements. K.cute_launch compiles per shape.
Written in the tenth session from the CuTe DSL's API (facts from CUTLASS's Hopper examples and quack's GEMM; no
code copied). Config: BM (64 or 128), BN (a multiple of 8 up to 256), STAGES, GROUP_M, PERSIST.
H200 run 48 (the judge): accepted (rel-L2 3.6e-3 against the exact op), 0.70-0.96x torch._scaled_mm at 128 x 256 x
4 stages with one CTA a tile; run 49, persistent: 0.67-0.94x. Not promoted. Next would be ping-pong consumers (one
warpgroup's epilogue behind the other's MMAs) or a TMA-store epilogue.
"""

import cutlass
from cutlass import cute

from rsi import kernel as K

BK = 128  # k-tile: 128 e4m3 bytes, one row of the 128-byte swizzle atom; four WGMMAs of k = 32
SMEM_BYTES = 232448  # the H200's shared memory per block (227 KiB)


@cute.jit
def _tile_coords(tile, num_m, num_n, GROUP_M: cutlass.Constexpr):
    """Tile index -> (row tile, column tile): GROUP_M row tiles walk every column tile before the next group."""
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    group_m = cutlass.min(num_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % group_m, (tile % per_group) // group_m


@cute.kernel
def _fp8_gemm_kernel(tma_a: cute.CopyAtom, mA, tma_b: cute.CopyAtom, mB: cute.Tensor,
                     x_scale: cute.Tensor, w_scale: cute.Tensor, out: cute.Tensor, tiled_mma: cute.TiledMma,
                     a_layout: cute.ComposedLayout, b_layout: cute.ComposedLayout,
                     BM: cutlass.Constexpr, BN: cutlass.Constexpr, STAGES: cutlass.Constexpr,
                     GROUP_M: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    n_blocks, _, _ = cute.arch.grid_dim()
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    n_rows = out.shape[0]
    n_cols = out.shape[1]
    if warp_idx == 0:
        cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
        cute.nvgpu.cpasync.prefetch_descriptor(tma_b)
    num_m = (n_rows + BM - 1) // BM
    num_n = (n_cols + BN - 1) // BN
    num_tiles = num_m * num_n
    k_tiles = cute.size(cute.local_tile(mB, (BN, BK), (0, None)), mode=[2])   # ceil(K / BK)

    # ---- shared memory: mbarriers (full + empty per stage), then the swizzled A / B stage buffers
    smem = cutlass.utils.SmemAllocator()
    bars = smem.allocate_array(cutlass.Int64, 2 * STAGES, byte_alignment=8)
    sA = smem.allocate_tensor(cutlass.Float8E4M3FN, a_layout.outer, 1024, a_layout.inner)  # (BM, BK, STAGES)
    sB = smem.allocate_tensor(cutlass.Float8E4M3FN, b_layout.outer, 1024, b_layout.inner)  # (BN, BK, STAGES)
    n_consumer_warps = (BM // 64) * 4
    pipe = cutlass.pipeline.PipelineTmaAsync.create(
        num_stages=STAGES, barrier_storage=bars,
        producer_group=cutlass.pipeline.CooperativeGroup(cutlass.pipeline.Agent.Thread),  # one TMA-issuing thread
        consumer_group=cutlass.pipeline.CooperativeGroup(cutlass.pipeline.Agent.Thread, n_consumer_warps),
        tx_count=(BM + BN) * BK)  # bytes landing per stage (fp8: one byte per element); inits + syncs the CTA

    # Tiles bidx, bidx + grid, ...: one per CTA with PERSIST 0, else the CTA walks its tiles and the pipeline state
    # carries over, so the producer loads the next tile's stages while the consumers run this tile's epilogue.
    if warp_idx < 4:
        # ================= producer warpgroup: warp 0 streams the k-tiles through the stages
        if cutlass.const_expr(BM == 128):  # 384 threads x 168 regs: hand 128 regs/thread to the consumers
            cute.arch.setmaxregister_decrease(40)
        if warp_idx == 0:
            wstate = cutlass.pipeline.make_pipeline_state(cutlass.pipeline.PipelineUserType.Producer, STAGES)
            for tile in cutlass.range(bidx, num_tiles, n_blocks, unroll=1):
                pid_m, pid_n = _tile_coords(tile, num_m, num_n, GROUP_M)
                # TMA coordinate tiles (BM, BK, k_tiles) and (BN, BK, k_tiles) of this output tile
                gA = cute.local_tile(mA, (BM, BK), (pid_m, None))
                gB = cute.local_tile(mB, (BN, BK), (pid_n, None))
                tAsA, tAgA = cute.nvgpu.cpasync.tma_partition(tma_a, 0, cute.make_layout(1),
                                                              cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))
                tBsB, tBgB = cute.nvgpu.cpasync.tma_partition(tma_b, 0, cute.make_layout(1),
                                                              cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2))
                for k in cutlass.range(k_tiles, unroll=1):
                    pipe.producer_acquire(wstate)  # wait for an empty slot, arm its full barrier with tx_count
                    cute.copy(tma_a, tAgA[(None, k)], tAsA[(None, wstate.index)],
                              tma_bar_ptr=pipe.producer_get_barrier(wstate))
                    cute.copy(tma_b, tBgB[(None, k)], tBsB[(None, wstate.index)],
                              tma_bar_ptr=pipe.producer_get_barrier(wstate))
                    pipe.producer_commit(wstate)  # no-op for TMA (the bytes complete the barrier)
                    wstate.advance()
    else:
        # ================= consumer warpgroups: WGMMA main loop, then the scale epilogue, per tile
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
        res = cute.make_rmem_tensor(tCcC.shape, cutlass.BFloat16)
        tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
        k_blocks = cute.size(tCrA, mode=[2])        # BK / 32
        rstate = cutlass.pipeline.make_pipeline_state(cutlass.pipeline.PipelineUserType.Consumer, STAGES)
        release = cutlass.pipeline.make_pipeline_state(cutlass.pipeline.PipelineUserType.Consumer, STAGES)
        for tile in cutlass.range(bidx, num_tiles, n_blocks, unroll=1):
            pid_m, pid_n = _tile_coords(tile, num_m, num_n, GROUP_M)
            acc.fill(0.0)
            for k in cutlass.range(k_tiles, unroll=1):
                pipe.consumer_wait(rstate)              # TMA bytes of this stage have landed
                cute.nvgpu.warpgroup.fence()
                for kb in cutlass.range_constexpr(k_blocks):
                    cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, rstate.index)],
                              tCrB[(None, None, kb, rstate.index)], acc)
                cute.nvgpu.warpgroup.commit_group()
                cute.nvgpu.warpgroup.wait_group(1)      # the previous k-tile's WGMMAs are done reading smem ...
                if k > 0:
                    pipe.consumer_release(release)      # ... so its stage goes back to the producer
                    release.advance()
                rstate.advance()
            cute.nvgpu.warpgroup.wait_group(0)
            pipe.consumer_release(release)              # the tile's last stage
            release.advance()

            # ---- epilogue: v = x_scale[r] * (w_scale[n] * acc), bf16 (RNE), stored where r < R and n < N
            row0 = pid_m * BM
            col0 = pid_n * BN
            for i in cutlass.range_constexpr(cute.size(acc)):   # loads only: repeated scale loads fold together
                m, n = tCcC[i]
                r = cutlass.min(row0 + m, n_rows - 1)            # clamped: the loads are in bounds, the store masked
                c = cutlass.min(col0 + n, n_cols - 1)
                res[i] = (x_scale[r] * (w_scale[c] * acc[i])).to(cutlass.BFloat16)
            gOut = cute.local_tile(out, (BM, BN), (pid_m, pid_n))
            tCgOut = thr_mma.partition_C(gOut)
            for i in cutlass.range_constexpr(cute.size(acc)):
                m, n = tCcC[i]
                if row0 + m < n_rows:  # noqa: SIM102 - nested: both are traced as dynamic ifs
                    if col0 + n < n_cols:
                        tCgOut[i] = res[i]


@cute.jit
def _fp8_gemm_host(x8: cute.Tensor, x_scale: cute.Tensor, w8: cute.Tensor, w_scale: cute.Tensor, out: cute.Tensor,
                   stream, BM: cutlass.Constexpr, BN: cutlass.Constexpr, STAGES: cutlass.Constexpr,
                   GROUP_M: cutlass.Constexpr, PERSIST: cutlass.Constexpr):
    f8 = cutlass.Float8E4M3FN
    # WGMMA m64 x BN x k32, e4m3 x e4m3 -> f32, A and B from smem, both K-major; BM/64 warpgroups stacked along M
    mma_op = cute.nvgpu.warpgroup.MmaF8Op(f8, f8, cutlass.Float32, (64, BN, 32),
                                          cute.nvgpu.warpgroup.OperandSource.SMEM, cute.nvgpu.OperandMajorMode.K,
                                          cute.nvgpu.OperandMajorMode.K)
    tiled_mma = cute.make_tiled_mma(cute.make_mma_atom(mma_op), (BM // 64, 1, 1))
    # K-major 128-byte-swizzled smem layouts (the canonical WGMMA operand layout), STAGES deep
    atom = cute.nvgpu.warpgroup.make_smem_layout_atom(cute.nvgpu.warpgroup.SmemLayoutAtomKind.K_SW128, f8)
    a_layout = cute.tile_to_shape(atom, (BM, BK, STAGES), order=(0, 1, 2))
    b_layout = cute.tile_to_shape(atom, (BN, BK, STAGES), order=(0, 1, 2))
    # TMA atoms: one (BM, BK) / (BN, BK) box per copy into one stage; they also give the coordinate tensors
    # x8's row count as a run-time value: with a static 1 the TMA atom drops the row mode and builds a 1-D
    # descriptor that the 2-D copies fault on (H200 runs 47, 47b: an illegal instruction at R = 1)
    tma_a, mA = cute.nvgpu.cpasync.make_tiled_tma_atom(
        cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(),
        cute.make_tensor(x8.iterator, cute.make_layout((cutlass.Int32(x8.shape[0]), x8.shape[1]),
                                                       stride=(x8.stride[0], 1))),
        cute.slice_(a_layout, (None, None, 0)), (BM, BK))
    tma_b, mB = cute.nvgpu.cpasync.make_tiled_tma_atom(cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(), w8,
                                            cute.slice_(b_layout, (None, None, 0)), (BN, BK))
    blocks = cute.ceil_div(out.shape[0], BM) * cute.ceil_div(out.shape[1], BN)
    if cutlass.const_expr(PERSIST > 0):
        blocks = cutlass.min(blocks, PERSIST)
    _fp8_gemm_kernel(tma_a, mA, tma_b, mB, x_scale, w_scale, out, tiled_mma, a_layout, b_layout,
                     BM, BN, STAGES, GROUP_M).launch(grid=(blocks, 1, 1), block=(128 * (1 + BM // 64), 1, 1),
                                                     stream=stream)


def launch(x8, x_scale, w8, w_scale, BM=128, BN=256, STAGES=4, GROUP_M=8, PERSIST=0):
    n_rows, n_k = x8.shape
    n_cols = w8.shape[0]
    if w8.shape[1] != n_k or x_scale.shape[0] != n_rows or w_scale.shape[0] != n_cols:
        raise ValueError("x8 [R, K], x_scale [R], w8 [N, K], w_scale [N]: the sizes do not match")
    if x8.stride(1) != 1 or w8.stride(1) != 1 or x_scale.stride(0) != 1 or w_scale.stride(0) != 1:
        raise ValueError("x8 and w8 need unit column strides and the scales unit strides")
    if (BM + BN) * BK * STAGES + 1024 > SMEM_BYTES:
        raise ValueError(f"BM={BM}, BN={BN}, STAGES={STAGES} need more shared memory than the H200 has")
    if n_cols * w8.stride(0) >= 2**31:
        raise ValueError("w8 spans 2**31 elements or more: this template's offsets are 32-bit")
    out = K.empty((n_rows, n_cols), dtype=K.bfloat16, device=x8.device)
    if n_rows * n_cols == 0:
        return out
    if n_k == 0:
        raise ValueError("K = 0 is not supported (TMA needs rows of 16 bytes)")
    # 32-bit offsets: rows go in chunks (a multiple of BM rows) whose x8 and out stay under 2**31 elements; each
    # chunk shape compiles once (at most two: the full chunk and the last)
    chunk = (2**31 - 1) // max(n_cols, x8.stride(0)) // BM * BM
    for r0 in range(0, n_rows, chunk):
        r1 = min(r0 + chunk, n_rows)
        K.cute_launch(_fp8_gemm_host, x8[r0:r1], x_scale[r0:r1], w8, w_scale, out[r0:r1], BM=BM, BN=BN,
                      STAGES=STAGES, GROUP_M=GROUP_M, PERSIST=PERSIST)
    return out

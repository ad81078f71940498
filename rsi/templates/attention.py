"""Parametric Triton template for ``attention`` (searched by the offline proposer).

FlashAttention-2 forward, non-causal, varlen over cu_seqlens_q / cu_seqlens_k (rsi/refs/attention.py): per document
d (query rows [start, end), key rows [k_start, k_end)) and head h, out[i] = sum_j softmax_j(q_i . k_j * scale) v_j
over the document's keys j. Self-attention passes one cu_seqlens twice; the refiner's text cross-attention has 1,024
key rows.

Grid: (cdiv(S, BLOCK_M), H, n_docs); program (m, h, d) takes query rows start + [m * BLOCK_M, (m + 1) * BLOCK_M)
of document d and exits at once when they start at or past its end (the host cannot read cu_seqlens, so the grid is
sized for a document of S rows; with the H3 pad document ~half the programs exit after two scalar loads). The
query-block index is the fastest grid axis: programs running together share one head's K/V in L2.

Per program: the [BLOCK_M, 128] q tile is loaded once (bf16); the keys of the document are visited in BLOCK_N
blocks with an online softmax in fp32: s = q k^T (tensor cores, fp32 accumulate) times the scale, m_new =
max(m, rowmax(s)), p = exp(s - m_new), l = l * alpha + rowsum(p), acc = acc * alpha + bf16(p) v with alpha =
exp(m - m_new); out = bf16(acc / l) at the end. Keys outside the document are masked to -inf before the max (their
K and V rows are never read), query rows past its end are neither loaded nor stored. Every input is read through its
three strides with 64-bit offsets (q, k, v may be views of the fused qkv output). The output is contiguous
[S, H, 128]; a query document facing an empty key document (l = 0 after the loop, which never ran) writes zeros,
as the reference does. The key loop walks document-relative rows 0 .. n_k from K and V base pointers moved to the key
document's first row: with absolute rows (the first cross-attention version, 880b17f) the kernel ran 6-9% slower than
the self-attention-only template before it (5399fcc) at ltx_video, h3_stage1 and h3_full, though its PTX differed by
two scalar loads and a select (ptxas schedules the whole kernel differently: reports/cpu/attention_cross_sass.py); the
relative walk is 3-4% slower than 5399fcc's (H200 runs 62-63, reports/h200/probe63.py, one interleaved loop).

TMA = 1: the same program with q, K and V read by the Hopper TMA unit (``_attention_tma_kernel``): device-side
descriptors over the document's own rows (base at its first query / key row, shape [n_doc, 128] / [n_kdoc, 128]; at
least one row, so an empty key document still gets a well-formed descriptor that the loop never reads), so the
hardware zero-fills every row past its end and no other document's K or V reaches the tile; the key loop runs over
ceil(n_kdoc / BLOCK_N) blocks and masks the keys past the end in every block (a separate masked tail after the loop
stops Triton 3.6 from warp-specialising it). Layouts TMA cannot read (an element stride other than 1, or a row
stride, head stride or storage offset that is not a multiple of ALIGN = 8 elements, 16 bytes) take the pointer
kernel with the same tiles.

Config: BLOCK_M, BLOCK_N (tile sizes), num_warps, num_stages (software pipelining of the key loop), EXP2 (1: exp2
with log2(e) folded into the scale, the MUFU.EX2 path; 0: tl.exp of the scaled scores), SPLIT (pointer kernel; 1:
the full key blocks run without masks and only the last, partial block masks; 0: every block masks), TMA.
WS = 1 (TMA kernel only) asks Triton 3.6 to warp-specialise the key loop (``tl.range(..., warp_specialize=True)``):
at num_warps 4 it compiles to a producer and two consumer warpgroups (tests/unit/test_attention_compile.py). It is
not a search axis: on the H200 (run 56, reports/h200/probe56.py) its outputs were wrong at h3_full and ltx_video
(rel-L2 1.5e-2 and 6.3e-2 against cuDNN; NaN at 128 x 64 with 3 stages) though right at h3_stage1 (the interpreter
ignores warp_specialize), and still below cuDNN where right (0.83-0.91x); run 58's variants (no program-level branch;
descriptors over all rows) were wrong with it at every bucket and right without it. Kept for re-measuring on
a later Triton; the judge would reject it as it stands.
"""

import triton
import triton.language as tl

from rsi import kernel as K

SM_SCALE = 0.08838834764831845   # 1 / sqrt(128)
LOG2E = 1.4426950408889634


@triton.jit
def _online_softmax(s, m_i, l_i, acc, EXP2: tl.constexpr):
    """One key block of the online softmax on the scaled scores s: (bf16 p for the PV product, the accumulator
    rescaled by alpha, the new row sums, the new running max)."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    if EXP2:
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
    else:
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    return p.to(tl.bfloat16), acc, l_i, m_new


@triton.jit
def _key_block(acc, l_i, m_i, q, k_ptr, v_ptr, n0, end, stride_ks, stride_vs, offs_n, k_d, v_d, qk_scale,
               MASK: tl.constexpr, EXP2: tl.constexpr):
    rows = (n0 + offs_n).to(tl.int64)
    kv_ok = (n0 + offs_n) < end
    if MASK:
        k = tl.load(k_ptr + rows[:, None] * stride_ks + k_d[None, :], mask=kv_ok[:, None], other=0.0)
        v = tl.load(v_ptr + rows[:, None] * stride_vs + v_d[None, :], mask=kv_ok[:, None], other=0.0)
    else:
        k = tl.load(k_ptr + rows[:, None] * stride_ks + k_d[None, :])
        v = tl.load(v_ptr + rows[:, None] * stride_vs + v_d[None, :])
    s = tl.dot(q, tl.trans(k)) * qk_scale
    if MASK:
        s = tl.where(kv_ok[None, :], s, float("-inf"))
    p, acc, l_i, m_new = _online_softmax(s, m_i, l_i, acc, EXP2)
    acc = tl.dot(p, v, acc)
    return acc, l_i, m_new


@triton.jit
def _attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, cu_ptr, stride_cu, cuk_ptr, stride_cuk, stride_qs, stride_qh,
                      stride_qd, stride_ks, stride_kh, stride_kd, stride_vs, stride_vh, stride_vd, n_heads, qk_scale,
                      HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EXP2: tl.constexpr,
                      SPLIT: tl.constexpr):
    pid_m = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    doc = tl.program_id(2)
    start = tl.load(cu_ptr + doc * stride_cu)
    end = tl.load(cu_ptr + (doc + 1) * stride_cu)
    k_start = tl.load(cuk_ptr + doc * stride_cuk)
    k_end = tl.load(cuk_ptr + (doc + 1) * stride_cuk)
    m0 = start + pid_m * BLOCK_M
    if m0 < end:
        offs_m = tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM).to(tl.int64)
        q_rows = (m0 + offs_m).to(tl.int64)
        q_ok = (m0 + offs_m) < end
        q = tl.load(q_ptr + q_rows[:, None] * stride_qs + h * stride_qh + offs_d[None, :] * stride_qd,
                    mask=q_ok[:, None], other=0.0)
        k_base = k_ptr + h * stride_kh + k_start.to(tl.int64) * stride_ks     # key rows from the document's first
        v_base = v_ptr + h * stride_vh + k_start.to(tl.int64) * stride_vs
        n_k = k_end - k_start
        m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
        l_i = tl.zeros((BLOCK_M,), tl.float32)
        acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
        k_d = offs_d * stride_kd
        v_d = offs_d * stride_vd
        if SPLIT:
            n_full = (n_k // BLOCK_N) * BLOCK_N
            for n0 in range(0, n_full, BLOCK_N):
                acc, l_i, m_i = _key_block(acc, l_i, m_i, q, k_base, v_base, n0, n_k, stride_ks, stride_vs,
                                           offs_n, k_d, v_d, qk_scale, False, EXP2)
            if n_full < n_k:
                acc, l_i, m_i = _key_block(acc, l_i, m_i, q, k_base, v_base, n_full, n_k, stride_ks, stride_vs,
                                           offs_n, k_d, v_d, qk_scale, True, EXP2)
        else:
            for n0 in range(0, n_k, BLOCK_N):
                acc, l_i, m_i = _key_block(acc, l_i, m_i, q, k_base, v_base, n0, n_k, stride_ks, stride_vs,
                                           offs_n, k_d, v_d, qk_scale, True, EXP2)
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]     # no keys: acc is 0, the output 0
        o_off = q_rows[:, None] * (n_heads * HEAD_DIM) + h * HEAD_DIM + offs_d[None, :]
        tl.store(o_ptr + o_off, out.to(tl.bfloat16), mask=q_ok[:, None])


@triton.jit
def _attention_tma_kernel(q_ptr, k_ptr, v_ptr, o_ptr, cu_ptr, stride_cu, cuk_ptr, stride_cuk, stride_qs, stride_qh,
                          stride_ks, stride_kh, stride_vs, stride_vh, n_rows, n_heads, qk_scale,
                          HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EXP2: tl.constexpr,
                          WS: tl.constexpr, STAGES: tl.constexpr):
    pid_m = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    doc = tl.program_id(2)
    start = tl.load(cu_ptr + doc * stride_cu)
    end = tl.load(cu_ptr + (doc + 1) * stride_cu)
    k_start = tl.load(cuk_ptr + doc * stride_cuk)
    n_kdoc = tl.load(cuk_ptr + (doc + 1) * stride_cuk) - k_start
    n_doc = end - start
    m0 = pid_m * BLOCK_M
    if m0 < n_doc:
        rows0 = start.to(tl.int64)
        krows0 = k_start.to(tl.int64)
        qd = tl.make_tensor_descriptor(q_ptr + h * stride_qh + rows0 * stride_qs, shape=[n_doc, HEAD_DIM],
                                       strides=[stride_qs, 1], block_shape=[BLOCK_M, HEAD_DIM])
        kd = tl.make_tensor_descriptor(k_ptr + h * stride_kh + krows0 * stride_ks,
                                       shape=[tl.maximum(n_kdoc, 1), HEAD_DIM], strides=[stride_ks, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
        vd = tl.make_tensor_descriptor(v_ptr + h * stride_vh + krows0 * stride_vs,
                                       shape=[tl.maximum(n_kdoc, 1), HEAD_DIM], strides=[stride_vs, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
        q = tl.load_tensor_descriptor(qd, [m0, 0])
        m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
        l_i = tl.zeros((BLOCK_M,), tl.float32)
        acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
        for n0 in tl.range(0, n_kdoc, BLOCK_N, num_stages=STAGES, warp_specialize=WS):
            k = tl.load_tensor_descriptor(kd, [n0, 0])
            s = tl.dot(q, k.T) * qk_scale
            s = tl.where((n0 + tl.arange(0, BLOCK_N) < n_kdoc)[None, :], s, float("-inf"))
            p, acc, l_i, m_i = _online_softmax(s, m_i, l_i, acc, EXP2)
            v = tl.load_tensor_descriptor(vd, [n0, 0])
            acc = tl.dot(p, v, acc)
        offs_m = tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, HEAD_DIM).to(tl.int64)
        q_rows = (start + m0 + offs_m).to(tl.int64)
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]     # no keys: acc is 0, the output 0
        o_off = q_rows[:, None] * (n_heads * HEAD_DIM) + h * HEAD_DIM + offs_d[None, :]
        tl.store(o_ptr + o_off, out.to(tl.bfloat16), mask=((m0 + offs_m) < n_doc)[:, None])


def launch(q, k, v, cu_seqlens_q, cu_seqlens_k, BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2, EXP2=1, SPLIT=1,
           TMA=0, WS=0, ALIGN=8):
    n_rows, n_heads, head_dim = q.shape
    out = K.empty((n_rows, n_heads, head_dim), dtype=q.dtype, device=q.device)
    n_docs = cu_seqlens_q.shape[0] - 1
    qk_scale = SM_SCALE * LOG2E if EXP2 else SM_SCALE
    grid = (triton.cdiv(n_rows, BLOCK_M), n_heads, n_docs)
    # TMA reads q, k, v where each has a unit element stride, a positive row stride, and row stride, head stride and
    # storage offset in multiples of ALIGN elements (16 bytes of bf16; the storage itself is 16-byte aligned, as every
    # torch allocation is: a candidate may not read a pointer); other layouts take the pointer kernel, same tiles
    tma = TMA and q.stride(-1) == 1 and k.stride(-1) == 1 and v.stride(-1) == 1
    tma = tma and q.stride(0) > 0 and k.stride(0) > 0 and v.stride(0) > 0
    tma = tma and q.stride(0) % ALIGN == 0 and q.stride(1) % ALIGN == 0 and q.storage_offset() % ALIGN == 0
    tma = tma and k.stride(0) % ALIGN == 0 and k.stride(1) % ALIGN == 0 and k.storage_offset() % ALIGN == 0
    tma = tma and v.stride(0) % ALIGN == 0 and v.stride(1) % ALIGN == 0 and v.storage_offset() % ALIGN == 0
    if tma:
        _attention_tma_kernel[grid](q, k, v, out, cu_seqlens_q, cu_seqlens_q.stride(0), cu_seqlens_k,
                                    cu_seqlens_k.stride(0), q.stride(0), q.stride(1), k.stride(0), k.stride(1),
                                    v.stride(0), v.stride(1), n_rows, n_heads, qk_scale,
                                    HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, EXP2=EXP2, WS=WS,
                                    STAGES=num_stages, num_warps=num_warps, num_stages=num_stages)
        return out
    _attention_kernel[grid](q, k, v, out, cu_seqlens_q, cu_seqlens_q.stride(0), cu_seqlens_k, cu_seqlens_k.stride(0),
                            q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2), v.stride(0),
                            v.stride(1), v.stride(2), n_heads, qk_scale, HEAD_DIM=head_dim, BLOCK_M=BLOCK_M,
                            BLOCK_N=BLOCK_N, EXP2=EXP2, SPLIT=SPLIT, num_warps=num_warps, num_stages=num_stages)
    return out

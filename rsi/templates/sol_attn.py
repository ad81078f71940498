"""Parametric Triton template for ``sol_attn`` (searched by the offline proposer).

Sol-Attn block-sparse attention over cu_seqlens documents (rsi/refs/sol_attn.py fixes what is computed): selection
blocks of 128 rows aligned to each document's start; per (query block, head) the key blocks whose pooled score
reaches mu + tau * sigma of that query block's scores, the blocks overlapping the first sink_rows rows, and the
argmax block are kept; out = softmax over the kept keys only. Outputs: out [S, H, D] bf16 and the selection mask
[H, QB, KB] bf16 0/1 (query blocks of all documents in order, QB = cdiv(S, 128) + n_docs - 1, KB = cdiv(S, 128)).

Three launches, no scratch buffer (the judge allows none beyond the outputs):

1. ``_pool_k_kernel``, grid (QB, H): program (g, h) finds the document of global block g, and for a document with
   at least two blocks writes the fp64 mean of the block's key rows into ``out`` itself, viewed as fp64
   [S, H, D / 4]: block j's 128 values fill rows a + 4j .. a + 4j + 3 of its document [a, b) (4 * nKB <= n for
   any document of two blocks or more). A one-block document needs no pooled keys (its only block is kept).
2. ``_select_kernel``, grid (QB, H): program (g, h) builds the [KB_P2] fp64 row of its block's scores (pooled
   q . pooled k / sqrt(D), KB_P2 = next_power_of_2(KB)) SEL_DC head dims a step: it pools those dims of its query
   rows and reads those of every key block's pooled row. Then mu, the population sigma (two passes), thr = mu +
   tau * sigma (tau as the fp32 scalar the GPU receives), keep = !(s < thr) | sink | argmax (first index), and it
   writes its whole mask row (0 past the document's blocks; a row past the last query block all 0). fp64
   throughout: the mask is compared with the reference's (exact up to 4e-6 of the kept pairs).
3. ``_sparse_attention_kernel``, grid (cdiv(S, BLOCK_M), H, n_docs): the attention template's FlashAttention-2
   program (fp32 online softmax, bf16 P for the PV dot), but its key loop visits only the kept 128-row blocks of
   its query block's mask row (a scalar load and a branch per block), each as 128 / BLOCK_N tiles, the tile that
   crosses the document end masked. It overwrites every row of ``out``, pooled keys included.

Config: BLOCK_M (64 or 128: a query tile lies inside one selection block), BLOCK_N (32, 64 or 128 keys a step),
num_warps, num_stages, EXP2 (exp2 with log2(e) folded into the scale, or tl.exp), SEL_DC (head dims per step of
the selection), SEL_WARPS (warps of the pooling and selection kernels).
"""

import triton
import triton.language as tl

from rsi import kernel as K

SEL_BLOCK = 128                  # the contract's selection block (rows), query and key
LOG2E = 1.4426950408889634


@triton.jit
def _find_block(cu_ptr, stride_cu, n_docs, g, SB: tl.constexpr):
    """Global block g -> (document start, end, local block index, found): blocks of the documents in order."""
    g0 = g * 0
    a_f = g * 0
    b_f = g * 0
    j_f = g * 0
    for d in range(n_docs):
        a = tl.load(cu_ptr + d * stride_cu)
        b = tl.load(cu_ptr + (d + 1) * stride_cu)
        nq = (b - a + SB - 1) // SB
        hit = (g >= g0) & (g < g0 + nq)
        a_f = tl.where(hit, a, a_f)
        b_f = tl.where(hit, b, b_f)
        j_f = tl.where(hit, g - g0, j_f)
        g0 += nq
    return a_f, b_f, j_f, g < g0


@triton.jit
def _pool_k_kernel(k_ptr, p64_ptr, cu_ptr, stride_cu, n_docs, stride_ks, stride_kh, stride_kd, n_heads,
                   HEAD_DIM: tl.constexpr, SB: tl.constexpr):
    g = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    a, b, j, found = _find_block(cu_ptr, stride_cu, n_docs, g, SB)
    if found & (b - a > SB):
        offs_r = tl.arange(0, SB)
        offs_d = tl.arange(0, HEAD_DIM).to(tl.int64)
        r0 = a + j * SB
        rows = (r0 + offs_r).to(tl.int64)
        ok = (r0 + offs_r) < b
        x = tl.load(k_ptr + rows[:, None] * stride_ks + h * stride_kh + offs_d[None, :] * stride_kd,
                    mask=ok[:, None], other=0.0)
        cnt = tl.minimum(b - r0, SB).to(tl.float64)
        pk = tl.sum(x.to(tl.float32).to(tl.float64), 0) / cnt
        # block j's D values as 4 rows of D / 4 fp64 (one bf16 row of out holds D / 4 fp64)
        Q: tl.constexpr = HEAD_DIM // 4
        off = (a + 4 * j + offs_d // Q).to(tl.int64) * (n_heads * Q) + h * Q + offs_d % Q
        tl.store(p64_ptr + off, pk)


@triton.jit
def _select_kernel(q_ptr, p64_ptr, m_ptr, cu_ptr, stride_cu, n_docs, stride_qs, stride_qh, stride_qd, n_heads,
                   n_qb, n_kb, tau, sink_rows, HEAD_DIM: tl.constexpr, SB: tl.constexpr, KB_P2: tl.constexpr,
                   SEL_DC: tl.constexpr):
    g = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    a, b, j, found = _find_block(cu_ptr, stride_cu, n_docs, g, SB)
    offs_kb = tl.arange(0, KB_P2)
    m_row = m_ptr + (h * n_qb + g) * n_kb
    nkb = (b - a + SB - 1) // SB
    if found & (nkb > 1):
        offs_r = tl.arange(0, SB)
        offs_c = tl.arange(0, SEL_DC)
        r0 = a + j * SB
        rows = (r0 + offs_r).to(tl.int64)
        ok = (r0 + offs_r) < b
        cnt = tl.minimum(b - r0, SB).to(tl.float64)
        valid = offs_kb < nkb
        Q: tl.constexpr = HEAD_DIM // 4
        s = tl.zeros((KB_P2,), tl.float64)
        # the dot products pooled q . pooled k over SEL_DC dims a step: pool q's dims, read every key block's
        for d0 in tl.static_range(0, HEAD_DIM, SEL_DC):
            dd = (d0 + offs_c).to(tl.int64)
            x = tl.load(q_ptr + rows[:, None] * stride_qs + h * stride_qh + dd[None, :] * stride_qd,
                        mask=ok[:, None], other=0.0)
            pq = tl.sum(x.to(tl.float32).to(tl.float64), 0) / cnt                       # [SEL_DC]
            off = (a + 4 * offs_kb[:, None] + dd[None, :] // Q).to(tl.int64) * (n_heads * Q) + h * Q \
                + dd[None, :] % Q
            pk = tl.load(p64_ptr + off, mask=valid[:, None], other=0.0)                    # [KB_P2, SEL_DC]
            s += tl.sum(pk * pq[None, :], 1)
        s = s / tl.sqrt(tl.full((), HEAD_DIM, tl.float64))
        mu = tl.sum(tl.where(valid, s, 0.0), 0) / nkb.to(tl.float64)
        dev = tl.where(valid, s - mu, 0.0)
        sigma = tl.sqrt(tl.sum(dev * dev, 0) / nkb.to(tl.float64))
        thr = mu + tl.cast(tau, tl.float32).to(tl.float64) * sigma     # tau as the GPU receives it: fp32
        best = tl.argmax(tl.where(valid, s, float("-inf")), 0, tie_break_left=True)
        keep = (s < thr) == 0                         # a NaN threshold (non-finite scores) keeps every block
        keep = keep | (offs_kb * SB < sink_rows) | (offs_kb == best)
        tl.store(m_row + offs_kb, tl.where(keep & valid, 1.0, 0.0).to(tl.bfloat16), mask=offs_kb < n_kb)
    else:
        # a one-block document keeps its block; a row past the last query block (found = 0) stays all 0
        tl.store(m_row + offs_kb, tl.where((offs_kb == 0) & found, 1.0, 0.0).to(tl.bfloat16), mask=offs_kb < n_kb)


@triton.jit
def _key_tile(acc, l_i, m_i, q, k_ptr, v_ptr, n0, end, stride_ks, stride_vs, offs_n, k_d, v_d, qk_scale,
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
    m_new = tl.maximum(m_i, tl.max(s, 1))
    if EXP2:
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
    else:
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    acc = tl.dot(p.to(tl.bfloat16), v, acc)
    return acc, l_i, m_new


@triton.jit
def _sparse_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, m_ptr, cu_ptr, stride_cu, stride_qs, stride_qh,
                             stride_qd, stride_ks, stride_kh, stride_kd, stride_vs, stride_vh, stride_vd, n_heads,
                             n_qb, n_kb, qk_scale, HEAD_DIM: tl.constexpr, SB: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EXP2: tl.constexpr):
    pid_m = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    doc = tl.program_id(2)
    start = tl.load(cu_ptr + doc * stride_cu)
    end = tl.load(cu_ptr + (doc + 1) * stride_cu)
    m0 = start + pid_m * BLOCK_M
    if m0 < end:
        g0 = doc * 0                                   # the document's first global query block
        for d in range(doc):
            a = tl.load(cu_ptr + d * stride_cu)
            b = tl.load(cu_ptr + (d + 1) * stride_cu)
            g0 += (b - a + SB - 1) // SB
        m_row = m_ptr + (h * n_qb + g0 + (pid_m * BLOCK_M) // SB) * n_kb
        nkb = (end - start + SB - 1) // SB
        offs_m = tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM).to(tl.int64)
        q_rows = (m0 + offs_m).to(tl.int64)
        q_ok = (m0 + offs_m) < end
        q = tl.load(q_ptr + q_rows[:, None] * stride_qs + h * stride_qh + offs_d[None, :] * stride_qd,
                    mask=q_ok[:, None], other=0.0)
        k_base = k_ptr + h * stride_kh
        v_base = v_ptr + h * stride_vh
        m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
        l_i = tl.zeros((BLOCK_M,), tl.float32)
        acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
        k_d = offs_d * stride_kd
        v_d = offs_d * stride_vd
        for kb in range(nkb):
            if tl.load(m_row + kb) != 0:
                for t in tl.static_range(SB // BLOCK_N):
                    n0 = start + kb * SB + t * BLOCK_N
                    if n0 + BLOCK_N <= end:
                        acc, l_i, m_i = _key_tile(acc, l_i, m_i, q, k_base, v_base, n0, end, stride_ks, stride_vs,
                                                  offs_n, k_d, v_d, qk_scale, False, EXP2)
                    elif n0 < end:
                        acc, l_i, m_i = _key_tile(acc, l_i, m_i, q, k_base, v_base, n0, end, stride_ks, stride_vs,
                                                  offs_n, k_d, v_d, qk_scale, True, EXP2)
        out = acc / l_i[:, None]
        o_off = q_rows[:, None] * (n_heads * HEAD_DIM) + h * HEAD_DIM + offs_d[None, :]
        tl.store(o_ptr + o_off, out.to(tl.bfloat16), mask=q_ok[:, None])


def launch(q, k, v, cu_seqlens, tau, sink_rows, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2, EXP2=1,
           SEL_DC=8, SEL_WARPS=4):
    n_rows, n_heads, head_dim = q.shape
    n_docs = cu_seqlens.shape[0] - 1
    n_kb = triton.cdiv(n_rows, SEL_BLOCK)
    n_qb = n_kb + n_docs - 1
    out = K.empty((n_rows, n_heads, head_dim), dtype=q.dtype, device=q.device)
    mask = K.empty((n_heads, n_qb, n_kb), dtype=K.bfloat16, device=q.device)
    pooled = out.view(K.float64)        # scratch: out's own memory, overwritten by the attention kernel
    stride_cu = cu_seqlens.stride(0)
    _pool_k_kernel[(n_qb, n_heads)](k, pooled, cu_seqlens, stride_cu, n_docs, k.stride(0), k.stride(1), k.stride(2),
                                    n_heads, HEAD_DIM=head_dim, SB=SEL_BLOCK, num_warps=SEL_WARPS)
    _select_kernel[(n_qb, n_heads)](q, pooled, mask, cu_seqlens, stride_cu, n_docs, q.stride(0), q.stride(1),
                                    q.stride(2), n_heads, n_qb, n_kb, tau, sink_rows, HEAD_DIM=head_dim, SB=SEL_BLOCK,
                                    KB_P2=triton.next_power_of_2(n_kb), SEL_DC=SEL_DC, num_warps=SEL_WARPS)
    qk_scale = 1.0 / head_dim ** 0.5 * (LOG2E if EXP2 else 1.0)
    grid = (triton.cdiv(n_rows, BLOCK_M), n_heads, n_docs)
    _sparse_attention_kernel[grid](q, k, v, out, mask, cu_seqlens, stride_cu, q.stride(0), q.stride(1), q.stride(2),
                                   k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
                                   n_heads, n_qb, n_kb, qk_scale, HEAD_DIM=head_dim, SB=SEL_BLOCK, BLOCK_M=BLOCK_M,
                                   BLOCK_N=BLOCK_N, EXP2=EXP2, num_warps=num_warps, num_stages=num_stages)
    return out, mask

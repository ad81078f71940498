"""Parametric Triton template for ``attention_fp8`` (searched by the offline proposer).

FP8 FlashAttention forward, non-causal, varlen over cu_seqlens (rsi/refs/attention_fp8.py): q, k, v are quantised
to e4m3 with one scale per (tensor, head), scale = amax / 448 over all rows, and attention runs on the e4m3 values
with the scales folded in: s = (q8 . k8) * (q_scale * k_scale / sqrt(D)), out = (sum_j p_j v8_j) * v_scale / l.

A candidate may allocate only its output (the judge rejects bytes written anywhere else), so there is no workspace
for quantised copies of q, k, v or for the scales. Three launches, in stream order:

1. ``_amax_kernel``, grid (H, n_split, 3), n_split = min(16, cdiv(S, 256)): program (h, j, t) reduces |x| over its
   1/n_split of the rows of head h of tensor t (q, k, v) and writes the partial amax into row 0 of the output,
   ``out[0, h, 16 t + j]`` (48 of the D = 128 slots of a head). The max runs on the bf16 bit patterns with the sign
   cleared (int16), where NaN > +Inf > every finite value: a head holding a NaN or Inf gets a non-finite amax, as in
   the reference. The amax of bf16 values is a bf16 value, so a bf16 slot holds it exactly.
2. ``_attention_kernel`` (ROW0 = 0), grid (cdiv(S, BLOCK_M), H, n_docs) as in the ``attention`` template: each
   program reduces its head's partials to the three scales (``div_rn(amax, 448)``; 1 for a zero head, NaN for a
   non-finite one), quantises its q tile once and every K and V tile it visits, in registers: RCP = 0
   ``div_rn(x, scale)``, the reference's bits; RCP = 1 ``(x * pre) * inv`` with inv = 1 / (scale * pre) rounded
   once and pre = 2^64 for scales under 2^-64 (the scale of a bf16-subnormal head has no finite reciprocal), which
   can differ from the correctly rounded quotient in its last bit; then ``.to(tl.float8e4nv)``, which sm_90 compiles
   to ``cvt.rn.satfinite.e4m3x2.f32`` (nearest even, saturating at 448: the reference's clamp + cast). Note that
   ``x / y`` on fp32 compiles to the approximate ``div.full.f32``: every quotient that fixes bits is ``div_rn``. It
   runs the online softmax on s = tl.dot(q8, k8ᵀ) (e4m3 wgmma, fp32 accumulation) times q_scale * k_scale / sqrt(D)
   (times log2(e) with EXP2) and accumulates p v8 with P rounded to e4m3 (P8 = 1, FA3's fp8 PV product; p <= 1
   once the running max is subtracted) or P in bf16 against v8 widened exactly to bf16 (P8 = 0, a bf16 wgmma);
   out = acc * (v_scale / l). It stores every row except global row 0, where the partial amaxes live.
3. The same kernel with ROW0 = 1, grid (1, H, n_docs): the program of the document that starts at row 0 (the first
   non-empty one) computes its first query block and stores row 0 only; a barrier after the scale loads keeps its
   stores behind every thread's reads.

Every input is read through its three strides with 64-bit offsets; the output is contiguous [S, H, D]. VT = 1 loads
V's tile transposed ([D, BLOCK_N], keys along the fast register axis) and feeds ``tl.trans`` of it to the PV product:
Hopper's fp8 wgmma takes its B operand K-major only, and Triton's fused-attention tutorial stores V transposed in
memory for fp8; here V is quantised in registers and Triton lays out the shared-memory operand itself, so VT = 0
(the tile as stored) also compiles to an e4m3 wgmma (checked on the CPU); which is faster is not measured. Config:
BLOCK_M, BLOCK_N, num_warps, num_stages, EXP2 (exp2 with log2(e) folded into the scale, or tl.exp), P8, RCP, VT.
Cost: every program quantises each K and V tile it reads again (~3 CUDA-core ops an element for BLOCK_M MMA
multiply-adds), the price of having no workspace; not yet measured on a GPU.
"""

import triton
import triton.language as tl

from rsi import kernel as K

AMAX_SPLITS = 16          # at most this many programs per (tensor, head) in the amax pass
AMAX_MIN_ROWS = 256       # ... each taking at least this many rows
AMAX_ROWS = 32            # rows per step of the amax pass
E4M3_MAX = tl.constexpr(448.0)
LOG2E = tl.constexpr(1.4426950408889634)
NONFINITE_BITS = tl.constexpr(0x7F80)   # bf16 bits of +Inf: |x| bits at or above it are Inf or NaN
TINY = tl.constexpr(2.0 ** -64)
HUGE = tl.constexpr(2.0 ** 64)


@triton.jit
def _amax_kernel(q_ptr, k_ptr, v_ptr, o_ptr, n_rows, n_split, stride_qs, stride_qh, stride_qd, stride_ks, stride_kh,
                 stride_kd, stride_vs, stride_vh, stride_vd, HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr,
                 SPLITS: tl.constexpr):
    h = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    t = tl.program_id(2)
    if t == 0:
        base = q_ptr + h * stride_qh
        stride_s = stride_qs
        stride_d = stride_qd
    elif t == 1:
        base = k_ptr + h * stride_kh
        stride_s = stride_ks
        stride_d = stride_kd
    else:
        base = v_ptr + h * stride_vh
        stride_s = stride_vs
        stride_d = stride_vd
    per = tl.cdiv(n_rows, n_split)
    lo = j * per
    hi = tl.minimum(lo + per, n_rows)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM).to(tl.int64)
    best = tl.zeros((BLOCK_S, HEAD_DIM), tl.int16)
    for r0 in range(lo, hi, BLOCK_S):
        rows = r0 + offs_s
        x = tl.load(base + rows.to(tl.int64)[:, None] * stride_s + offs_d[None, :] * stride_d,
                    mask=(rows < hi)[:, None], other=0.0)
        best = tl.maximum(best, x.to(tl.int16, bitcast=True) & 0x7FFF)
    amax = tl.max(tl.max(best, 1), 0).to(tl.int16)     # tl.max widens int16 to int32
    tl.store(o_ptr + h * HEAD_DIM + t * SPLITS + j, amax.to(tl.bfloat16, bitcast=True))


@triton.jit
def _scale(o_ptr, t, n_split, SPLITS: tl.constexpr):
    """The per-head scale of tensor t from its n_split partial amaxes in row 0 (``quantize`` in the reference)."""
    j = tl.arange(0, SPLITS)
    bits = tl.load(o_ptr + t * SPLITS + j, mask=j < n_split, other=0.0).to(tl.int16, bitcast=True)
    m = tl.max(bits, 0).to(tl.int16)
    amax = m.to(tl.bfloat16, bitcast=True).to(tl.float32)
    scale = tl.where(m == 0, 1.0, tl.math.div_rn(amax, E4M3_MAX))
    return tl.where(m >= NONFINITE_BITS, float("nan"), scale)


@triton.jit
def _reciprocal(scale):
    """(pre, inv) with x / scale ~ (x * pre) * inv: pre = 2^64 for scales below 2^-64 (an fp32-subnormal scale
    of bf16-subnormal inputs has no finite reciprocal; x * 2^64 is exact there), inv = 1 / (scale * pre) rounded
    once. NaN scale: NaN inv."""
    pre = tl.where(scale < TINY, HUGE, 1.0)
    return pre, tl.math.div_rn(1.0, scale * pre)


@triton.jit
def _quantize(x, scale, pre, inv, RCP: tl.constexpr):
    """bf16 tile -> e4m3 tile: x / scale rounded to nearest even, saturating at 448 (cvt.rn.satfinite)."""
    if RCP:
        y = (x.to(tl.float32) * pre) * inv
    else:
        y = tl.math.div_rn(x.to(tl.float32), scale)
    return y.to(tl.float8e4nv)


@triton.jit
def _key_block(acc, l_i, m_i, q8, k_base, v_base, n0, end, stride_ks, stride_vs, offs_n, k_d, v_d, qk_scale,
               k_scale, k_pre, k_inv, v_scale, v_pre, v_inv, MASK: tl.constexpr, EXP2: tl.constexpr,
               P8: tl.constexpr, RCP: tl.constexpr, VT: tl.constexpr):
    rows = (n0 + offs_n).to(tl.int64)
    kv_ok = (n0 + offs_n) < end
    k_ptrs = k_base + rows[:, None] * stride_ks + k_d[None, :]
    if VT:   # V's tile transposed, [D, BLOCK_N]: keys along the fast register axis (K-major for the PV product)
        v_ptrs = v_base + rows[None, :] * stride_vs + v_d[:, None]
        v_ok = kv_ok[None, :]
    else:
        v_ptrs = v_base + rows[:, None] * stride_vs + v_d[None, :]
        v_ok = kv_ok[:, None]
    if MASK:
        k = tl.load(k_ptrs, mask=kv_ok[:, None], other=0.0)
        v = tl.load(v_ptrs, mask=v_ok, other=0.0)
    else:
        k = tl.load(k_ptrs)
        v = tl.load(v_ptrs)
    k8 = _quantize(k, k_scale, k_pre, k_inv, RCP)
    s = tl.dot(q8, tl.trans(k8)) * qk_scale
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
    v8 = _quantize(v, v_scale, v_pre, v_inv, RCP)
    if VT:
        v8 = tl.trans(v8)
    if P8:
        acc = tl.dot(p.to(tl.float8e4nv), v8, acc)
    else:
        acc = tl.dot(p.to(tl.bfloat16), v8.to(tl.bfloat16), acc)
    return acc, l_i, m_new


@triton.jit
def _attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, cu_ptr, stride_cu, stride_qs, stride_qh, stride_qd, stride_ks,
                      stride_kh, stride_kd, stride_vs, stride_vh, stride_vd, n_heads, n_split, sm_scale,
                      HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EXP2: tl.constexpr,
                      P8: tl.constexpr, RCP: tl.constexpr, VT: tl.constexpr, ROW0: tl.constexpr,
                      SPLITS: tl.constexpr):
    pid_m = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    doc = tl.program_id(2)
    start = tl.load(cu_ptr + doc * stride_cu)
    end = tl.load(cu_ptr + (doc + 1) * stride_cu)
    m0 = start + pid_m * BLOCK_M
    go = m0 < end
    if ROW0:
        go = go & (start == 0)
    if go:
        slots = o_ptr + h * HEAD_DIM              # row 0 of head h: the partial amaxes (step 1)
        q_scale = _scale(slots, 0, n_split, SPLITS)
        k_scale = _scale(slots, 1, n_split, SPLITS)
        v_scale = _scale(slots, 2, n_split, SPLITS)
        tl.debug_barrier()                         # every thread has read row 0 before any stores it (ROW0)
        offs_m = tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM).to(tl.int64)
        q_rows = (m0 + offs_m).to(tl.int64)
        q_ok = (m0 + offs_m) < end
        q = tl.load(q_ptr + q_rows[:, None] * stride_qs + h * stride_qh + offs_d[None, :] * stride_qd,
                    mask=q_ok[:, None], other=0.0)
        q_pre, q_inv = _reciprocal(q_scale)
        q8 = _quantize(q, q_scale, q_pre, q_inv, RCP)
        qk_scale = q_scale * k_scale * sm_scale
        if EXP2:
            qk_scale = qk_scale * LOG2E
        k_pre, k_inv = _reciprocal(k_scale)
        v_pre, v_inv = _reciprocal(v_scale)
        k_base = k_ptr + h * stride_kh
        v_base = v_ptr + h * stride_vh
        m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
        l_i = tl.zeros((BLOCK_M,), tl.float32)
        acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
        k_d = offs_d * stride_kd
        v_d = offs_d * stride_vd
        full_end = start + ((end - start) // BLOCK_N) * BLOCK_N
        for n0 in range(start, full_end, BLOCK_N):
            acc, l_i, m_i = _key_block(acc, l_i, m_i, q8, k_base, v_base, n0, end, stride_ks, stride_vs, offs_n,
                                       k_d, v_d, qk_scale, k_scale, k_pre, k_inv, v_scale, v_pre, v_inv, False,
                                       EXP2, P8, RCP, VT)
        if full_end < end:
            acc, l_i, m_i = _key_block(acc, l_i, m_i, q8, k_base, v_base, full_end, end, stride_ks, stride_vs,
                                       offs_n, k_d, v_d, qk_scale, k_scale, k_pre, k_inv, v_scale, v_pre, v_inv,
                                       True, EXP2, P8, RCP, VT)
        out = acc * (v_scale / l_i)[:, None]
        if ROW0:
            keep = q_ok & (q_rows == 0)
        else:
            keep = q_ok & (q_rows != 0)
        o_off = q_rows[:, None] * (n_heads * HEAD_DIM) + h * HEAD_DIM + offs_d[None, :]
        tl.store(o_ptr + o_off, out.to(tl.bfloat16), mask=keep[:, None])


def launch(q, k, v, cu_seqlens, BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2, EXP2=1, P8=1, RCP=1,
           VT=1):
    n_rows, n_heads, head_dim = q.shape
    out = K.empty((n_rows, n_heads, head_dim), dtype=K.bfloat16, device=q.device)
    if n_rows == 0:
        return out
    n_docs = cu_seqlens.shape[0] - 1
    n_split = min(AMAX_SPLITS, triton.cdiv(n_rows, AMAX_MIN_ROWS))
    _amax_kernel[(n_heads, n_split, 3)](q, k, v, out, n_rows, n_split, q.stride(0), q.stride(1), q.stride(2),
                                        k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
                                        HEAD_DIM=head_dim, BLOCK_S=AMAX_ROWS, SPLITS=AMAX_SPLITS, num_warps=4)
    _attend(q, k, v, cu_seqlens, out, (triton.cdiv(n_rows, BLOCK_M), n_heads, n_docs), 0, n_split, BLOCK_M,
            BLOCK_N, num_warps, num_stages, EXP2, P8, RCP, VT)
    _attend(q, k, v, cu_seqlens, out, (1, n_heads, n_docs), 1, n_split, BLOCK_M, BLOCK_N, num_warps, num_stages,
            EXP2, P8, RCP, VT)
    return out


def _attend(q, k, v, cu_seqlens, out, grid, row0, n_split, BLOCK_M, BLOCK_N, num_warps, num_stages, EXP2, P8, RCP,
            VT):
    head_dim = q.shape[2]
    _attention_kernel[grid](q, k, v, out, cu_seqlens, cu_seqlens.stride(0), q.stride(0), q.stride(1), q.stride(2),
                            k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2), q.shape[1],
                            n_split, 1.0 / head_dim ** 0.5, HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                            EXP2=EXP2, P8=P8, RCP=RCP, VT=VT, ROW0=row0, SPLITS=AMAX_SPLITS, num_warps=num_warps,
                            num_stages=num_stages)

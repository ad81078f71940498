"""H200 probe 58 (thirteenth session; diagnosis outside the judge, not a verdict): why Triton 3.6's warp-specialised
TMA attention kernel gave wrong outputs in run 56 (rel-L2 1.5e-2 at h3_full, 6.3e-2 at ltx_video, right at
h3_stage1). Two variants of the template's ``_attention_tma_kernel`` written here, each with WS 0 and 1 at 128 x 128,
4 warps, 2 stages, timed beside SDPA cuDNN (rsi.harness.timing, one interleaved loop per bucket), each output's
error against cuDNN's on the first input set:
  noif   the program body without ``if m0 < n_doc`` (descriptors shaped [max(n_doc, 1), 128]; programs past the end
         compute on zero-filled q rows and store nothing)
  whole  descriptors over all S rows (not the document's), keys outside the document masked by row index (the
         probe's random inputs are finite, so no other document's V can poison a product)
Usage: python reports/h200/probe58.py OUT.json [REPS]"""
import json
import sys

import torch
import triton
import triton.language as tl

from rsi import kernel as K
from rsi.harness import timing as T
from rsi.refs import get_op_group

QK = 0.08838834764831845 * 1.4426950408889634


@triton.jit
def _noif(q_ptr, k_ptr, v_ptr, o_ptr, cu_ptr, sq, sqh, sk, skh, sv, svh, n_heads, qk_scale,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WS: tl.constexpr):
    pid_m = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    doc = tl.program_id(2)
    start = tl.load(cu_ptr + doc)
    end = tl.load(cu_ptr + doc + 1)
    n_doc = end - start
    rows0 = start.to(tl.int64)
    shp = tl.maximum(n_doc, 1)
    m0 = pid_m * BLOCK_M
    qd = tl.make_tensor_descriptor(q_ptr + h * sqh + rows0 * sq, shape=[shp, 128], strides=[sq, 1], block_shape=[BLOCK_M, 128])
    kd = tl.make_tensor_descriptor(k_ptr + h * skh + rows0 * sk, shape=[shp, 128], strides=[sk, 1], block_shape=[BLOCK_N, 128])
    vd = tl.make_tensor_descriptor(v_ptr + h * svh + rows0 * sv, shape=[shp, 128], strides=[sv, 1], block_shape=[BLOCK_N, 128])
    q = tl.load_tensor_descriptor(qd, [m0, 0])
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, 128), tl.float32)
    for n0 in tl.range(0, n_doc, BLOCK_N, warp_specialize=WS):
        k = tl.load_tensor_descriptor(kd, [n0, 0])
        s = tl.dot(q, k.T) * qk_scale
        s = tl.where((n0 + tl.arange(0, BLOCK_N) < n_doc)[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load_tensor_descriptor(vd, [n0, 0])
        acc = tl.dot(p.to(tl.bfloat16), v, acc)
        m_i = m_new
    offs_m = tl.arange(0, BLOCK_M)
    rows = (start + m0 + offs_m).to(tl.int64)
    offs_d = tl.arange(0, 128)
    tl.store(o_ptr + rows[:, None] * (n_heads * 128) + h * 128 + offs_d[None, :], (acc / l_i[:, None]).to(tl.bfloat16),
             mask=((m0 + offs_m) < n_doc)[:, None])


@triton.jit
def _whole(q_ptr, k_ptr, v_ptr, o_ptr, cu_ptr, sq, sqh, sk, skh, sv, svh, n_rows, n_heads, qk_scale,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WS: tl.constexpr):
    pid_m = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    doc = tl.program_id(2)
    start = tl.load(cu_ptr + doc)
    end = tl.load(cu_ptr + doc + 1)
    m0 = start + pid_m * BLOCK_M
    if m0 < end:
        qd = tl.make_tensor_descriptor(q_ptr + h * sqh, shape=[n_rows, 128], strides=[sq, 1], block_shape=[BLOCK_M, 128])
        kd = tl.make_tensor_descriptor(k_ptr + h * skh, shape=[n_rows, 128], strides=[sk, 1], block_shape=[BLOCK_N, 128])
        vd = tl.make_tensor_descriptor(v_ptr + h * svh, shape=[n_rows, 128], strides=[sv, 1], block_shape=[BLOCK_N, 128])
        q = tl.load_tensor_descriptor(qd, [m0, 0])
        m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
        l_i = tl.zeros((BLOCK_M,), tl.float32)
        acc = tl.zeros((BLOCK_M, 128), tl.float32)
        for n0 in tl.range(start, end, BLOCK_N, warp_specialize=WS):
            k = tl.load_tensor_descriptor(kd, [n0, 0])
            s = tl.dot(q, k.T) * qk_scale
            s = tl.where((n0 + tl.arange(0, BLOCK_N) < end)[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.math.exp2(m_i - m_new)
            p = tl.math.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            v = tl.load_tensor_descriptor(vd, [n0, 0])
            acc = tl.dot(p.to(tl.bfloat16), v, acc)
            m_i = m_new
        offs_m = tl.arange(0, BLOCK_M)
        rows = (m0 + offs_m).to(tl.int64)
        offs_d = tl.arange(0, 128)
        tl.store(o_ptr + rows[:, None] * (n_heads * 128) + h * 128 + offs_d[None, :],
                 (acc / l_i[:, None]).to(tl.bfloat16), mask=((m0 + offs_m) < end)[:, None])


def launch(kind, ws, q, k, v, cu):
    S, H, _ = q.shape
    out = K.empty((S, H, 128), dtype=q.dtype, device=q.device)
    grid = (triton.cdiv(S, 128), H, cu.shape[0] - 1)
    cu = cu.contiguous()
    args = (q, k, v, out, cu, q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1))
    if kind == "noif":
        _noif[grid](*args, H, QK, BLOCK_M=128, BLOCK_N=128, WS=ws, num_warps=4, num_stages=2)
    else:
        _whole[grid](*args, S, H, QK, BLOCK_M=128, BLOCK_N=128, WS=ws, num_warps=4, num_stages=2)
    return out


def main():
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    op = get_op_group("attention")
    cudnn = next(b for b in op.baselines if b.name == "sdpa_cudnn")
    res = {"note": __doc__, "torch": torch.__version__, "rows": []}
    for bucket in ("h3_full", "ltx_video", "h3_stage1"):
        shape = next(s for s in op.shapes if s.name == bucket)
        sets = [op.make_inputs(shape, 1000 + i, "cuda") for i in range(2)]
        impls = {"sdpa_cudnn": (lambda f, p: (lambda *a: f(*p(a))))(cudnn.fn, cudnn.args)}
        for kind in ("noif", "whole"):
            for ws in (0, 1):
                impls[f"{kind}_ws{ws}"] = (lambda kd, w: (lambda *a: launch(kd, w, *a)))(kind, ws)
        ref = impls["sdpa_cudnn"](*sets[0]).float()
        errs = {}
        for n, f in impls.items():
            try:
                o = f(*sets[0]).float()
                errs[n] = {"rel_l2": ((o - ref).norm() / ref.norm()).item(), "finite": bool(o.isfinite().all())}
            except Exception as e:  # noqa: BLE001
                errs[n] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        ok = {n: f for n, f in impls.items() if errs[n].get("finite") and errs[n]["rel_l2"] < 1e-3}
        stats = T.time_interleaved(ok, sets, warmup=2, reps=reps, sync_reps=0)
        p50 = {n: x.summary()["p50_us"] for n, x in stats.items()}
        row = {"bucket": bucket, "errors_vs_cudnn": errs, "p50_us": p50,
               "vs_cudnn": {n: p50["sdpa_cudnn"] / v for n, v in p50.items()}}
        res["rows"].append(row)
        print(bucket, flush=True)
        for n in impls:
            t = f"{p50[n] / 1e3:8.3f} ms {row['vs_cudnn'][n]:5.3f}x" if n in p50 else "  not timed (error >= 1e-3)"
            print(f"  {n:12s} {t}  {errs[n]}", flush=True)
        json.dump(res, open(sys.argv[1], "w"), indent=1, default=str)


if __name__ == "__main__":
    main()

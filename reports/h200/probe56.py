"""H200 probe 56 (thirteenth session; exploration outside the judge, not a verdict): the attention template's new
TMA kernel (device-side descriptors per document, TMA = 1) with and without Triton 3.6's Hopper warp
specialisation (WS = 1: a producer warpgroup and two consumer warpgroups at num_warps 4), timed beside SDPA cuDNN
and the pointer kernel's best config of run 24 in one interleaved loop per bucket (rsi.harness.timing:
shuffled order per repetition, L2 flushed, CUDA events); each output's error against SDPA cuDNN's on the first
input set. Usage: python reports/h200/probe56.py OUT.json [REPS] [BUCKET ...]"""
import importlib
import json
import sys
import time

import torch

from rsi.harness import timing as T
from rsi.refs import get_op_group

BASE = {"BLOCK_M": 128, "num_stages": 2, "EXP2": 1, "SPLIT": 1}
CONFIGS = {
    "ptr_128x128_w8_s3": {**BASE, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3},      # run 24's best
    "tma_128x128_w8_s2": {**BASE, "BLOCK_N": 128, "num_warps": 8, "TMA": 1},
    "tma_128x64_w8_s3": {**BASE, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3, "TMA": 1},
    "tma_128x128_w4_s2": {**BASE, "BLOCK_N": 128, "num_warps": 4, "TMA": 1},
    "ws_128x128_w4_s2": {**BASE, "BLOCK_N": 128, "num_warps": 4, "TMA": 1, "WS": 1},
    "ws_128x128_w4_s1": {**BASE, "BLOCK_N": 128, "num_warps": 4, "num_stages": 1, "TMA": 1, "WS": 1},
    "ws_128x64_w4_s2": {**BASE, "BLOCK_N": 64, "num_warps": 4, "TMA": 1, "WS": 1},
    "ws_128x64_w4_s3": {**BASE, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "TMA": 1, "WS": 1},
    "ws_256x64_w4_s2": {**BASE, "BLOCK_M": 256, "BLOCK_N": 64, "num_warps": 4, "TMA": 1, "WS": 1},
}


def err(a, b):
    a, b = a.float(), b.float()
    d = a - b
    return {"rel_l2": (d.norm() / b.norm()).item(), "max_abs": d.abs().max().item(), "finite": bool(a.isfinite().all())}


def main():
    out_path = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    buckets = sys.argv[3:] or ["h3_full", "h3_stage1", "ltx_video"]
    op = get_op_group("attention")
    tpl = importlib.import_module("rsi.templates.attention")
    res = {"note": __doc__, "torch": torch.__version__, "device": torch.cuda.get_device_name(), "configs": CONFIGS,
           "rows": []}
    for bucket in buckets:
        shape = next(s for s in op.shapes if s.name == bucket)
        sets = [op.make_inputs(shape, 1000 + i, "cuda") for i in range(2)]
        cudnn = next(b for b in op.baselines if b.name == "sdpa_cudnn")
        impls = {"sdpa_cudnn": (lambda f, p: (lambda *a: f(*p(a))))(cudnn.fn, cudnn.args)}
        for name, cfg in CONFIGS.items():
            impls[name] = (lambda c: (lambda *a: tpl.launch(*a, **c)))(cfg)
        ref = impls["sdpa_cudnn"](*sets[0])
        errs, compile_s = {}, {}
        for n, f in impls.items():
            t0 = time.time()
            try:
                o = f(*sets[0])
                torch.cuda.synchronize()
                errs[n] = err(o, ref)
            except Exception as e:  # noqa: BLE001
                errs[n] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
            compile_s[n] = round(time.time() - t0, 2)
        ok = {n: f for n, f in impls.items() if "error" not in errs[n] and errs[n]["finite"]
              and errs[n]["rel_l2"] < 2e-2}
        stats = T.time_interleaved(ok, sets, warmup=2, reps=reps, sync_reps=0)
        p50 = {n: x.summary()["p50_us"] for n, x in stats.items()}
        fl = op.flops(shape)
        row = {"bucket": bucket, "dims": dict(shape.dims), "flops": fl, "errors_vs_cudnn": errs, "first_call_s": compile_s,
               "p50_us": p50, "tflops": {n: fl / (v * 1e-6) / 1e12 for n, v in p50.items()},
               "vs_cudnn": {n: p50["sdpa_cudnn"] / v for n, v in p50.items()}}
        res["rows"].append(row)
        print(bucket, flush=True)
        for n in impls:
            e = errs[n]
            t = f"{p50[n] / 1e3:8.3f} ms {row['tflops'][n]:6.1f} TF/s {row['vs_cudnn'][n]:5.3f}x" if n in p50 else "  not timed"
            print(f"  {n:22s} {t}  {e.get('rel_l2', e.get('error', ''))}", flush=True)
        json.dump(res, open(out_path, "w"), indent=1, default=str)


if __name__ == "__main__":
    main()

"""H200 probe 70 (prepared in the seventeenth session, not yet run; outside the judge, not a verdict): where the CuTe
FP8 attention template's time goes at h3_full (38,272 rows, 56 heads, 2 documents). Probe 69 timed its three
quantisation passes together at 3.74 ms of 50.6 ms (about 1.1 TB/s); this times each launch alone on buffers made
beforehand (the amax pass of one tensor, the q / k row quantiser, the V^T quantiser), the whole launch at the
heuristic and at BN 192, and the attention kernel alone on the pre-quantised operands, beside SDPA cuDNN, in one
interleaved loop (L2 flushed before every call), with each pass's bytes and GB/s.
Usage: python reports/h200/probe70.py OUT.json [REPS]"""
import json
import sys

import torch

from rsi import kernel as K
from rsi.harness import timing as T
from rsi.refs import get_op_group
from rsi.search.stats import paired_ratio_ci
from rsi.spaces import load_space
from rsi.templates import attention_fp8_cute as tpl

HEUR = load_space("attention_fp8").select("attention_fp8_cute").heuristic()
WIDE = {**HEUR, "BN": 192}


def main():
    out_path = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    op = get_op_group("attention_fp8")
    shape = next(s for s in op.shapes if s.name == "h3_full")
    sets = [op.make_inputs(shape, 1000 + i, "cuda") for i in range(2)]
    q, k, v, cu = sets[0]
    S, H, D = q.shape
    n_pad = (S + 31) // 32 * 32 + 32 * (cu.numel() - 1)
    part = torch.empty((3, H, tpl.AMAX_CTAS), device="cuda")
    scales = torch.empty((3, H), device="cuda")
    q8 = torch.empty((S, H, D), dtype=torch.float8_e4m3fn, device="cuda")
    k8 = torch.empty_like(q8)
    vt = torch.empty((H, D, n_pad), dtype=torch.float8_e4m3fn, device="cuda")
    tpl._quantize(q, k, v, cu, part, scales, q8, k8, vt)   # operands for the kernel-alone entries (first input set)
    out = torch.empty_like(q)
    static = {n: c for n, c in HEUR.items() if n != "DYNAMIC"}
    cudnn = next(b for b in op.baselines if b.name == "sdpa_cudnn")
    prepared = {id(s[0]): cudnn.args(s) for s in sets}
    impls = {
        "sdpa_cudnn": lambda *a: cudnn.fn(*prepared[id(a[0])]),
        "launch": lambda *a: tpl.launch(*a, **HEUR),
        "launch_bn192": lambda *a: tpl.launch(*a, **WIDE),
        "amax_one_tensor": lambda q_, k_, v_, cu_: K.cute_launch_dynamic(tpl._amax_host, q_, part[0]),
        "quant_rows_one_tensor": lambda q_, k_, v_, cu_: K.cute_launch_dynamic(tpl._quant_rows_host, q_, part[0], q8,
                                                                               scales[0]),
        "quant_vt": lambda q_, k_, v_, cu_: K.cute_launch_dynamic(tpl._quant_vt_host, v_, part[2], cu_, vt, scales[2]),
        "kernel_alone": lambda *a: K.cute_launch(tpl._attention_host, q8, k8, vt, out, cu, cu, scales, **static),
        "kernel_alone_bn192": lambda *a: K.cute_launch(tpl._attention_host, q8, k8, vt, out, cu, cu, scales,
                                                       **{**static, "BN": 192}),
    }
    for f in impls.values():          # compile outside the timed loop
        f(*sets[0])
    torch.cuda.synchronize()
    stats = T.time_interleaved(impls, sets, warmup=2, reps=reps, sync_reps=0)
    p50 = {n: x.summary()["p50_us"] for n, x in stats.items()}
    elems = S * H * D
    moved = {"amax_one_tensor": 2 * elems, "quant_rows_one_tensor": 3 * elems, "quant_vt": 2 * elems + H * D * n_pad}
    base = stats["sdpa_cudnn"].times_us
    res = {"note": __doc__, "torch": torch.__version__, "device": torch.cuda.get_device_name(), "heuristic": HEUR,
           "rows": S, "heads": H, "p50_us": p50,
           "vs_cudnn": {n: paired_ratio_ci(base, x.times_us) for n, x in stats.items()},
           "gbps": {n: b / p50[n] / 1e3 for n, b in moved.items()}}
    print(json.dumps({n: round(v / 1e3, 3) for n, v in p50.items()}), flush=True)
    print("GB/s", {n: round(v) for n, v in res["gbps"].items()}, flush=True)
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()

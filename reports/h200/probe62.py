"""H200 probe 62 (fourteenth session; outside the judge, not a verdict): did the cross-attention change of the
attention template (two more scalar loads per program, a guarded division) slow it? Runs 60 and 61 judged the same
heuristic config before and after it, on different machines: 0.79-0.88x SDPA cuDNN in run 60, 0.72-0.82x in run 61.
Here the template as of 5399fcc (reports/h200/probe62_attention_5399fcc.py, a verbatim copy) and the current one run
the heuristic config in one interleaved loop per bucket beside SDPA cuDNN (rsi.harness.timing: shuffled order per
repetition, L2 flushed, CUDA events), with paired ratio CIs; at ltx_text (cross-attention, which the old template
cannot run) a few other tiles too. Usage: python reports/h200/probe62.py OUT.json [REPS] [BUCKET ...]"""
import importlib
import importlib.util
import json
import sys

import torch

from rsi.harness import timing as T
from rsi.refs import get_op_group
from rsi.search.stats import paired_ratio_ci
from rsi.spaces import load_space

HEUR = load_space("attention").heuristic()
CROSS = {"m128n64_w8_s3": {**HEUR, "BLOCK_N": 64}, "m64n64_w4_s2": {**HEUR, "BLOCK_M": 64, "BLOCK_N": 64,
         "num_warps": 4, "num_stages": 2}, "m128n128_w8_s2": {**HEUR, "num_stages": 2},
         "tma_m128n128_w8_s3": {**HEUR, "TMA": 1}}


def err(a, b):
    a, b = a.float(), b.float()
    d = a - b
    return {"rel_l2": (d.norm() / b.norm()).item(), "max_abs": d.abs().max().item(), "finite": bool(a.isfinite().all())}


def main():
    out_path = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    buckets = sys.argv[3:] or ["ltx_video", "h3_stage1", "ltx_text"]
    op = get_op_group("attention")
    new = importlib.import_module("rsi.templates.attention")
    spec = importlib.util.spec_from_file_location("attention_5399fcc", "reports/h200/probe62_attention_5399fcc.py")
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    res = {"note": __doc__, "torch": torch.__version__, "device": torch.cuda.get_device_name(), "heuristic": HEUR,
           "rows": []}
    for bucket in buckets:
        shape = next(s for s in op.shapes if s.name == bucket)
        sets = [op.make_inputs(shape, 1000 + i, "cuda") for i in range(2)]
        cudnn = next(b for b in op.baselines if b.name == "sdpa_cudnn")
        impls = {"sdpa_cudnn": lambda *a: cudnn.fn(*cudnn.args(a)), "new": lambda *a: new.launch(*a, **HEUR)}
        if not shape.dims["kv_rows"]:
            impls["old_5399fcc"] = lambda q, k, v, cu, cu_k: old.launch(q, k, v, cu, **HEUR)
        else:
            for name, cfg in CROSS.items():
                impls[name] = (lambda c: (lambda *a: new.launch(*a, **c)))(cfg)
        ref = impls["sdpa_cudnn"](*sets[0])
        errs = {n: err(f(*sets[0]), ref) for n, f in impls.items()}
        torch.cuda.synchronize()
        stats = T.time_interleaved(impls, sets, warmup=2, reps=reps, sync_reps=0)
        p50 = {n: x.summary()["p50_us"] for n, x in stats.items()}
        base = stats["sdpa_cudnn"].times_us
        ci = {n: paired_ratio_ci(base, x.times_us) for n, x in stats.items() if n != "sdpa_cudnn"}
        row = {"bucket": bucket, "dims": dict(shape.dims), "errors_vs_cudnn": errs, "p50_us": p50,
               "vs_cudnn_median_ci": ci}
        if "old_5399fcc" in stats:
            row["new_vs_old_median_ci"] = paired_ratio_ci(stats["old_5399fcc"].times_us, stats["new"].times_us)
        res["rows"].append(row)
        print(bucket, flush=True)
        for n in impls:
            c = ci.get(n)
            print(f"  {n:22s} {p50[n] / 1e3:8.3f} ms  vs cuDNN {c if c else 1}  rel-L2 {errs[n]['rel_l2']:.2e}",
                  flush=True)
        if "new_vs_old_median_ci" in row:
            print(f"  new vs old (old time / new time): {row['new_vs_old_median_ci']}", flush=True)
        json.dump(res, open(out_path, "w"), indent=1, default=str)


if __name__ == "__main__":
    main()

"""H200 probe 63 (fourteenth session; outside the judge, not a verdict): probe 62 measured the attention template
with cross-attention (880b17f) 8% slower than before it (5399fcc) at ltx_video and h3_stage1, though its PTX differs
only by two scalar loads and a select (ptxas schedules the whole kernel differently). A candidate fix walks the keys
in document-relative rows from base pointers moved to the key document's first row
(reports/h200/probe63/attention_relative_keys.py). The three, heuristic config, in one interleaved loop per bucket
beside SDPA cuDNN (rsi.harness.timing), with paired ratio CIs against the old template.
Usage: python reports/h200/probe63.py OUT.json [REPS] [BUCKET ...]"""
import importlib.util
import json
import sys

import torch

from rsi.harness import timing as T
from rsi.refs import get_op_group
from rsi.search.stats import paired_ratio_ci
from rsi.spaces import load_space

HEUR = load_space("attention").heuristic()
FILES = {"old_5399fcc": "reports/h200/probe62_attention_5399fcc.py",
         "cross_880b17f": "reports/h200/probe63/attention_880b17f.py",
         "relative_keys": "reports/h200/probe63/attention_relative_keys.py"}


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def main():
    out_path = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    buckets = sys.argv[3:] or ["ltx_video", "h3_stage1"]
    op = get_op_group("attention")
    mods = {n: load(n, p) for n, p in FILES.items()}
    res = {"note": __doc__, "torch": torch.__version__, "device": torch.cuda.get_device_name(), "heuristic": HEUR,
           "rows": []}
    for bucket in buckets:
        shape = next(s for s in op.shapes if s.name == bucket)
        sets = [op.make_inputs(shape, 1000 + i, "cuda") for i in range(2)]
        cudnn = next(b for b in op.baselines if b.name == "sdpa_cudnn")
        impls = {"sdpa_cudnn": lambda *a: cudnn.fn(*cudnn.args(a)),
                 "old_5399fcc": lambda q, k, v, cu, cu_k: mods["old_5399fcc"].launch(q, k, v, cu, **HEUR),
                 "cross_880b17f": lambda *a: mods["cross_880b17f"].launch(*a, **HEUR),
                 "relative_keys": lambda *a: mods["relative_keys"].launch(*a, **HEUR)}
        ref = impls["sdpa_cudnn"](*sets[0]).float()
        errs = {n: ((f(*sets[0]).float() - ref).norm() / ref.norm()).item() for n, f in impls.items()}
        torch.cuda.synchronize()
        stats = T.time_interleaved(impls, sets, warmup=2, reps=reps, sync_reps=0)
        p50 = {n: x.summary()["p50_us"] for n, x in stats.items()}
        old = stats["old_5399fcc"].times_us
        row = {"bucket": bucket, "rel_l2_vs_cudnn": errs, "p50_us": p50,
               "vs_cudnn": {n: paired_ratio_ci(stats["sdpa_cudnn"].times_us, x.times_us) for n, x in stats.items()},
               "vs_old": {n: paired_ratio_ci(old, x.times_us) for n, x in stats.items()}}
        res["rows"].append(row)
        print(bucket, flush=True)
        for n in impls:
            print(f"  {n:15s} {p50[n] / 1e3:8.3f} ms  vs cuDNN {row['vs_cudnn'][n][0]:.3f}  vs old "
                  f"{row['vs_old'][n][0]:.3f} [{row['vs_old'][n][1]:.3f}, {row['vs_old'][n][2]:.3f}]  "
                  f"rel-L2 {errs[n]:.1e}", flush=True)
        json.dump(res, open(out_path, "w"), indent=1, default=str)


if __name__ == "__main__":
    main()

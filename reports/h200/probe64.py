"""H200 probe 64 (fourteenth session; outside the judge, not a verdict): probe 63's document-relative key walk
recovered half of the cross-attention template's slowdown (0.96-0.97x the template before it). Two variants of it:
the key document's bounds loaded after the program's early exit (attention_keys_after_exit.py), and, as a diagnostic
only, no guard on the final division (attention_no_guard.py: wrong, NaN, for a query document without keys), beside
the old template and SDPA cuDNN in one interleaved loop per bucket (rsi.harness.timing), heuristic config.
Usage: python reports/h200/probe64.py OUT.json [REPS] [BUCKET ...]"""
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
         "relative_keys": "reports/h200/probe63/attention_relative_keys.py",
         "keys_after_exit": "reports/h200/probe64/attention_keys_after_exit.py",
         "no_guard": "reports/h200/probe64/attention_no_guard.py"}


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
                 **{n: (lambda m: (lambda *a: m.launch(*a, **HEUR)))(mods[n])
                    for n in ("relative_keys", "keys_after_exit", "no_guard")}}
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

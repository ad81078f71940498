#!/usr/bin/env bash
# Device run 86 (thirtieth session): issue 12's two modulate producers on the H200 with the configs the H100 promoted
# (runs 81 h and 82 h: TAIL, UNPACK, PREFETCH), which no H200 has timed yet.
#   p: probe 86 (reports/h200/probe86.py, outside the judge; REPS, default 10), beside the h200 lock's kernels,
#      against the bf16 ops
#   j: the judged searches (--first: a sweep's config, not the search's; --reps JREPS, default 20), each where the
#      probe's fastest bitwise variant is faster than the locked kernel (OPS, default both op groups)
# On an H200 (the judges' huge shapes do not fit an H100's 80 GB), carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 OPS=modulate_fp8 bash reports/h200/run86.sh pj
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 OPS=gate_residual_modulate_fp8 bash reports/h200/run86.sh j   (same machine)
# (run 79's call fitted a probe of 13 variants and one judge in 600 s; two judges after the probe may not fit)
. reports/h200/lib.sh
probe_and_judge run86 probe86 "${1:?usage: run86.sh p|j|pj}"

#!/usr/bin/env bash
# Device run 87 (thirtieth session): the producers' RELOAD 4 (h in the program's scratch row: 106 registers and
# 18 programs an SM for modulate_fp8_warp, 162 and 12 for the residual) beside their heuristics.
#   p: probe 87 (reports/h200/probe87.py, outside the judge; REPS, default 10)
#   j: the judged search (--first: the probe's fastest bitwise variant, a sweep's config, not the search's; --reps
#      JREPS, default 20) where it is faster than the h200 lock's kernel in the probe
# On the lent machine (the target is the card's: h100 or h200), carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run87.sh p
. reports/h200/lib.sh
probe_and_judge run87 probe87 "${1:?usage: run87.sh p|j|pj}"

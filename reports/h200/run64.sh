#!/usr/bin/env bash
# H200 run 64 (fourteenth session), one call, carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run64.sh
# Probe 64: two variants of probe 63's document-relative key walk (bounds loaded after the early exit; no division
# guard, a diagnostic) beside the old template and SDPA cuDNN (reports/h200/probe64.py).
. reports/h200/lib.sh
setup_run run64
install_whl .whl || exit 1
run probe64 100 python3 reports/h200/probe64.py "$R/probe64.json" 10 ltx_video h3_stage1
tar -czf "$OUT/run64.tgz" -C /tmp run64

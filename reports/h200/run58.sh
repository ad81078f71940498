#!/usr/bin/env bash
# H200 run 58 (thirteenth session), one call, carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run58.sh
# Diagnosis of run 56's wrong warp-specialised attention outputs (reports/h200/probe58.py), then run 56's probe on
# the final template (the online-softmax step shared by both kernels since run 56).
. reports/h200/lib.sh
setup_run run58
install_whl .whl || exit 1
run probe58 200 python3 reports/h200/probe58.py "$R/probe58.json" 10
run probe56 200 python3 reports/h200/probe56.py "$R/probe56.json" 10 h3_full ltx_video h3_stage1
tar -czf "$OUT/run58.tgz" -C /tmp run58

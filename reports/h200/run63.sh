#!/usr/bin/env bash
# H200 run 63 (fourteenth session), one call, carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run63.sh
# Probe 63: the attention template before the cross-attention change, after it, and with document-relative key rows
# (the candidate fix for probe 62's 8% slowdown), heuristic config, beside SDPA cuDNN (reports/h200/probe63.py).
. reports/h200/lib.sh
setup_run run63
install_whl .whl || exit 1
run probe63 150 python3 reports/h200/probe63.py "$R/probe63.json" 10 ltx_video h3_stage1 h3_full
tar -czf "$OUT/run63.tgz" -C /tmp run63

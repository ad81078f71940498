#!/usr/bin/env bash
# H200 run 56 (thirteenth session), one call, carry [".whl", ".tools"]:
#   RSI_COMMIT=<commit> RSI_DIRTY=<0|1> bash reports/h200/run56.sh
# The attention template's TMA / warp-specialised kernel explored outside the judge (reports/h200/probe56.py).
. reports/h200/lib.sh
setup_run run56
install_whl .whl || exit 1
run probe56 400 python3 reports/h200/probe56.py "$R/probe56.json" 10
tar -czf "$OUT/run56.tgz" -C /tmp run56

#!/usr/bin/env bash
# H200 run 59 (thirteenth session), one call, carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run59.sh
# attention's new bucket h3_per_rank (38,272 rows, 14 heads: one of four Ulysses ranks at full size) through run 56's
# probe: SDPA cuDNN, the pointer kernel and the TMA kernel in one interleaved loop (reports/h200/probe56.py).
. reports/h200/lib.sh
setup_run run59
install_whl .whl || exit 1
run probe56 150 python3 reports/h200/probe56.py "$R/probe56.json" 10 h3_per_rank
tar -czf "$OUT/run59.tgz" -C /tmp run59

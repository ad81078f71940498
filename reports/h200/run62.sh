#!/usr/bin/env bash
# H200 run 62 (fourteenth session), one call, carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run62.sh
# Probe 62: the attention template before (5399fcc) and after the cross-attention change, heuristic config, in one
# interleaved loop per bucket beside SDPA cuDNN; other tiles at ltx_text (reports/h200/probe62.py).
. reports/h200/lib.sh
setup_run run62
install_whl .whl || exit 1
run probe62 200 python3 reports/h200/probe62.py "$R/probe62.json" 10 ltx_video h3_stage1 ltx_text
tar -czf "$OUT/run62.tgz" -C /tmp run62

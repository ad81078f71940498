#!/usr/bin/env bash
# H200 run 53 (eleventh session), one call, carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run53.sh
# The final code on the GPU: every fp8 GPU test (tests/unit/test_fp8_gpu.py: the four producers bitwise with QUOT 0
# and 1, swiglu_fp8 on every bf16 gate, fp8_linear, fp8_gemm_tma with its PREC 0 heuristic and a one-CTA-a-tile
# variant), and `rsi verify` of the lock's new gate_residual_modulate_fp8 kernel (re-judged on the GPU).
. reports/h200/lib.sh
setup_run run53
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
run gpu_tests 300 python3 -m pytest tests/unit/test_fp8_gpu.py -q -p no:xdist -p no:cacheprovider -o addopts=""
run verify 200 python3 -m rsi verify --op-group gate_residual_modulate_fp8 --gpu h200 --out "$R/verify.json"
tar -czf "$OUT/run53.tgz" -C /tmp run53

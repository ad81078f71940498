#!/usr/bin/env bash
# H200 run 52 (eleventh session), one call, carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run52.sh
# fp8_gemm's Triton TMA heuristic (PREC 0, fast accumulation) judged again, now against both incumbents:
# torch._scaled_mm as before and with cuBLASLt's fast accumulation (scaled_mm_fast, new). Run 51 timed it at
# 1.05-1.09x the first alone (0.997x at ltx_qkvo).
. reports/h200/lib.sh
setup_run run52
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
run search_fp8_gemm_tma 260 python3 -m rsi search --op-group fp8_gemm --template fp8_gemm_tma --gpu h200 \
  --budget 1,3.5m --summary-out "$R/search_fp8_gemm_tma.json"
cp .rsi/rsi.db "$R/rsi.db"
tar -czf "$OUT/run52.tgz" -C /tmp run52 -C "$PWD" verified_kernels

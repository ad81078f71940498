#!/usr/bin/env bash
# H200 run 54 (eleventh session), one call, carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run54.sh
# fp8_gemm's Triton TMA heuristic, now with FLATTEN 1 (the tile loop and the K loop flattened into one pipelined
# loop), judged against torch._scaled_mm and its fast-accumulation form; run 52 timed FLATTEN 0 at 0.89-1.03x the
# latter.
. reports/h200/lib.sh
setup_run run54
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
run search_fp8_gemm_tma 200 python3 -m rsi search --op-group fp8_gemm --template fp8_gemm_tma --gpu h200 \
  --budget 1,3m --summary-out "$R/search_fp8_gemm_tma.json"
cp .rsi/rsi.db "$R/rsi.db"
tar -czf "$OUT/run54.tgz" -C /tmp run54 -C "$PWD" verified_kernels

#!/usr/bin/env bash
# H200 run 51 (eleventh session), one call, carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run51.sh
#   1. `rsi search --op-group fp8_gemm --template fp8_gemm_tma` again, the heuristic now with PREC 0 (fast
#      accumulation; run 50a judged PREC 1 at 0.69-0.77x torch._scaled_mm) and two drawn configs;
#   2. the two-stage request at 1344x768 with --attention fp8 --precision fp8 (every fused producer the lock has:
#      modulate_fp8, gate_residual_modulate_fp8 (new), swiglu_fp8, head_merge_fp8) and with dense bf16 from the same
#      seed, and the latent and frame error between them (runtime/latent_error.py).
. reports/h200/lib.sh
setup_run run51
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
run search_fp8_gemm_tma 290 python3 -m rsi search --op-group fp8_gemm --template fp8_gemm_tma --gpu h200 \
  --budget 3,4m --summary-out "$R/search_fp8_gemm_tma.json"
for a in "dense bf16" "fp8 fp8"; do
  set -- $a
  run two_stage_$1_$2 120 python3 -m rsi run-pipeline --prompt "a red fox runs through snow" --config full \
    --resolution 1344x768 --attention $1 --precision $2 --warmup --repeat 2 --no-mux \
    --json "$R/two_stage_$1_$2.json" --save-latents /tmp/lat_$1_$2.pt
done
python3 -m runtime.latent_error /tmp/lat_dense_bf16.pt /tmp/lat_fp8_fp8.pt --json "$R/two_stage_fp8_fp8_error.json" \
  > "$R/two_stage_fp8_fp8_error.log" 2>&1; tail -8 "$R/two_stage_fp8_fp8_error.log"
cp .rsi/rsi.db "$R/rsi.db"
tar -czf "$OUT/run51.tgz" -C /tmp run51 -C "$PWD" verified_kernels

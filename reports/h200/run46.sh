#!/usr/bin/env bash
# H200 run 46 (tenth session). Two calls to one warm machine (the second needs the first's CuTe part 1):
#   call 1, carry [".whl", ".cute/part1"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run46.sh a
#     1. one H3 block at 38,248 rows (runtime/bench_h200.py, 2-block model) with e4m3 linears, each attention class,
#        with the fused producers the lock serves (swiglu_fp8 -> fc2, now head_merge_fp8 -> out_proj) and again
#        without them (every activation quantised inside its Fp8Linear); the bf16 block beside them;
#     2. the two-stage request at 1344x768 with --attention fp8 --precision fp8 (modulate_fp8 now feeds block 0's
#        qkv) and with dense bf16, and the latent error between them.
#   call 2 at once, carry [".cute/part2", ".cute/extra"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run46.sh b
#     3. the CuTe DSL FP8 GEMM probe (reports/h200/probe46/: a Hopper TMA + WGMMA e4m3 GEMM with the row/column scale
#        epilogue, written this session, compiled on the CPU only so far) against torch._scaled_mm: correctness
#        against the fp32 product, guard rows, determinism, and CUDA-event medians.
STEP=${1:?usage: run46.sh a|b}
. reports/h200/lib.sh
setup_run "run46$STEP"
if [ "$STEP" = a ]; then
  stash_cute_part1 && install_whl .whl || exit 1
  run block 240 python3 -m runtime.bench_h200 --modes verified --attention dense fp8 --precision bf16 fp8 \
    --skip-request --blocks 2 --forward-reps 1 --out "$R/bench_block.json"
  for a in "dense bf16" "fp8 fp8"; do
    set -- $a
    run two_stage_$1_$2 120 python3 -m rsi run-pipeline --prompt "a red fox runs through snow" --config full \
      --resolution 1344x768 --attention $1 --precision $2 --warmup --repeat 2 --no-mux \
      --json "$R/two_stage_$1_$2.json" --save-latents /tmp/lat_$1_$2.pt
  done
  python3 -m runtime.latent_error /tmp/lat_dense_bf16.pt /tmp/lat_fp8_fp8.pt --json "$R/two_stage_fp8_fp8_error.json" \
    > "$R/two_stage_fp8_fp8_error.log" 2>&1; tail -8 "$R/two_stage_fp8_fp8_error.log"
else
  install_cute || exit 1
  python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())" > "$R/versions.txt" 2>&1
  run cute_gemm 420 python3 reports/h200/probe46/gpu_check.py
fi
tar -czf "$OUT/run46$STEP.tgz" -C /tmp "run46$STEP"

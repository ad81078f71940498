#!/usr/bin/env bash
# Device run 90 (thirty-second session): the judge's full-bucket gap (probe 90) and the CuTe producers' timings on
# this card (probes 88 and 89).
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                           bash reports/h200/run90.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run90.sh b
#      b: 1. probe 90 (modulate_fp8_cute and the locked kernel in-process, on local arenas, in a producer over CUDA
#            IPC, and in the sandboxed producer; REPS, default 20)
#         2. probe 88's timing (modulate_fp8_cute against the bf16 modulate kernel; each variant bitwise first)
#         3. probe 89's timing (gate_residual_modulate_fp8_cute likewise)
#   call 3 at once (warm), call 2's carry:                          RSI_COMMIT=... RSI_DIRTY=0 bash reports/h200/run90.sh n
#      n: 1. probe 90 under Nsight Compute (--ncu: 4 repetitions; every modulate kernel's duration and DRAM bytes,
#            per process, each launch replayed alone with the caches flushed)
#         2. the judged search of modulate_fp8_cute's heuristic (--first; JREPS, default 40)
#   h (instead of b, on an H200): probes 88 and 89's timings, then the judged search of swiglu_fp8's one-piece PART
#      config at JREPS (default 40) repetitions: probe 79 timed it at 1.013x / 1.004x / 1.033x the bf16 swiglu kernel
#      on the H200; run 79's judge at 20 repetitions accepted it at 1.27x / 1.07x / 1.19x the lock but inside the
#      A/A band (0.215 at stage1). swiglu_fp8's judge does not fit an H100 (its huge shape, run 73).
#   d (instead of b, where device time is short): probe 90, then probe 90 under Nsight Compute (n's step 1)
#   c (instead of b; call 2's carry): probe 91, the producers and the bf16 ops each timed right after
#      nothing, the eager reference, or an fc2-shaped GEMM, with the SM clock of each call (its spin's duration)
#      (d's ncu pass ended at the producer: it died with signal 11 under ncu as it loaded the CuTe candidate)
#   e (instead of b; call 2's carry; written, not run in the thirty-second session): probe 92, whether host time
#      enters the CuTe producers' event intervals (an event after the flush queried when the launch returns; the
#      judge's spin and an 8x longer one)
STEP=${1:?usage: run90.sh a|b|c|d|e|h|n}
. reports/h200/lib.sh
cute_run "$STEP" run90
if [ "$STEP" = b ]; then
  probe probe90 200 20
  probe probe88 150 10
  probe probe89 150 10
  exit 0
fi
if [ "$STEP" = h ]; then
  probe probe88 150 10
  probe probe89 150 10
  JREPS=${JREPS:-40} judge_first swiglu_fp8 swiglu_fp8 BLOCK_A=16384,BLOCK_B=0,BLOCK_C=0,ROWS=1,num_warps=32,$(
    )EVICT=evict_first,FAST=0,SUB=16,MAXN=16,QUOT=1,TABLE=2,RELOAD=0,FLAT=1,PERSIST=132,PART=1,MAXNREG=0 270
  [ -e .rsi/rsi.db ] && python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null
  pack
  exit 0
fi
ncu_probe() {
  NCU="ncu --target-processes all --clock-control none -k regex:modulate --metrics"
  NCU="$NCU gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv"
  echo "$NCU --log-file ncu.csv python3 reports/h200/probe90.py probe90_ncu.json --ncu" >> "$R/commands.txt"
  run ncu 220 $NCU --log-file "$R/ncu.csv" python3 reports/h200/probe90.py "$R/probe90_ncu.json" --ncu; pack
}
if [ "$STEP" = c ]; then
  probe probe91 300 15
  exit 0
fi
if [ "$STEP" = e ]; then
  probe probe92 240 15
  exit 0
fi
if [ "$STEP" = d ]; then
  probe probe90 200 20
  ncu_probe
  exit 0
fi
if [ "$STEP" = n ]; then
  ncu_probe
  JREPS=${JREPS:-40} judge_first modulate_fp8 modulate_fp8_cute THREADS=128,CHUNKS=8 240
  [ -e .rsi/rsi.db ] && python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null
  pack
  exit 0
fi
echo "unknown step $STEP"; exit 2

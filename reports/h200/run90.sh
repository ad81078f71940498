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
#   call 3 at once (warm), no carry needed:                          RSI_COMMIT=... RSI_DIRTY=0 bash reports/h200/run90.sh n
#      n: 1. probe 90 under Nsight Compute (--ncu: 4 repetitions; every modulate kernel's duration and DRAM bytes,
#            per process, each launch replayed alone with the caches flushed)
#         2. the judged search of modulate_fp8_cute's heuristic (--first; JREPS, default 40)
STEP=${1:?usage: run90.sh a|b|n}
. reports/h200/lib.sh
cute_run "$STEP" run90
pack() { rm -f "$OUT"/*; tar -czf "$OUT/run90$STEP.tgz" -C /tmp run90 -C "$PWD" verified_kernels; }
if [ "$STEP" = b ]; then
  echo "python3 reports/h200/probe90.py probe90.json ${REPS:-20}" >> "$R/commands.txt"
  run probe90 200 python3 reports/h200/probe90.py "$R/probe90.json" "${REPS:-20}"; pack
  echo "python3 reports/h200/probe88.py probe88.json ${REPS:-10}" >> "$R/commands.txt"
  run probe88 150 python3 reports/h200/probe88.py "$R/probe88.json" "${REPS:-10}"; pack
  echo "python3 reports/h200/probe89.py probe89.json ${REPS:-10}" >> "$R/commands.txt"
  run probe89 150 python3 reports/h200/probe89.py "$R/probe89.json" "${REPS:-10}"; pack
  exit 0
fi
if [ "$STEP" = n ]; then
  NCU="ncu --target-processes all --clock-control none -k regex:modulate --metrics"
  NCU="$NCU gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv"
  echo "$NCU --log-file ncu.csv python3 reports/h200/probe90.py probe90_ncu.json --ncu" >> "$R/commands.txt"
  run ncu 220 $NCU --log-file "$R/ncu.csv" python3 reports/h200/probe90.py "$R/probe90_ncu.json" --ncu; pack
  JREPS=${JREPS:-40} judge_first modulate_fp8 modulate_fp8_cute THREADS=128,CHUNKS=8 240
  [ -e .rsi/rsi.db ] && python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null
  pack
  exit 0
fi
echo "unknown step $STEP"; exit 2

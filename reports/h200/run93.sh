#!/usr/bin/env bash
# Device run 93 (thirty-third session, on an H200): the judge with its longer spin (QUEUE_CYCLES 4M, ~2 ms, and each
# row's count of late calls), probe 92, and the CuTe producers judged on the H200.
#   here, once: bash reports/h200/device_deps.sh && bash reports/h200/cute_carry.sh
#   call 1, carry [".whl", ".cute/part1"]:                           bash reports/h200/run93.sh a
#   call 2 at once, carry [".cute/part2", ".cute/extra", ".tools"]:  RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run93.sh j
#      j: 1. probe 91 (the producers and the bf16 ops behind nothing, the eager reference, an fc2-shaped GEMM; REPS, 12)
#         2. the judged search of modulate_fp8_cute 128 x 8 (--first; JREPS, default 40)
#   call 3 at once (warm), call 2's carry:                          ... bash reports/h200/run93.sh g
#      g: 1. the judged search of gate_residual_modulate_fp8_cute 256 x 4 (--first; JREPS)
#         2. the judged search of swiglu_fp8's one-piece PART config (run 90's step h; JREPS)
#   call 4 at once (warm), call 2's carry:                          ... bash reports/h200/run93.sh e
#      e: probe 92 (500k and 4M spin cycles: late calls and times of the producers and the bf16 ops; REPS, 10), then
#         probe 94 (thirty-fourth session: K.cute_launch's default path against RSI_CUTE_FFI=1, bitwise, host time
#         a launch, event time; REPS, 20)
#   m, k (thirty-fourth session, where device time is short): j's judge of modulate_fp8_cute alone; g's judge of
#      gate_residual_modulate_fp8_cute alone
#   w (thirty-fourth session, an H100 where device time is short): probe 94, then j's judge of modulate_fp8_cute
#   v (instead of j, on an H100; call 2's carry): probes 92 and 94, then j's judge of modulate_fp8_cute (the
#      longer spin checked)
#   (between calls 2 and 3, or after 3, the same warm machine may run run76.sh c: issue 11's FP8 attention judge)
STEP=${1:?usage: run93.sh a|j|g|m|k|e|v|w}
. reports/h200/lib.sh
cute_run "$STEP" run93
case "$STEP" in
  j) probe probe91 240 12; judge_modulate_cute ;;
  g) judge_gate_cute; judge_swiglu_part ;;
  m) judge_modulate_cute ;;
  k) judge_gate_cute ;;
  e) probe probe92 200 10; probe probe94 150 20 ;;
  w) probe probe94 150 20; judge_modulate_cute ;;
  v) probe probe92 200 10; probe probe94 150 20; judge_modulate_cute ;;
  *) echo "unknown step $STEP"; exit 2 ;;
esac

#!/usr/bin/env bash
# Device run 86 (thirtieth session): issue 12's two modulate producers on the H200 with the configs the H100 promoted
# (runs 81 h and 82 h: TAIL, UNPACK, PREFETCH), which no H200 has timed yet.
#   p: probe 86 (reports/h200/probe86.py, outside the judge; REPS, default 10), beside the h200 lock's kernels,
#      against the bf16 ops
#   j: the judged searches (--first: a sweep's config, not the search's; --reps JREPS, default 20), each where the
#      probe's fastest bitwise variant is faster than the locked kernel (OPS, default both op groups)
# On an H200 (the judges' huge shapes do not fit an H100's 80 GB), carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 OPS=modulate_fp8 bash reports/h200/run86.sh pj
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 OPS=gate_residual_modulate_fp8 bash reports/h200/run86.sh j   (same machine)
# (run 79's call fitted a probe of 13 variants and one judge in 600 s; two judges after the probe may not fit)
STEP=${1:?usage: run86.sh p|j|pj}
. reports/h200/lib.sh
setup_run run86
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
detect_target
if [ "$STEP" = p ] || [ "$STEP" = pj ]; then
  echo "python3 reports/h200/probe86.py probe86.json ${REPS:-10}" >> "$R/commands.txt"
  run probe86 300 python3 reports/h200/probe86.py "$R/probe86.json" "${REPS:-10}"
  cp "$R/probe86.json" "$R/probe86.log" "$R/commands.txt" "$R/gpu.txt" "$R/commit.txt" "$R/lock.txt" "$OUT/" 2>/dev/null
  [ "$STEP" = pj ] || exit 0
fi
J=$R/probe86.json; [ -e "$J" ] || J=reports/h200/run86/probe86.json
[ -e "$J" ] || { echo "no probe 81 here or in reports/h200/run86: run step p first"; exit 1; }
for OP in ${OPS:-modulate_fp8 gate_residual_modulate_fp8}; do
  read -r NAME TPL FIRST < <(probe_choice "$J" "$OP")
  echo "$OP: ${NAME:-no variant faster than the locked kernel}"
  [ -n "$FIRST" ] || continue
  judge_first "$OP" "$TPL" "$FIRST" 240
  # after every judge (the call's 600 s may end the next one): its verdicts and the lock so far
  [ -e .rsi/rsi.db ] && python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null
  cp "$R/commands.txt" "$R/gpu.txt" "$R/commit.txt" "$R/lock.txt" "$OUT/" 2>/dev/null
  tar -czf "$OUT/run86j.tgz" -C /tmp run86 -C "$PWD" verified_kernels
done

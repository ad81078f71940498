#!/usr/bin/env bash
# Device run 83 (twenty-ninth session): gate_residual_modulate_fp8_warp's PREFETCH (the next row's res and branch loaded during this row's
# bytes) beside the h100 lock's config and the row loop without it.
#   p: probe 83 (reports/h200/probe83.py, outside the judge; REPS, default 10)
#   j: the judged search (--first: the probe's fastest bitwise variant, a sweep's config, not the search's; --reps
#      JREPS, default 20) where it is faster than the h200 lock's kernel in the probe
# On the lent machine (the target is the card's: h100 or h200), carry [".whl", ".tools"]:
#   RSI_COMMIT=<clean HEAD> RSI_DIRTY=0 bash reports/h200/run83.sh pj
STEP=${1:?usage: run83.sh p|j|pj}
. reports/h200/lib.sh
setup_run run83
install_whl .whl || exit 1
export RSI_BWRAP=$PWD/.tools/bwrap COLUMNS=160
detect_target
if [ "$STEP" = p ] || [ "$STEP" = pj ]; then
  echo "python3 reports/h200/probe83.py probe83.json ${REPS:-10}" >> "$R/commands.txt"
  run probe83 300 python3 reports/h200/probe83.py "$R/probe83.json" "${REPS:-10}"
  cp "$R/probe83.json" "$R/probe83.log" "$R/commands.txt" "$R/gpu.txt" "$R/commit.txt" "$R/lock.txt" "$OUT/" 2>/dev/null
  [ "$STEP" = pj ] || exit 0
fi
J=$R/probe83.json; [ -e "$J" ] || J=reports/h200/run83/probe83.json
[ -e "$J" ] || { echo "no probe 83 here or in reports/h200/run83: run step p first"; exit 1; }
for OP in gate_residual_modulate_fp8; do
  read -r NAME TPL FIRST < <(probe_choice "$J" "$OP")
  echo "$OP: ${NAME:-no variant faster than the locked kernel}"
  [ -n "$FIRST" ] || continue
  judge_first "$OP" "$TPL" "$FIRST" 240
  # after every judge (the call's 600 s may end the next one): its verdicts and the lock so far
  [ -e .rsi/rsi.db ] && python3 reports/h200/verdicts_from_db.py .rsi/rsi.db "$R/verdicts.json" 2>/dev/null
  cp "$R/commands.txt" "$R/gpu.txt" "$R/commit.txt" "$R/lock.txt" "$OUT/" 2>/dev/null
  tar -czf "$OUT/run83j.tgz" -C /tmp run83 -C "$PWD" verified_kernels
done
